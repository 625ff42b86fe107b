"""Checks rex's SWE-bench log parsers against swebench's own: every case of the corpora
(tests/swebench/corpus_*.py, each defining `cases(rng)`) and of any real logs given is run through
both drivers, rex's (parse_logs.cpp, the executable given) and swebench's (parse_logs.py, with this
interpreter), and the results must be the same: the same names with the same statuses in the same
order, or both failing.

    test_parsers.py PARSE_LOGS_EXE [--seed N] [--logs DIR] [--only NAME,...] [--show N]
                    [--deadline SECONDS] [--dump FILE]

The seed (REX_SWEBENCH_SEED, or --seed) is printed, so that a failure can be replayed. Real logs
are files named <registry name>__<anything>.txt under --logs. Every registry name needs at least
MIN_CASES cases; the test fails naming those that have fewer.
"""

import argparse
import collections
import concurrent.futures
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # loading the corpora leaves no __pycache__ in the source tree
DEFAULT_SEED = 20240917
MIN_CASES = 20
DEFAULT_DEADLINE = 420.0  # seconds for everything (ctest's own limit is 600)
CLIP = 600  # characters of a log or result shown per difference


def registry_names() -> list[str]:
    from swebench.harness.log_parsers import PARSER_REGISTRY

    return list(PARSER_REGISTRY)


def as_text(log) -> str:
    """A case's log as valid text: bytes decoded as swebench would read them (invalid bytes ->
    U+FFFD), and a str made encodable (lone surrogates cannot be carried as UTF-8)."""
    if isinstance(log, (bytes, bytearray)):
        return bytes(log).decode("utf-8", errors="replace")
    return str(log).encode("utf-8", errors="replace").decode("utf-8")


def normalize(case: dict, origin: str) -> dict:
    return {
        "parser": str(case["parser"]),
        "instance_id": as_text(case.get("instance_id", "")),
        "repo": as_text(case.get("repo", "")),
        "version": as_text(case.get("version", "")),
        "log": as_text(case.get("log", "")),
        "origin": origin,
    }


def corpus_cases(seed: int) -> tuple[list[dict], list[str]]:
    """Every case of every corpus module, each module with its own generator seeded from seed."""
    cases, problems = [], []
    for path in sorted(HERE.glob("corpus_*.py")):
        module_name = f"rex_swebench_{path.stem}"
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            rng = random.Random(f"{seed}:{path.stem}")
            for index, case in enumerate(module.cases(rng)):
                cases.append(normalize(case, f"{path.name}#{index}"))
        except Exception:  # noqa: BLE001 - a broken corpus is reported, not fatal to the others
            problems.append(f"{path.name}: {traceback.format_exc(limit=3)}")
    return cases, problems


def log_cases(directory: Path) -> list[dict]:
    cases = []
    for path in sorted(directory.rglob("*__*.txt")):
        parser = path.name.split("__", 1)[0]
        cases.append(normalize({"parser": parser, "log": path.read_bytes()}, str(path)))
    return cases


def run_driver(name: str, command: list[str], payload: bytes, count: int, deadline: float):
    """The driver's results, one per case (fewer when it stopped early), and an error message
    when it hung, crashed or printed too few results."""
    timeout = max(1.0, deadline - time.monotonic())
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, to stop it whole when it hangs
        )
    except OSError as e:
        return [], f"{name}: cannot start {command[0]}: {e}"
    hung = False
    try:
        out, err = process.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
    text = out.decode("utf-8", errors="replace")
    if hung:  # the last line may be cut short
        text = text[: text.rfind("\n") + 1]
    results = []
    # Lines end at "\n" only: names may hold other line breaks (U+2028 ...) unescaped.
    for raw in text.split("\n"):
        if not raw:
            continue
        try:
            results.append(json.loads(raw))
        except ValueError:
            return results, f"{name} printed a line that is not JSON: {raw[:200]!r}"
    if hung:
        return results, (
            f"{name} did not finish within the deadline ({timeout:.0f} s), hung after"
            f" {len(results)} of {count} results"
        )
    if process.returncode != 0 or len(results) != count:
        detail = err.decode("utf-8", errors="replace")[-2000:]
        return results, (
            f"{name} exited with {process.returncode} after {len(results)} of {count} results"
            + (f"\n{detail}" if detail else "")
        )
    return results, None


def clip(text: str, limit: int = CLIP) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text)} chars]"


def agree(ours: dict, theirs: dict) -> bool:
    if "error" in ours and "error" in theirs:
        return True
    return ours.get("map") == theirs.get("map") and "error" not in ours and "error" not in theirs


def describe(case: dict, ours: dict | None = None, theirs: dict | None = None) -> str:
    lines = [f"--- {case['parser']} ({case['origin']})"]
    if case["instance_id"] or case["repo"] or case["version"]:
        lines.append(
            f"    instance_id={case['instance_id']!r} repo={case['repo']!r}"
            f" version={case['version']!r}"
        )
    lines.append(f"    log:      {clip(repr(case['log']))}")
    if ours is None or theirs is None:
        return "\n".join(lines)
    a, b = ours.get("map"), theirs.get("map")
    if a is not None and b is not None:
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        lines.append(f"    sizes: rex {len(a)}, swebench {len(b)}; first difference at entry {at}")
        lines.append(f"    rex@{at}:      {a[at] if at < len(a) else None!r}")
        lines.append(f"    swebench@{at}: {b[at] if at < len(b) else None!r}")
    lines.append(f"    rex:      {clip(json.dumps(ours, ensure_ascii=False))}")
    lines.append(f"    swebench: {clip(json.dumps(theirs, ensure_ascii=False))}")
    return "\n".join(lines)


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("exe", help="rex_swebench_parse_logs")
    seed = int(os.environ.get("REX_SWEBENCH_SEED", DEFAULT_SEED))
    args.add_argument("--seed", type=int, default=seed)
    args.add_argument("--logs", type=Path, help="a directory of <parser>__<anything>.txt logs")
    args.add_argument("--only", help="comma-separated registry names to run (others skipped)")
    args.add_argument("--show", type=int, default=8, help="differences shown in full")
    args.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE)
    args.add_argument("--dump", type=Path, help="write the cases as JSON lines here")
    opts = args.parse_args()

    deadline = time.monotonic() + opts.deadline
    print(f"seed {opts.seed} (REX_SWEBENCH_SEED or --seed to replay)")
    names = registry_names()
    cases, problems = corpus_cases(opts.seed)
    if opts.logs:
        cases += log_cases(opts.logs)
    unknown = sorted({c["parser"] for c in cases} - set(names))
    if opts.only:
        wanted = set(opts.only.split(","))
        cases = [c for c in cases if c["parser"] in wanted]
        names = [n for n in names if n in wanted]

    payload = "".join(
        json.dumps({k: c[k] for k in ("parser", "instance_id", "repo", "version", "log")}) + "\n"
        for c in cases
    ).encode("utf-8")
    if opts.dump:
        opts.dump.write_bytes(payload)

    drivers = {
        "rex (parse_logs.cpp)": [opts.exe],
        "swebench (parse_logs.py)": [sys.executable, str(HERE / "parse_logs.py")],
    }
    with concurrent.futures.ThreadPoolExecutor(len(drivers)) as pool:
        futures = {
            name: pool.submit(run_driver, name, command, payload, len(cases), deadline)
            for name, command in drivers.items()
        }
        (ours, our_error), (theirs, their_error) = (f.result() for f in futures.values())

    failed = False
    for results, message in ((ours, our_error), (theirs, their_error)):
        if message:
            print(f"FAIL: {message}")
            failed = True
            if len(results) < len(cases):
                print("  the first case without its result:")
                print(describe(cases[len(results)]))

    counts = collections.Counter(c["parser"] for c in cases)
    agreed = collections.Counter()
    differences = []
    for case, a, b in zip(cases, ours, theirs):
        if agree(a, b):
            agreed[case["parser"]] += 1
        else:
            differences.append((case, a, b))

    width = max(map(len, names), default=10)
    print(f"{'parser':<{width}}  cases  agree")
    for name in names:
        mark = "" if agreed[name] == counts[name] else "  <-- differs"
        print(f"{name:<{width}}  {counts[name]:5}  {agreed[name]:5}{mark}")
    print(f"total: {len(cases)} cases, {sum(agreed.values())} agree, {len(differences)} differ")

    # The first difference of each parser first, then the others in order.
    rank = collections.Counter()
    ranked = []
    for order, (case, a, b) in enumerate(differences):
        ranked.append((rank[case["parser"]], order, case, a, b))
        rank[case["parser"]] += 1
    for _, _, case, a, b in sorted(ranked, key=lambda r: r[:2])[: opts.show]:
        print(describe(case, a, b))
    if len(differences) > opts.show:
        print(f"... and {len(differences) - opts.show} more differences")

    few = [n for n in names if counts[n] < MIN_CASES]
    if few:
        print(f"FAIL: fewer than {MIN_CASES} cases for {len(few)} parsers: {', '.join(few)}")
    for problem in problems:
        print(f"FAIL: corpus module did not load or generate: {problem}")
    if unknown:
        print(f"note: cases name parsers swebench does not have: {', '.join(unknown)}")
    failed = failed or bool(differences or few or problems)
    print("FAILED" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
