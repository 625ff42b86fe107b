#!/usr/bin/env python3
"""Makes a small SWE-bench dataset, its images and a set of predictions, for checking
`rex swebench` against swebench 5.0.2's own harness (tests/swebench/run_harness.py).

    make_dataset.py --engine docker|podman OUT_DIR
    make_dataset.py --print-expected

Three tiny repositories are written with real git history (fixed authors and dates, so the same
commits every time):

  rex-test/calc     a Python package tested with pytest -rA        (parse_log_pytest)
  rex-test/textkit  a Python package tested with unittest -v       (parse_log_django)
  rex-test/shkit    shell functions tested by a TAP-printing runner (parse_log_tap)

Each is built into one image FROM rex-swebench-base:latest (scripts/common.sh,
rex_swebench_images) with the repository at /testbed at its base commit. An image's tag is a hash
of what goes into it, so an unchanged repository is not built again; older tags of the same
repository are removed.

OUT_DIR gets:
  dataset.jsonl      the instances, in the self-describing form of 5.x (image, eval_script,
                     log_parser, eval_type); FAIL_TO_PASS and PASS_TO_PASS are JSON-encoded
                     strings in some instances and lists in others, as both occur
  predictions.jsonl  one prediction per instance, by "rex-test/model-a" (the harness turns the
                     "/" into "__" in its log directories)
  expected.json      each instance's expected verdict (EXPECTED below) and what it tests
  repos/             the repositories the images were built from

Nothing here needs the network.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

BASE_IMAGE = "rex-swebench-base:latest"
MODEL = "rex-test/model-a"
# Changing how an image is laid out must change every tag: part of each image's hash.
IMAGE_LAYOUT = "1"
# tini as PID 1 ends the container at the SIGTERM of the harness's `docker stop --time=15`: its
# `tail -f /dev/null` alone, as PID 1, would ignore it and cost every instance 15 s.
DOCKERFILE = ("FROM rex-swebench-base:latest\nCOPY testbed /testbed\nWORKDIR /testbed\n"
              'ENTRYPOINT ["/usr/bin/tini", "--"]\n')
# SWE-bench's own delimiter for the test patch's heredoc in eval scripts.
HEREDOC = "EOF_114329324912"

# The verdicts run_harness.py tells apart, from the harness's files:
#   RESOLVED_FULL / RESOLVED_PARTIAL / RESOLVED_NO  report.json, graded from the tests' statuses
#   INVALID_LOG        report.json, but the log was refused (patch_successfully_applied false)
#   EMPTY_PATCH        no run at all: the run report lists it under empty_patch_ids
#   ERROR_PATCH_APPLY  no report.json: no command of the harness's chain applied the patch
#   ERROR_TIMEOUT      no report.json: the tests outran --timeout
# "apply" is the command of the harness's chain (GIT_APPLY_CMDS) that applied the patch:
# 0 git apply, 1 --3way, 2 --reject, 3 patch --fuzz, "reverse" when none did and
# `git apply --check --reverse` found it already applied; None when nothing was applied.
# A binary image asset (its URL is a file:// one: the harness's urlopen reads it offline).
ASSET = Path(__file__).resolve().parent / "dataset" / "asset.bin"

EXPECTED = {
    # First: the harness starts instances in this order, so the wait overlaps the others.
    "rex-test__shkit-timeout": (
        "ERROR_TIMEOUT", 0,
        "a test sleeps 600 s, past the run's --timeout (the harness's `kill` of it misses: it "
        "kills the exec's host PID inside the container; stopping the container ends it)"),
    "rex-test__shkit-fail-only": (
        "RESOLVED_FULL", 0,
        "fail_only: an F2P test the runner never prints counts as passed"),
    "rex-test__shkit-fail-only-partial": (
        "RESOLVED_PARTIAL", 0, "fail_only: one F2P test prints `not ok`"),
    "rex-test__calc-full": ("RESOLVED_FULL", 0, "the gold patch; F2P/P2P as lists"),
    "rex-test__calc-partial": (
        "RESOLVED_PARTIAL", 0, "fixes one of the two F2P tests; F2P/P2P as JSON strings"),
    "rex-test__calc-p2p-broken": ("RESOLVED_NO", 0, "fixes F2P but breaks a P2P test"),
    "rex-test__calc-empty": ("EMPTY_PATCH", None, 'model_patch ""'),
    "rex-test__calc-null": ("EMPTY_PATCH", None, "model_patch null"),
    "rex-test__calc-no-apply": (
        "ERROR_PATCH_APPLY", None, "a patch of a file the repository does not have"),
    "rex-test__calc-fuzz": (
        "RESOLVED_FULL", 3, "a wrong context line: only `patch --fuzz` applies it; a binary "
        "image asset restored before the tests"),
    "rex-test__calc-already-applied": (
        "RESOLVED_NO", "reverse",
        "a patch already in the base commit, no index line: every command fails, the reverse "
        "check accepts it"),
    "rex-test__calc-fake-pass": (
        "INVALID_LOG", 0,
        "a conftest.py prints PASSED for every test and exits 1 before any test runs: the "
        "exit-code cross-check refuses the log"),
    "rex-test__textkit-full": ("RESOLVED_FULL", 0, "the gold patch (unittest -v output)"),
    "rex-test__textkit-3way": (
        "RESOLVED_FULL", 1, "made against an older commit: only `git apply --3way` applies it"),
    "rex-test__textkit-p2p-error": (
        "RESOLVED_NO", 0, "fixes F2P but makes a P2P test end in ERROR"),
}


def dedent(text):
    """text without its common indentation and the newline after its opening quotes."""
    return textwrap.dedent(text).removeprefix("\n")


# --- The repositories ---------------------------------------------------------------------------
# Each: its history (commits of whole files; the last is the base commit), the test patch (files
# as they are after it), the test files the eval script checks out, the test command, and the
# file versions the predictions are made of.

CALC_CORE_V2 = dedent('''
    """Small arithmetic helpers."""


    def add(a, b):
        return a + b


    def sub(a, b):
        return a - b


    def mul(a, b):
        return a * b


    def mean(values):
        return sum(values) // len(values)
''')
CALC_CORE_BASE = CALC_CORE_V2 + dedent('''


    def clamp(value, low, high):
        return max(low, min(value, high))
''')
CALC_TESTS_V1 = dedent('''
    from calc.core import add, sub


    def test_add():
        assert add(1, 2) == 3


    def test_sub():
        assert sub(5, 3) == 2
''')
CALC_TESTS_V2 = CALC_TESTS_V1.replace("add, sub", "add, mean, mul, sub") + dedent('''


    def test_mul():
        assert mul(4, 3) == 12


    def test_mean():
        assert mean([1, 2, 3]) == 2
''')
CALC_TESTS_BASE = CALC_TESTS_V2.replace("add, mean", "add, clamp, mean") + dedent('''


    def test_clamp():
        assert clamp(15, 0, 10) == 10
        assert clamp(-1, 0, 10) == 0
''')
CALC_TESTS_NEW = "import pytest\n\n" + CALC_TESTS_BASE + dedent('''


    def test_mean_fraction():
        assert mean([1, 2]) == 1.5


    def test_mean_empty():
        with pytest.raises(ValueError):
            mean([])
''')
CALC_MEAN_BUGGY = "    return sum(values) // len(values)\n"
CALC_MEAN_FIXED = ('    if not values:\n        raise ValueError("mean of an empty sequence")\n'
                   "    return sum(values) / len(values)\n")
CALC_CORE_GOLD = CALC_CORE_BASE.replace(CALC_MEAN_BUGGY, CALC_MEAN_FIXED)
CALC_TEST_IDS = ["test_add", "test_sub", "test_mul", "test_mean", "test_clamp"]
CALC_F2P_IDS = ["test_mean_fraction", "test_mean_empty"]
# Prints PASSED for every test, as if all had run, then ends pytest with status 1 before any has.
CALC_FAKE_CONFTEST = dedent('''
    import os
    import sys


    def pytest_configure(config):
        for name in {names}:
            print("PASSED tests/test_core.py::" + name)
        sys.stdout.flush()
        os._exit(1)
''').format(names=CALC_TEST_IDS + CALC_F2P_IDS)

TEXTKIT_CASE_V1 = dedent('''
    """Changing the case of titles and identifiers."""

    import re


    def title_case(text):
        """Capitalise every word of text."""
        return " ".join(word.capitalize() for word in text.split(" "))
''')
TEXTKIT_SNAKE_V2 = dedent('''


    def snake_case(text):
        """Convert camelCase to snake_case."""
        if not text:
            return text
        return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\\1", text).lower()
''')
TEXTKIT_CASE_V2 = TEXTKIT_CASE_V1 + TEXTKIT_SNAKE_V2
TEXTKIT_CASE_BASE = TEXTKIT_CASE_V2.replace(
    "Convert camelCase to", "Convert camelCase or PascalCase to")
TEXTKIT_SEPARATORS = '        return text\n    text = re.sub(r"[\\s-]+", "_", text.strip())\n'
TEXTKIT_TESTS_V1 = dedent('''
    import unittest

    from textkit.case import title_case


    class TitleCaseTests(unittest.TestCase):
        def test_words(self):
            self.assertEqual(title_case("hello big world"), "Hello Big World")

        def test_empty(self):
            self.assertEqual(title_case(""), "")
''')
TEXTKIT_TESTS_V2 = TEXTKIT_TESTS_V1.replace(
    "import title_case", "import snake_case, title_case") + dedent('''


    class SnakeCaseTests(unittest.TestCase):
        def test_camel(self):
            self.assertEqual(snake_case("helloBigWorld"), "hello_big_world")
''')
# Methods added to SnakeCaseTests, the last class: indented one level inside it.
TEXTKIT_TESTS_BASE = TEXTKIT_TESTS_V2 + textwrap.indent(dedent('''

        def test_pascal(self):
            self.assertEqual(snake_case("HelloWorld"), "hello_world")
'''), "    ")
TEXTKIT_TESTS_NEW = TEXTKIT_TESTS_BASE + textwrap.indent(dedent('''

        def test_spaces(self):
            self.assertEqual(snake_case("hello big world"), "hello_big_world")

        def test_hyphens(self):
            self.assertEqual(snake_case("hello-world"), "hello_world")
'''), "    ")


def with_separators(case_py):
    return case_py.replace("        return text\n", TEXTKIT_SEPARATORS)


def textkit_id(cls, name):
    # unittest -v of Python 3.11 names a test "method (module.Class.method)".
    return f"{name} (tests.test_case.{cls}.{name})"


SHKIT_RUNNER = dedent('''
    #!/bin/bash
    # Runs every test_* function of tests/test_*.sh and reports in TAP; exits 1 when one fails.
    cd "$(dirname "$0")/.." || exit 1
    source lib/strings.sh
    for f in tests/test_*.sh; do
      source "$f"
    done
    tests=$(declare -F | awk '$3 ~ /^test_/ {print $3}' | sort)
    n=0
    failed=0
    echo "1..$(wc -w <<<"$tests")"
    for t in $tests; do
      n=$((n + 1))
      if out=$("$t" 2>&1); then
        echo "ok $n ${t#test_}"
      else
        echo "not ok $n ${t#test_}"
        sed 's/^/#   /' <<<"$out"
        failed=$((failed + 1))
      fi
    done
    echo "# tests $n"
    echo "# pass $((n - failed))"
    echo "# fail $failed"
    ((failed == 0))
''')
SHKIT_LIB_V1 = dedent('''
    # String helpers for shell scripts.

    trim() {
      local s=$1
      s=${s#"${s%%[![:space:]]*}"}
      s=${s%"${s##*[![:space:]]}"}
      printf '%s\\n' "$s"
    }

    repeat() {
      local out= i
      for ((i = 0; i < $2; i++)); do
        out+=$1
      done
      printf '%s\\n' "$out"
    }
''')
SHKIT_SLUGIFY_BUGGY = dedent('''

    slugify() {
      # Lower-cases $1 and joins its words with dashes.
      printf '%s\\n' "$1" | tr '[:upper:] ' '[:lower:]-'
    }
''')
SHKIT_SLUGIFY_FIXED = dedent('''

    slugify() {
      # Lower-cases $1, drops its punctuation and joins its words with single dashes.
      printf '%s\\n' "$1" | tr '[:upper:]' '[:lower:]' | tr -cs '[:alnum:]' '-' | sed 's/^-//; s/-$//'
    }
''')
SHKIT_SLUGIFY_SPACES = dedent('''

    slugify() {
      # Lower-cases $1 and joins its words with single dashes.
      printf '%s\\n' "$1" | tr '[:upper:]' '[:lower:]' | tr -s ' ' '-'
    }
''')
SHKIT_LIB_BASE = SHKIT_LIB_V1 + SHKIT_SLUGIFY_BUGGY
SHKIT_TESTS_V1 = dedent('''
    assert_eq() {
      [[ $1 == "$2" ]] || { echo "expected '$2', got '$1'"; return 1; }
    }

    test_trim_spaces() {
      assert_eq "$(trim '  a b  ')" "a b"
    }

    test_repeat_count() {
      assert_eq "$(repeat ab 3)" ababab
    }
''')
SHKIT_TESTS_BASE = SHKIT_TESTS_V1 + dedent('''

    test_slugify_lowercases() {
      assert_eq "$(slugify 'Hello World')" hello-world
    }
''')
SHKIT_TESTS_NEW = SHKIT_TESTS_BASE + dedent('''

    test_slugify_collapses_spaces() {
      assert_eq "$(slugify 'a   b')" a-b
    }

    test_slugify_strips_punctuation() {
      assert_eq "$(slugify 'Hi, there!')" hi-there
    }
''')

REPOS = {
    "shkit": {
        "history": [
            ("Start shkit: trim and repeat", {
                "README.md": "# shkit\n\nString helpers for shell scripts.\n",
                "lib/strings.sh": SHKIT_LIB_V1,
                "tests/run.sh": SHKIT_RUNNER,
                "tests/test_strings.sh": SHKIT_TESTS_V1,
            }),
            ("Add slugify", {"lib/strings.sh": SHKIT_LIB_BASE,
                             "tests/test_strings.sh": SHKIT_TESTS_BASE}),
        ],
        "test_patch": {"tests/test_strings.sh": SHKIT_TESTS_NEW},
        "test_files": ["tests/test_strings.sh"],
        "test_cmd": "bash tests/run.sh",
        "log_parser": "parse_log_tap",
        "gold": {"lib/strings.sh": SHKIT_LIB_V1 + SHKIT_SLUGIFY_FIXED},
        "problem": "slugify() keeps punctuation and repeated spaces.",
    },
    "calc": {
        "history": [
            ("Start calc: add and sub", {
                "README.md": "# calc\n\nSmall arithmetic helpers.\n",
                "calc/__init__.py": '"""Small arithmetic helpers."""\n',
                "calc/core.py": CALC_CORE_V2.split("\n\n\ndef mul")[0] + "\n",
                "tests/test_core.py": CALC_TESTS_V1,
            }),
            ("Add mul and mean", {"calc/core.py": CALC_CORE_V2,
                                  "tests/test_core.py": CALC_TESTS_V2}),
            ("Add clamp", {"calc/core.py": CALC_CORE_BASE, "tests/test_core.py": CALC_TESTS_BASE}),
        ],
        "test_patch": {"tests/test_core.py": CALC_TESTS_NEW},
        "test_files": ["tests/test_core.py"],
        "test_cmd": "python3 -m pytest -rA tests/test_core.py",
        "log_parser": "parse_log_pytest",
        "gold": {"calc/core.py": CALC_CORE_GOLD},
        "problem": "mean() floors its result, and fails with ZeroDivisionError on an empty list.",
    },
    "textkit": {
        "history": [
            ("Start textkit with title_case", {
                "README.md": "# textkit\n\nChanging the case of text.\n",
                "textkit/__init__.py": '"""Changing the case of text."""\n',
                "textkit/case.py": TEXTKIT_CASE_V1,
                "tests/__init__.py": "",
                "tests/test_case.py": TEXTKIT_TESTS_V1,
            }),
            ("Add snake_case", {"textkit/case.py": TEXTKIT_CASE_V2,
                                "tests/test_case.py": TEXTKIT_TESTS_V2}),
            ("Mention PascalCase in snake_case's docstring", {
                "textkit/case.py": TEXTKIT_CASE_BASE, "tests/test_case.py": TEXTKIT_TESTS_BASE}),
        ],
        "test_patch": {"tests/test_case.py": TEXTKIT_TESTS_NEW},
        "test_files": ["tests/test_case.py"],
        "test_cmd": "python3 -m unittest -v tests.test_case",
        "log_parser": "parse_log_django",
        "gold": {"textkit/case.py": with_separators(TEXTKIT_CASE_BASE)},
        "problem": "snake_case() keeps the spaces and hyphens between words.",
    },
}


# --- Running things -----------------------------------------------------------------------------

def run(cmd, cwd=None, env=None, timeout=120, input=None):
    """Runs cmd, returns its stdout; fails with its output when it fails or outlives timeout."""
    try:
        done = subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"make_dataset: {' '.join(cmd)} did not finish within {timeout} s")
    if done.returncode != 0:
        sys.exit(f"make_dataset: {' '.join(cmd)} exited {done.returncode}:\n"
                 f"{done.stdout}{done.stderr}")
    return done.stdout


class Git:
    """git in one repository, blind to the user's and the system's configuration, with a fixed
    author and committer: the same commits (and hashes) on every machine."""

    def __init__(self, path, home):
        self.path = path
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_AUTHOR_NAME": "Rex Test",
            "GIT_AUTHOR_EMAIL": "rex-test@example.invalid",
            "GIT_COMMITTER_NAME": "Rex Test",
            "GIT_COMMITTER_EMAIL": "rex-test@example.invalid",
            "LC_ALL": "C",
            "TZ": "UTC",
        }

    def __call__(self, *args, date=None, input=None):
        env = self.env
        if date:
            env = dict(env, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        return run(["git", "-C", str(self.path), *args], env=env, input=input)


def write_files(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith("run.sh"):
            path.chmod(0o755)


def make_repo(root, name, spec, home):
    """Writes the repository's history; returns (git, commit hashes, oldest first)."""
    git = Git(root, home)
    root.mkdir(parents=True)
    git("init", "--quiet", "--initial-branch=main")
    commits = []
    for day, (message, files) in enumerate(spec["history"], start=1):
        write_files(root, files)
        git("add", "--all")
        git("commit", "--quiet", "--no-verify", "-m", message,
            date=f"2024-01-{day:02d}T12:00:00+00:00")
        commits.append(git("rev-parse", "HEAD").strip())
    return git, commits


def diff_of(git, commit, files):
    """The patch that turns commit's tree into commit's tree with files written over it
    (new files included), as `git diff` prints it; leaves the work tree at main again."""
    git("checkout", "--quiet", "--detach", commit)
    write_files(git.path, files)
    git("add", "--all")
    patch = git("diff", "--cached", commit)
    git("reset", "--quiet", "--hard", commit)
    git("checkout", "--quiet", "main")
    return patch


def without_index_lines(patch):
    return "".join(line for line in patch.splitlines(keepends=True)
                   if not line.startswith("index "))


def eval_script(base, spec, test_patch):
    """An eval script in the shape SWE-bench's Python instances have (see the module of
    swebench that writes them: set -uxo pipefail, the test files reset and the test patch
    applied from a heredoc, the test command between the markers, the test files reset again)."""
    files = " ".join(spec["test_files"])
    return "\n".join([
        "#!/bin/bash",
        "set -uxo pipefail",
        "cd /testbed",
        "git config --global --add safe.directory /testbed",
        "cd /testbed",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base}",
        f"git checkout {base} {files}",
        f"git apply -v - <<'{HEREDOC}'",
        test_patch,
        HEREDOC,
        ": '>>>>> Start Test Output'",
        spec["test_cmd"],
        ": '>>>>> End Test Output'",
        f"git checkout {base} {files}",
        "",
    ])


# --- The predictions ----------------------------------------------------------------------------

def predictions_for(name, git, commits, spec):
    """{instance_id: (model_patch, overrides of the instance)} for the repository."""
    base = commits[-1]
    gold = diff_of(git, base, spec["gold"])
    if name == "calc":
        partial = diff_of(git, base, {"calc/core.py": CALC_CORE_BASE.replace(
            CALC_MEAN_BUGGY, "    return sum(values) / len(values)\n")})
        broken = diff_of(git, base, {"calc/core.py": CALC_CORE_GOLD.replace(
            "return a - b", "return b - a")})
        # The gold patch with its last context line remembered wrong: git apply (with or
        # without --3way or --reject) refuses it, patch drops that line with fuzz 1.
        fuzz = gold.replace(" def clamp(value, low, high):", " def clamp(value, lo, hi):")
        assert fuzz != gold
        # What the base commit already did to calc/core.py, as a model might write it again.
        already = without_index_lines(git("diff", commits[-2], base, "--", "calc/core.py"))
        no_apply = dedent('''
            diff --git a/calc/stats.py b/calc/stats.py
            --- a/calc/stats.py
            +++ b/calc/stats.py
            @@ -1,3 +1,3 @@
             def median(values):
            -    return sorted(values)[len(values) // 2]
            +    return statistics.median(values)
        ''')
        fake = diff_of(git, base, {"conftest.py": CALC_FAKE_CONFTEST})
        return {
            "rex-test__calc-full": (gold, {}),
            "rex-test__calc-partial": (partial, {"json_tests": True, "image_assets": "{}"}),
            "rex-test__calc-p2p-broken": (broken, {"json_tests": True}),
            "rex-test__calc-empty": ("", {}),
            "rex-test__calc-null": (None, {}),
            "rex-test__calc-no-apply": (no_apply, {"image_assets": {}}),
            # A binary file the harness stages and restores before the tests (image_assets).
            "rex-test__calc-fuzz": (fuzz, {"image_assets": {"test_patch": [
                {"path": "tests/data/asset.bin", "url": ASSET.as_uri()}]}}),
            "rex-test__calc-already-applied": (already, {}),
            "rex-test__calc-fake-pass": (fake, {}),
        }
    if name == "textkit":
        # Made against the commit before the base, whose docstring the base changed two lines
        # above the insertion: plain git apply refuses it, a 3-way merge takes it.
        three_way = diff_of(git, commits[-2], {"textkit/case.py": with_separators(
            TEXTKIT_CASE_V2)})
        error = diff_of(git, base, {"textkit/case.py": with_separators(
            TEXTKIT_CASE_BASE).replace("word.capitalize()", "word.capitalise()")})
        return {
            "rex-test__textkit-full": (gold, {"json_tests": True}),
            "rex-test__textkit-3way": (three_way, {}),
            "rex-test__textkit-p2p-error": (error, {}),
        }
    partial = diff_of(git, base, {"lib/strings.sh": SHKIT_LIB_V1 + SHKIT_SLUGIFY_SPACES})
    hang = diff_of(git, base, {"lib/strings.sh": (SHKIT_LIB_V1 + SHKIT_SLUGIFY_FIXED).replace(
        "  local out= i\n", "  local out= i\n  sleep 600\n")})
    return {
        "rex-test__shkit-timeout": (hang, {}),
        "rex-test__shkit-fail-only": (gold, {"eval_type": "fail_only"}),
        "rex-test__shkit-fail-only-partial": (partial, {"eval_type": "fail_only",
                                                        "json_tests": True}),
    }


def tests_of(name):
    """(FAIL_TO_PASS, PASS_TO_PASS) of the repository's instances."""
    if name == "calc":
        return ([f"tests/test_core.py::{t}" for t in CALC_F2P_IDS],
                [f"tests/test_core.py::{t}" for t in CALC_TEST_IDS])
    if name == "textkit":
        return ([textkit_id("SnakeCaseTests", "test_spaces"),
                 textkit_id("SnakeCaseTests", "test_hyphens")],
                [textkit_id("TitleCaseTests", "test_words"),
                 textkit_id("TitleCaseTests", "test_empty"),
                 textkit_id("SnakeCaseTests", "test_camel"),
                 textkit_id("SnakeCaseTests", "test_pascal")])
    # slugify_handles_unicode is never printed: fail_only counts it as passed.
    return (["slugify_collapses_spaces", "slugify_strips_punctuation", "slugify_handles_unicode"],
            ["trim_spaces", "repeat_count", "slugify_lowercases"])


# --- The images ---------------------------------------------------------------------------------

def engine_cli(engine):
    return ["docker"] if engine == "docker" else ["podman"]


def image_label(engine, image, label):
    """The label's value on image, or None when the engine has no such image."""
    done = subprocess.run(
        engine_cli(engine) + ["image", "inspect", "--format",
                              "{{index .Config.Labels \"" + label + "\"}}", image],
        capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else None


def build_image(engine, name, repo_dir, base_commit, scratch):
    """Builds (unless there) the image of repo_dir at base_commit; returns its name."""
    base_recipe = image_label(engine, BASE_IMAGE, "rex.recipe")
    if not base_recipe:
        sys.exit(f"make_dataset: {engine} has no {BASE_IMAGE}; make it with\n"
                 "  source scripts/common.sh && rex_swebench_images")
    key = json.dumps([IMAGE_LAYOUT, base_recipe, DOCKERFILE, base_commit])
    tag = hashlib.sha256(key.encode()).hexdigest()[:16]
    image = f"rex-swebench/{name}:{tag}"
    if image_label(engine, image, "rex.swebench.repo") == name:
        return image
    # The repository as SWE-bench's images hold it: a clone at the base commit, no remote.
    context = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
    run(["git", "clone", "--quiet", "--no-hardlinks", str(repo_dir), str(context / "testbed")])
    git = Git(context / "testbed", scratch)
    git("reset", "--quiet", "--hard", base_commit)
    git("remote", "remove", "origin")
    (context / "Dockerfile").write_text(DOCKERFILE)
    labels = ["--label", f"rex.swebench.repo={name}"]
    if engine == "docker":
        # The classic builder: it takes FROM from the local store (there is no buildx here).
        run(["docker", "build", "--quiet", *labels, "-t", image, str(context)],
            env=dict(os.environ, DOCKER_BUILDKIT="0"), timeout=300)
    else:
        run(["podman", "build", "--quiet", "--pull=never", *labels, "-t", image, str(context)],
            timeout=300)
    shutil.rmtree(context)
    # Earlier builds of this repository are of no more use (Podman names them localhost/...).
    listed = run(engine_cli(engine) + ["images", "--filter", f"label=rex.swebench.repo={name}",
                                       "--format", "{{.Repository}}:{{.Tag}}"])
    for old in sorted(set(listed.split())):
        if old.removeprefix("localhost/") != image:
            subprocess.run(engine_cli(engine) + ["image", "rm", old], capture_output=True,
                           timeout=60)
    return image


# --- Putting it together ------------------------------------------------------------------------

def make(engine, out):
    if out.exists():
        shutil.rmtree(out / "repos", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="make-dataset-"))
    try:
        instances, predictions = [], []
        for name, spec in REPOS.items():
            git, commits = make_repo(out / "repos" / name, name, spec, scratch)
            base = commits[-1]
            test_patch = diff_of(git, base, spec["test_patch"])
            gold = diff_of(git, base, spec["gold"])
            image = build_image(engine, name, git.path, base, scratch)
            f2p, p2p = tests_of(name)
            for instance_id, (model_patch, extra) in predictions_for(
                    name, git, commits, spec).items():
                json_tests = extra.pop("json_tests", False)
                instance = {
                    "instance_id": instance_id,
                    "repo": f"rex-test/{name}",
                    "version": "1.0",
                    "base_commit": base,
                    "environment_setup_commit": base,
                    "created_at": "2024-01-10T12:00:00Z",
                    "problem_statement": spec["problem"] + "\n",
                    "hints_text": "",
                    "patch": gold,
                    "test_patch": test_patch,
                    "FAIL_TO_PASS": json.dumps(f2p) if json_tests else f2p,
                    "PASS_TO_PASS": json.dumps(p2p) if json_tests else p2p,
                    "image": image,
                    "eval_script": eval_script(base, spec, test_patch),
                    "log_parser": spec["log_parser"],
                    "eval_type": "pass_and_fail",
                    **extra,
                }
                instances.append(instance)
                predictions.append({"instance_id": instance_id, "model_name_or_path": MODEL,
                                    "model_patch": model_patch})
        assert [i["instance_id"] for i in instances] == list(EXPECTED), "EXPECTED is out of date"
        write_jsonl(out / "dataset.jsonl", instances)
        write_jsonl(out / "predictions.jsonl", predictions)
        (out / "expected.json").write_text(json.dumps(expected(), indent=2) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"make_dataset: {len(instances)} instances in {out}/dataset.jsonl, "
          f"images: {', '.join(sorted({i['image'] for i in instances}))}")


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def expected():
    return {iid: {"verdict": verdict, "apply": apply, "what": what}
            for iid, (verdict, apply, what) in EXPECTED.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["docker", "podman"], default="docker")
    parser.add_argument("--print-expected", action="store_true",
                        help="print each instance's expected verdict as JSON and stop")
    parser.add_argument("out", nargs="?", type=Path)
    args = parser.parse_args()
    if args.print_expected:
        print(json.dumps(expected(), indent=2))
        return
    if args.out is None:
        parser.error("OUT_DIR is required")
    make(args.engine, args.out.resolve())


if __name__ == "__main__":
    main()
