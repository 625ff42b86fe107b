#!/usr/bin/env python3
"""Fails when a test was skipped, or not run, and the repository does not allow it.

    check_skips.py --junit RESULTS.xml [--report SKIPS.tsv] [--allowed tests/allowed_skips.txt]

RESULTS.xml is CTest's `--output-junit`: each CTest test that was skipped (SKIP_RETURN_CODE,
SKIP_REGULAR_EXPRESSION, a discovered GoogleTest test that called GTEST_SKIP), disabled or not
run counts. SKIPS.tsv is what the test processes wrote to REX_SKIP_REPORT (tests/support/
skip_report.cpp for GoogleTest, tests/support/python for unittest and pytest): the tests that
skipped inside one CTest test, which CTest itself reports as passed.

tests/allowed_skips.txt lists the skips that are right, one a line: a pattern (fnmatch) matched
against the CTest test's name or the inner test's id, then its reason; a pattern written
`root:PATTERN` is allowed only when this runs as root. Every other skip is printed with its
reason and the exit status is 1. So is a results file with no test in it.
"""

import argparse
import fnmatch
import os
import sys
import xml.etree.ElementTree as ET


def load_allowed(path):
    allowed = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                sys.exit(f"{path}:{number}: an allowed skip needs its reason after the pattern")
            pattern, reason = parts
            root_only = pattern.startswith("root:")
            if root_only:
                pattern = pattern[len("root:"):]
            allowed.append((pattern, root_only, reason))
    return allowed


def is_allowed(name, allowed, as_root):
    for pattern, root_only, _ in allowed:
        if root_only and not as_root:
            continue
        if fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def junit_skips(path):
    """(count of tests, [(name, what happened)]) from CTest's JUnit file."""
    tree = ET.parse(path)
    count = 0
    skips = []
    for case in tree.iter("testcase"):
        count += 1
        name = case.get("name", "?")
        status = case.get("status", "run")
        skipped = case.find("skipped")
        if skipped is not None:
            message = skipped.get("message") or "skipped"
            output = case.findtext("system-out") or ""
            # The test's own word on why: its last line that says so.
            why = [l.strip() for l in output.splitlines() if "skip" in l.lower()]
            skips.append((name, f"{message}: {why[-1]}" if why else message))
        elif status in ("notrun", "disabled"):
            skips.append((name, status))
    return count, skips


def report_skips(path):
    skips = []
    if not path or not os.path.exists(path):
        return skips
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t", 2)
            if len(parts) == 3:
                skips.append((parts[1], f"{parts[0]}: {parts[2] or 'skipped'}"))
    return skips


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", required=True)
    parser.add_argument("--report")
    parser.add_argument("--allowed",
                        default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "allowed_skips.txt"))
    args = parser.parse_args()

    allowed = load_allowed(args.allowed)
    as_root = os.geteuid() == 0
    count, skips = junit_skips(args.junit)
    if count == 0:
        print(f"check_skips: {args.junit} holds no test", file=sys.stderr)
        return 1
    skips += report_skips(args.report)

    # A discovered GoogleTest test that skipped is in both: CTest's results and the report.
    seen = set()
    bad = []
    allowed_seen = 0
    for name, why in skips:
        if name in seen:
            continue
        seen.add(name)
        if is_allowed(name, allowed, as_root):
            allowed_seen += 1
        else:
            bad.append((name, why))
    if bad:
        print(f"check_skips: {len(bad)} test(s) skipped or not run, and not on {args.allowed}:",
              file=sys.stderr)
        for name, why in bad:
            print(f"  {name}: {why}", file=sys.stderr)
        return 1
    print(f"check_skips: {count} CTest tests; every skip allowed ({allowed_seen} on the list)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
