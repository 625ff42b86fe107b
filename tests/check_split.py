#!/usr/bin/env python3
"""Fails, naming them, on the tests that scripts/test.sh would run in no build.

    check_split.py RELEASE_BUILD ASAN_BUILD LABELS

Each test runs once: the tests with a label matching LABELS (a regular expression, matched as
CTest's -L matches) in RELEASE_BUILD, every other test in ASAN_BUILD. So a test of the release
build without such a label must be a test of the asan build too. A GoogleTest executable the
release build left unbuilt shows there as one placeholder test, `<target>_NOT_BUILT`: the asan
build must have built that executable (some test of it runs it).
"""

import json
import os
import re
import subprocess
import sys


def tests(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for test in json.loads(out)["tests"]:
        labels = []
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS":
                labels = prop["value"]
        found[test["name"]] = (labels, test.get("command", []))
    return found


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip())
    release_build, asan_build, pattern = sys.argv[1:]
    released = re.compile(pattern)

    def in_release(labels):
        return any(released.search(label) for label in labels)

    release, asan = tests(release_build), tests(asan_build)
    runs_in_asan = {name for name, (labels, _) in asan.items() if not in_release(labels)}
    executables = {os.path.basename(command[0]) for name, (_, command) in asan.items()
                   if name in runs_in_asan and command}
    missing = []
    for name, (labels, _) in sorted(release.items()):
        if in_release(labels):
            continue
        if name.endswith("_NOT_BUILT"):
            if name[: -len("_NOT_BUILT")] not in executables:
                missing.append(f"{name} (the executable runs in neither build)")
        elif name not in runs_in_asan:
            missing.append(name)
    if missing:
        print("check_split: these tests run in neither the release nor the asan build "
              f"(label them to match {pattern}, or make them in the asan build too):",
              file=sys.stderr)
        for name in missing:
            print(f"  {name}", file=sys.stderr)
        return 1
    there = sum(1 for labels, _ in release.values() if in_release(labels))
    print(f"check_split: of the release build's {len(release)} tests {there} run there, the "
          f"others in the asan build ({len(runs_in_asan)} tests there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
