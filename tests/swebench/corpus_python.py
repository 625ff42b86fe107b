"""Cases for the Python log parsers: pytest -rA runs (plain, with parametrized ids, colored, old
"name STATUS" style), Django's and unittest's verbose runner, sympy's bin/test and matplotlib's
MouseButton ids, every alias included; then damaged copies (the damage helpers here are shared by
corpus_c.py, corpus_go.py and corpus_rust.py)."""

import random

# --- damage, shared with the other corpora of this family ---------------------------------------

NASTY = [
    "\r", "\t", "\x00", "\x1b", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x7f", "\x85",
    "\xa0", "\u2028", "\u2029", "\u3000", "\u2009", "\u200b", "\ufeff", "\ufffd", "é", "ß", "İ",
    "😀", "✓", "\u0663", "²", "[", "]", "(", ")", " - ", " ... ", ":", "::", "_", "\\", "/", "*",
    "&", "<", ">", '"', "'",
]


def nasty_char(rng: random.Random) -> str:
    return rng.choice(NASTY)


def ansi(rng: random.Random, text: str) -> str:
    code = rng.choice(["31", "32", "33", "1", "0", "1;31", "38;5;208"])
    return f"\x1b[{code}m{text}\x1b[0m"


def mutate_line(rng: random.Random, line: str) -> str:
    """One small damage to a line: what real logs do to each other (interleaving, colors, \\r,
    odd whitespace, cut-off writes) and what nobody expects."""
    kind = rng.randrange(14)
    pos = rng.randint(0, len(line))
    if kind == 0:
        return line[:pos] + nasty_char(rng) + line[pos:]
    if kind == 1 and line:
        return line[:pos] + line[pos + 1:]
    if kind == 2:
        return line.replace(" ", rng.choice(["\t", "\xa0", "\u2009", "\u3000", "  ", "\x1f"]), 1)
    if kind == 3:
        return line + rng.choice(["\r", " ", "\t", "\x0c", "\u2028", "\x85"])
    if kind == 4:
        return rng.choice([" ", "  ", "\t", "\r", "\ufeff", "\x1b[2K"]) + line
    if kind == 5:
        return ansi(rng, line)
    if kind == 6:
        words = line.split(" ")
        i = rng.randrange(len(words))
        words[i] = ansi(rng, words[i])
        return " ".join(words)
    if kind == 7:
        return line[:pos]
    if kind == 8:
        return line.upper() if rng.random() < 0.5 else line.lower()
    if kind == 9:
        return line[:pos] + line[pos:] * 2
    if kind == 10:
        return line[:pos] + "\n" + line[pos:]
    if kind == 11:
        return line.replace(" ", "", 1)
    if kind == 12:
        return line + line
    return line


def mutate(rng: random.Random, log: str) -> str:
    """A damaged copy of a log: some lines hurt, moved or doubled, other line ends, a cut."""
    lines = log.split("\n")
    for _ in range(rng.randint(1, 4)):
        if lines:
            i = rng.randrange(len(lines))
            lines[i] = mutate_line(rng, lines[i])
    if len(lines) > 2 and rng.random() < 0.3:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    if lines and rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines)), rng.choice(lines))
    joiner = rng.choices(["\n", "\r\n", "\r", "\n\n"], [8, 3, 1, 1])[0]
    out = joiner.join(lines)
    if rng.random() < 0.2:
        out = out[: rng.randint(0, len(out))]
    return out


def degenerate(rng: random.Random) -> str:
    """Logs with nothing or next to nothing in them."""
    return rng.choice([
        "", "\n", "\r\n", " ", "\t\n\t", "\x00", "\ufeff", "\u2028", "\x85\x85", "\n" * 50,
        "".join(nasty_char(rng) for _ in range(rng.randint(1, 40))),
        "".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(1, 200))).replace(
            "\ud800", ""),
    ])


def big_line(rng: random.Random, prefix: str, suffix: str, size: int = 120_000,
             alphabet: str = "abcdefghijklmnopqrstuvwxyz_") -> str:
    """A line of about size characters: prefix, one long word, suffix."""
    unit = "".join(rng.choice(alphabet) for _ in range(64))
    return prefix + (unit * (size // len(unit) + 1))[:size] + suffix


def sprinkle(rng: random.Random, log: str, extra: list[str]) -> str:
    """The log with a few of the given lines put in at random places."""
    lines = log.split("\n")
    for line in rng.sample(extra, k=min(len(extra), rng.randint(1, 4))):
        lines.insert(rng.randint(0, len(lines)), line)
    return "\n".join(lines)


# --- pytest -------------------------------------------------------------------------------------

MODULES = [
    "tests/test_core.py", "tests/unit/test_utils.py", "testing/test_mark.py",
    "src/_pytest/python_api.py", "xarray/tests/test_dataarray.py", "lib/test_ünïcode.py",
    "astropy/io/fits/tests/test_header.py", "sklearn/linear_model/tests/test_ridge.py",
    "tests/roots/test-ext-autodoc/target.py", "tests/test_build_html.py",
]
FUNCS = [
    "test_basic", "test_it", "test_ünïcode_name", "TestClass::test_method",
    "TestSuite::TestNested::test_deep", "test_repr", "test_roundtrip", "test_empty_",
    "test_λ", "test_数字",
]
PARAMS = [
    "", "", "", "[1]", "[a-b]", "[True-None]", "[int32]", "[/tmp/pytest-of-root/file.txt]",
    "[//double/slash]", "[/a/*/glob]", "[dtype0-shape1]", "[a - b]", "[x]y]", "[[nested]]",
    "[é-😀]", "[\u2028]", "[MouseButton.LEFT-1]", "[MouseButton.RIGHT]", "[0.5-1e-05]",
    "[/]", "[/trailing/]", "[-]", "[]", "[a b]", "[ws\xa0nbsp]",
]
STATUSES = ["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"]
REASONS = [
    "assert 1 == 2", "AssertionError: values differ - see above", "ValueError: bad - worse",
    "reason: known bug", "Failed: DID NOT RAISE <class 'ValueError'>", "",
    "assert 'a - b' == 'a-b'", "TypeError: unsupported operand type(s) for -: 'str' and 'int'",
]


def test_id(rng: random.Random) -> str:
    return f"{rng.choice(MODULES)}::{rng.choice(FUNCS)}{rng.choice(PARAMS)}"


def pytest_summary_line(rng: random.Random) -> str:
    status = rng.choices(STATUSES, [10, 4, 3, 2, 2, 1])[0]
    if status == "SKIPPED" and rng.random() < 0.6:
        return (f"SKIPPED [{rng.randint(1, 12)}] {rng.choice(MODULES)}:{rng.randint(1, 900)}:"
                f" {rng.choice(['unconditional skip', 'requires numpy', 'no network'])}")
    line = f"{status} {test_id(rng)}"
    if status in ("FAILED", "ERROR", "XFAIL") and rng.random() < 0.7:
        line += f" - {rng.choice(REASONS)}"
    return line


def pytest_log(rng: random.Random, colored: bool = False) -> str:
    tests = [test_id(rng) for _ in range(rng.randint(0, 12))]
    lines = [
        "+ pytest -rA " + rng.choice(MODULES),
        "=" * 29 + " test session starts " + "=" * 30,
        "platform linux -- Python 3.9.19, pytest-7.4.0, pluggy-1.3.0",
        "rootdir: /testbed",
        "configfile: setup.cfg",
        f"collected {len(tests)} items",
        "",
    ]
    for module in sorted({t.split("::")[0] for t in tests}):
        marks = "".join(rng.choice(".FsxEX") for _ in range(rng.randint(1, 9)))
        lines.append(f"{module} {marks}".ljust(75) + f" [{rng.randint(0, 100):3d}%]")
    if rng.random() < 0.4:
        lines += ["", "=" * 30 + " FAILURES " + "=" * 30, "_" * 20 + " test_x " + "_" * 20, "",
                  "    def test_x():", ">       assert 1 == 2", "E       assert 1 == 2", "",
                  "tests/test_core.py:10: AssertionError"]
    lines += ["", "=" * 25 + " short test summary info " + "=" * 25]
    for t in tests:
        status = rng.choices(STATUSES, [10, 4, 3, 2, 2, 1])[0]
        line = f"{status} {t}"
        if status in ("FAILED", "ERROR", "XFAIL") and rng.random() < 0.6:
            line += f" - {rng.choice(REASONS)}"
        lines.append(ansi(rng, line) if colored and rng.random() < 0.7 else line)
    for _ in range(rng.randint(0, 4)):
        lines.append(pytest_summary_line(rng))
    lines.append("=" * 10 + f" {rng.randint(0, 9)} failed, {rng.randint(0, 99)} passed in"
                 f" {rng.random():.2f}s " + "=" * 10)
    return "\n".join(lines)


def pytest_verbose_log(rng: random.Random, colored: bool = False) -> str:
    """pytest -v: "path::test STATUS [ n%]" (older pytest, seaborn and the v2 parser's fallback)."""
    lines = ["============================= test session starts ==============================",
             "collecting ... collected 9 items", ""]
    for _ in range(rng.randint(0, 12)):
        status = rng.choices(STATUSES, [10, 3, 2, 1, 1, 1])[0]
        word = ansi(rng, status) if colored and rng.random() < 0.6 else status
        tail = rng.choice([f" [{rng.randint(0, 100):3d}%]", "", " ", f" [{rng.randint(1, 9)}]"])
        lines.append(f"{test_id(rng)} {word}{tail}")
    if rng.random() < 0.5:
        lines += ["", "=========================== short test summary info ============================"]
        lines += [pytest_summary_line(rng) for _ in range(rng.randint(1, 5))]
    return "\n".join(lines)


PYTEST_NEAR = [
    "PASSED", "PASSED ", "PASSED\t", "FAILED", "FAILED - ", "FAILED x - ", "FAILED  - x",
    "PASSEDtests/test_a.py::test_b", "XFAILtests::x", "ERRORS", "ERROR: not a test",
    "SKIPPED [1]", "SKIPPED [1] ", "SKIPPED [12] tests/x.py:3: why", "SKIPPED [a] x",
    "SKIPPED [\u0663] x", "SKIPPED [1]x y", "SKIPPED [] x", "SKIPPED [1][2] x",
    "PASSED [100%]", "PASSED tests/a.py::b[x - y]", "FAILED tests/a.py::b[x - y] - boom",
    " PASSED tests/a.py::indented", "passed tests/a.py::lower", "PASSED\xa0tests/a.py::nbsp",
    "PASSED tests/a.py::t\u2028b", "PASSED tests/a.py::t\x00b", "PASSED \x1b[1mtests/a.py::t\x1b[0m",
    "\x1b[32mPASSED\x1b[0m tests/a.py::colored", "FAILED tests/a.py::x\r", "PASSED\r",
    "tests/a.py::old_style PASSED", "tests/a.py::old_style FAILED", "x PASSED y",
    "tests/a.py::t PASSED [ 50%]", "a b c XFAIL", "XFAIL", "tests/a.py::t \x1b[32mPASSED\x1b[0m",
    "PASSED tests/a.py::dup", "FAILED tests/a.py::dup", "PASSED tests/a.py::dup",
    "PASSED tests/a.py::t[/abs/path/to/file]", "PASSED tests/a.py::t[//net/share]",
    "PASSED tests/a.py::t[/glob/*]", "PASSED tests/a.py::t[no/slash/first]",
    "PASSED tests/a.py::t[", "PASSED tests/a.py::t]", "PASSED [x]", "PASSED a[b]c[d]",
    "PASSED tests/a.py::t[a]MouseButton.LEFT", "PASSED tests/mpl.py::t[MouseButton.LEFT]",
    "FAILED tests/mpl.py::t[MouseButton.RIGHT-MouseButton.LEFT] - x",
    "MouseButton.LEFT PASSED", "PASSED MouseButton.RIGHT",
    "PASSED tests/a.py::t - not a reason", "FAILED tests/a.py::t - - -",
    "FAILED tests/a.py::t -- x", "FAILED tests/a.py::t-x - y", "ERROR tests/a.py::t - E",
    "PASSED tests/a.py::t[\x1b[31m]", "tests/a.py::t [\x1b[33m1m] PASSED",
    "[1mPASSED[0m tests/a.py::ansi_without_escape", "\x01\x02PASSED tests/a.py::ctrl",
    "PASSED tests/a.py::ctrl\x1f\x1e", "PASSED tests/a.py::\u3000wide", "PASSED \u0085 x",
]


def pytest_like_case(rng: random.Random, colored: bool = False, verbose: bool = False,
                     brackets: bool = False) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        # With brackets for parse_log_pytest_options: its "(.*?)\[(.*)\]" takes Python
        # quadratic time on a long name without any.
        suffixes = ["[/a/b] - r", "[x]"] if brackets else ["", " PASSED", "[/a/b] - r", " - x"]
        return big_line(rng, rng.choice(["PASSED tests/a.py::", "FAILED t::", "x "]),
                        rng.choice(suffixes))
    log = pytest_verbose_log(rng, colored) if verbose else pytest_log(rng, colored)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, PYTEST_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- Django -------------------------------------------------------------------------------------

DJANGO_TESTS = [
    "test_basic (migrations.test_commands.MigrateTests)",
    "test_sqlmigrate (migrations.test_commands.MigrateTests.test_sqlmigrate)",
    "test_ünïcode (admin_views.tests.AdminViewTests)",
    "test_fast_delete (delete.tests.FastDeleteTests)",
    "test_no_migrations (migrations.test_loader.LoaderTests)",
    "test_render (template_tests.test_base.TemplateTests)",
    "test_json (model_fields.test_jsonfield.TestQuerying)",
    "test_a (x.Y) ... ok",  # a name that itself holds the separator
    "test_str (model_regress.tests.ModelTests)",
]
DJANGO_DOCSTRINGS = [
    "Regression for #12345 -- the docstring's first line.",
    "Tests that the ... separator in a docstring is not a result.",
    "ünïcode docstring",
]


def django_result(rng: random.Random, name: str) -> str:
    return rng.choices(
        [" ... ok", " ... OK", " ...  OK", " ... FAIL", " ... ERROR", " ... skipped 'no db'",
         " ... expected failure", " ... unexpected success", " ... skipped"],
        [20, 2, 2, 3, 2, 2, 1, 1, 1])[0]


def django_log(rng: random.Random) -> str:
    lines = [
        "+ ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 migrations",
        "Testing against Django installed in '/testbed/django'",
        "Importing application migrations",
        "Operations to perform:",
        "  Synchronize unmigrated apps: auth, contenttypes, messages, migrations, sessions",
        "  Apply all migrations: admin, sites",
        "Running migrations:",
        "  Applying admin.0001_initial... OK",
        "  Applying sites.0002_alter_domain_unique... OK",
        "System check identified no issues (0 silenced).",
    ]
    failures = []
    for _ in range(rng.randint(0, 14)):
        name = rng.choice(DJANGO_TESTS)
        shape = rng.randrange(10)
        result = django_result(rng, name)
        if shape == 0:
            # A docstring line between the name and the result.
            lines += [name, rng.choice(DJANGO_DOCSTRINGS) + result]
        elif shape == 1:
            # Output between "..." and the result.
            lines += [name + " ... " + rng.choice([
                "Testing against Django installed in '/testbed/django' with up to 8 processes",
                "Internal Server Error: /admin/login/", "System check identified no issues (0 silenced)",
                "some printed output"]), rng.choice(["ok", "OK", "FAIL", "ok  "])]
        elif shape == 2:
            lines.append("  Applying sites.0002_alter_domain_unique...test_no_migrations"
                         " (migrations.test_loader.LoaderTests)" + result)
        else:
            lines.append(name + result)
        if "FAIL" in result or "ERROR" in result:
            failures.append(("FAIL" if "FAIL" in result else "ERROR", name))
    for kind, name in failures:
        lines += ["", "=" * 70, f"{kind}: {name}", "-" * 70,
                  "Traceback (most recent call last):", '  File "/testbed/tests/x.py", line 1',
                  "AssertionError: 1 != 2"]
    lines += ["", "-" * 70, f"Ran {rng.randint(0, 50)} tests in 0.{rng.randint(0, 999):03d}s", "",
              rng.choice(["OK", "FAILED (failures=1)", "OK (skipped=2)", "FAILED (errors=1)"])]
    if rng.random() < 0.2:
        lines.insert(rng.randint(0, len(lines)),
                     "test_version (admin_scripts.tests.CommandTypes)\n"
                     "--version is equivalent to version ... ok")
    return "\n".join(lines)


DJANGO_NEAR = [
    "ok", "ok ", "okay", " ok", "OK", "... ok", " ... ok", "a ... ok", "a ...ok", "a ...  OK",
    "a ... OK\r", "a ... ok\x1b[0m", "a ... skipped", "a ... skipped 'r' ... ok",
    "a ... FAIL", "a ... FAILED", "a ... ERROR", "a ... error", "FAIL: ", "ERROR: test_x (y.Z)",
    "FAIL: test_x (y.Z)", "FAIL:\ttest_tab (y.Z)", "FAIL:test_glued (y.Z)", "ERROR:  spaced",
    "x ... y ... ok", "x ... y ... FAIL", "x\xa0...\xa0ok", "x ... ok\u2028", "\u3000x ... ok",
    "--version is equivalent to version", "a --version is equivalent to version b",
    "Applying sites.0002_alter_domain_unique...test_no_migrations ... ok",
    "Applying sites.0002_alter_domain_unique...test_no_migrations (a.B) ... OK",
    "  Applying sites.0002_alter_domain_unique... OK",
    "t ... Testing against Django installed in '/x' silenced).\nok",
    "t ... Testing against Django installed in '/x'\nSystem check (0 silenced).\nok",
    "t ... Testing against Django installed in '/x' silenced).\nok ",
    "t ... Internal Server Error: /a/b/\nok", "t ... Internal Server Error: /a/b\nok",
    "t ... System check identified no issues (0 silenced)\nok",
    "t\t...\tInternal Server Error: /x/\nok",
]


def django_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        return big_line(rng, "test_long (a.B)", rng.choice([" ... ok", " ... FAIL", ""]),
                        alphabet="abc _.")
    log = django_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, DJANGO_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- sympy --------------------------------------------------------------------------------------

SYMPY_FILES = ["sympy/core/tests/test_basic.py", "sympy/solvers/tests/test_ode.py",
               "sympy/printing/tests/test_latex.py", "sympy/ünïcode/tests/test_x.py"]
SYMPY_TESTS = ["test_equality", "test_subs", "test_latex_ünïcode", "test_issue_12345",
               "test_Matrix", "test__private", "test_λ"]


def sympy_log(rng: random.Random) -> str:
    lines = [
        "============================= test process starts ==============================",
        "executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]",
        "architecture:       64-bit", "cache:              no", "ground types:       python ",
        "numpy:              None", f"random seed:        {rng.randint(0, 10**8)}",
        "hash randomization: on (PYTHONHASHSEED=123)", "",
    ]
    failed = []
    for module in rng.sample(SYMPY_FILES, k=rng.randint(0, 3)):
        tests = rng.sample(SYMPY_TESTS, k=rng.randint(1, 5))
        lines.append(f"{module}[{len(tests)}] ")
        for t in tests:
            outcome = rng.choices(["ok", "F", "E", "f", "s", "Slow w"], [10, 2, 2, 1, 1, 1])[0]
            pad = " " * rng.randint(0, 3)
            lines.append(f"{t}{pad} {outcome}")
            if outcome in ("F", "E"):
                failed.append((module, t))
        lines.append(rng.choice(["[OK]", "[FAIL]", ""]))
    lines.append("")
    for module, t in failed:
        title = f" {module}:{t} "
        lines += ["_" * 80, title.center(80, "_"), "Traceback (most recent call last):",
                  f'  File "/testbed/{module}", line 10, in {t}', "AssertionError", ""]
    lines.append(f"= tests finished: {rng.randint(0, 9)} passed, {len(failed)} failed, in 1.2 seconds =")
    if failed:
        lines.append("DO *NOT* COMMIT!")
    return "\n".join(lines)


SYMPY_NEAR = [
    "test_x ok", "test_x  ok", "test_x\tok", "test_x ok ", "test_xok", "test_ ok", "test_x F",
    "test_x E", "test_x f", "test_x  E  ", "test_a test_b ok", "  test_indented ok",
    "test_x ok\r", "test_x\xa0ok", "test_x \u2028ok", "test_x F\x1b[0m", "test_\u3000 E",
    "Test_x ok", "test_x okay", "test_x E ok", "___ a.py:b ___", " a.py:b ", "x .py: y",
    "_ sympy/x.py:test_y _", " .py: ", "__ x.py:y __ extra", "a.py:b", "_ a.py:b\n_",
    "_____ sympy/core/tests/test_ünïcode.py:test_é _____", "_ a.py:1 a.py:2 _",
]


def sympy_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        # Few spaces: sympy's pattern backtracks over each line once per space.
        return big_line(rng, rng.choice(["test_", "_ x", "__ "]),
                        rng.choice([" ok", " E", ".py:x _", ""]))
    log = sympy_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, SYMPY_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- the cases ----------------------------------------------------------------------------------

PYTEST_ALIASES = ["parse_log_astroid", "parse_log_flask", "parse_log_marshmallow",
                  "parse_log_pvlib", "parse_log_pyvista", "parse_log_sqlfluff", "parse_log_xarray"]
OPTIONS_ALIASES = ["parse_log_pydicom", "parse_log_requests", "parse_log_pylint"]
V2_ALIASES = ["parse_log_astropy", "parse_log_scikit", "parse_log_sphinx"]


def case(parser: str, log: str, repo: str = "", instance_id: str = "", version: str = "") -> dict:
    return {"parser": parser, "instance_id": instance_id, "repo": repo, "version": version,
            "log": log}


def cases(rng: random.Random):
    for _ in range(220):
        yield case("parse_log_pytest", pytest_like_case(rng), "pytest-dev/pytest")
    for _ in range(220):
        yield case("parse_log_pytest_options", pytest_like_case(rng, brackets=True),
                   "psf/requests")
    for _ in range(260):
        yield case("parse_log_django", django_case(rng), "django/django")
    for _ in range(220):
        yield case("parse_log_pytest_v2", pytest_like_case(rng, colored=True,
                                                           verbose=rng.random() < 0.5),
                   "astropy/astropy")
    for _ in range(200):
        yield case("parse_log_seaborn", pytest_like_case(rng, verbose=rng.random() < 0.6),
                   "mwaskom/seaborn")
    for _ in range(220):
        yield case("parse_log_sympy", sympy_case(rng), "sympy/sympy")
    for _ in range(200):
        yield case("parse_log_matplotlib", pytest_like_case(rng), "matplotlib/matplotlib")
    for name in PYTEST_ALIASES:
        for _ in range(30):
            yield case(name, pytest_like_case(rng))
    for name in OPTIONS_ALIASES:
        for _ in range(30):
            yield case(name, pytest_like_case(rng, brackets=True))
    for name in V2_ALIASES:
        for _ in range(30):
            yield case(name, pytest_like_case(rng, colored=True, verbose=rng.random() < 0.5))
    # Logs from one framework given to the other parsers.
    mixed = [pytest_log(rng), django_log(rng), sympy_log(rng), pytest_verbose_log(rng, True)]
    for name in ["parse_log_pytest", "parse_log_pytest_options", "parse_log_django",
                 "parse_log_pytest_v2", "parse_log_seaborn", "parse_log_sympy",
                 "parse_log_matplotlib"]:
        for log in mixed:
            yield case(name, log)
        yield case(name, "\n".join(PYTEST_NEAR + DJANGO_NEAR + SYMPY_NEAR))
