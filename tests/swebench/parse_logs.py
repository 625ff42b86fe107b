"""Runs swebench's own log parsers (its PARSER_REGISTRY) over cases read as JSON lines from stdin,
one result line each on stdout: the reference side of tests/swebench/test_parsers.py, speaking
the protocol of tests/swebench/parse_logs.cpp.

In:  {"parser": "parse_log_pytest", "instance_id": "...", "repo": "...", "version": "...",
      "log": "..."}
Out: {"map": [[name, status], ...]} (in the dict's order), or {"error": "<ExceptionType>"} when
     the parser raised, or {"error": "unknown parser"}.

Run it with the Python environment that has swebench 5.0.2 installed.
"""

import contextlib
import enum
import json
import os
import sys

from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.types import TestSpec


def _text(value) -> str:
    """A dict key or status as text (statuses are TestStatus values; an Enum is taken by value)."""
    if isinstance(value, enum.Enum):
        value = value.value
    return value if isinstance(value, str) else repr(value)


def _test_spec(case: dict) -> TestSpec:
    # Only instance_id, repo and version are read by parsers; the rest is filler.
    return TestSpec(
        instance_id=case.get("instance_id", ""),
        image="",
        eval_script_list=[],
        repo=case.get("repo", ""),
        version=case.get("version", ""),
        FAIL_TO_PASS=[],
        PASS_TO_PASS=[],
        log_parser=case.get("parser", ""),
    )


def run_case(case: dict, sink) -> dict:
    parser = PARSER_REGISTRY.get(case.get("parser", ""))
    if parser is None:
        return {"error": "unknown parser"}
    try:
        # Some parsers print warnings; keep them off the protocol's stdout.
        with contextlib.redirect_stdout(sink):
            result = parser(case.get("log", ""), _test_spec(case))
    except Exception as e:  # noqa: BLE001 - any raise is the parser refusing its input
        return {"error": type(e).__name__}
    return {"map": [[_text(name), _text(status)] for name, status in result.items()]}


def main() -> int:
    out = sys.stdout
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8").strip()
            if not line:
                continue
            out.write(json.dumps(run_case(json.loads(line), sink)) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
