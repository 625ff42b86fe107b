"""Cases for the PHP log parser (phpunit): phpunit 9 and 10 --testdox output as swebench's PHP
instances print it, --debug lines and summaries around it, then damaged copies (the damage
helpers are corpus_java.py's)."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_java import big_line, degenerate, hostile, mutate, nasty_char  # noqa: E402

SUITES = [
    ("Calculation", r"PhpOffice\PhpSpreadsheet\Tests\Calculation\Calculation"),
    ("Database Eloquent Builder", r"Illuminate\Tests\Database\DatabaseEloquentBuilder"),
    ("Carbon Interval", r"Tests\CarbonInterval\CarbonInterval"),
    ("Fixer (Binary Operator Spaces)",
     r"PhpCsFixer\Tests\Fixer\Operator\BinaryOperatorSpacesFixer"),
    ("Xlsx Reader", r"PhpOffice\PhpSpreadsheet\Tests\Reader\Xlsx\Xlsx"),
    ("Übersetzung", r"Tests\Localization\Übersetzung"),
    ("_Underscore", r"Tests\_Underscore"),
]
TESTS = [
    "Binary comparison operation with data set #0",
    'Binary comparison operation with data set "string (quoted)"',
    "Find method",
    "It can parse dates in ISO 8601 (basic format)",
    "Fix with config",
    "Create from format with microseconds",
    "Ünicode test naming",
    "Test with trailing spaces   ",
    "Data set #12 [1, 2, 3]",
    "Tab\tseparated",
]


def failure_details(rng: random.Random) -> list[str]:
    if rng.random() < 0.5:  # phpunit 10
        return ["   ┐", "   ├ Failed asserting that two strings are identical.",
                "   ┊ ---·Expected", "   ┊ +++·Actual", "   ┊ -'foo'", "   ┊ +'bar'", "   │",
                "   │ /app/tests/Calculation/CalculationTest.php:42", "   ┴"]
    return ["   │", "   │ Failed asserting that false is true.", "   │",
            "   │ /app/tests/Calculation/CalculationTest.php:42", "   │"]


def testdox_log(rng: random.Random) -> str:
    lines = [
        "+ vendor/bin/phpunit --testdox --colors=never tests/Calculation",
        f"PHPUnit {rng.choice(['9.6.19', '10.5.20', '11.1.3'])} by Sebastian Bergmann and"
        " contributors.",
        "",
        "Runtime:       PHP 8.3.4",
        "Configuration: /app/phpunit.xml.dist",
        "",
    ]
    if rng.random() < 0.3:  # a test line before any suite heading
        lines.append(f" ✔ {rng.choice(TESTS)}")
    for _ in range(rng.randint(0, 4)):
        title, klass = rng.choice(SUITES)
        lines.append(f"{title} ({klass})")
        for _ in range(rng.randint(0, 6)):
            mark = rng.choices(["✔", "✘", "↩", "∅"], [6, 2, 1, 1])[0]
            timing = rng.choice(["", f"  {rng.randint(0, 900)} ms"])
            lines.append(f" {mark} {rng.choice(TESTS)}{timing}")
            if mark == "✘":
                lines += failure_details(rng)
            elif mark == "↩":
                lines += ["   │", "   │ Not implemented yet", "   │"]
        lines.append("")
    lines += [
        f"Time: 00:0{rng.randint(0, 9)}.{rng.randint(100, 999)}, Memory: 24.00 MB",
        "",
        rng.choice([
            "OK (12 tests, 40 assertions)",
            "FAILURES!",
            "Tests: 12, Assertions: 40, Failures: 1, Skipped: 2.",
            "OK, but incomplete, skipped, or risky tests!",
        ]),
    ]
    return "\n".join(lines) + "\n"


def debug_log(rng: random.Random) -> str:
    """--debug's started/ended lines, which the parser must pass over, mixed with testdox."""
    lines = []
    for _ in range(rng.randint(1, 6)):
        title, klass = rng.choice(SUITES)
        test = rng.choice(["testFind", "testParse with data set #0 (1, 2)", "testÜ"])
        lines += [f"Test '{klass}Test::{test}' started", f"Test '{klass}Test::{test}' ended"]
        if rng.random() < 0.5:
            lines += [f"{title} ({klass})", f" ✔ {rng.choice(TESTS)}"]
    return "\n".join(lines)


NEAR_MISSES = [
    "Fo (B)\n ✔ x",
    "F (B)\n ✔ x",
    "Foo(Bar)\n ✔ x",
    "Foo ()\n ✔ x",
    "Foo (Bar) \n ✔ x",
    "Foo (Bar)\r\n ✔ x\r\n",
    " Foo (Bar)\n ✔ x",
    "\u00a0Foo (Bar)\n ✔ x",
    "éFoo (Bar)\n ✔ é",
    "٣Foo (Bar)\n ✔ digits",
    "_Foo (Bar)\n ✔ under",
    "-Foo (Bar)\n ✔ dash",
    "Foo (Bar) (Baz)\n ✔ two groups",
    "Foo (Bar)x)\n ✔ after",
    "Foo ((Bar))\n ✔ nested",
    "Foo (Bar)\u2028 ✔ same line",
    "Foo (Bar)\x85\n ✔ nel",
    "Foo (B\x00r)\n ✔ nul",
    "✔",
    "✔✔",
    " ✔ ",
    "  ✘   spaced   ",
    "\t↩\tTabbed",
    "\u00a0✔\u00a0nbsp",
    "\u3000✔ ideographic space",
    "\x1c✔\x1fseparators",
    "✓ check mark",
    "✗ ballot",
    "[x] phpunit text testdox",
    "[ ] phpunit text testdox",
    "\x1b[32m ✔\x1b[0m colored",
    " ✔ x\r",
    " ✔ dup\n ✘ dup\n ✔ other\n ↩ dup",
    "A (a)\n ✔ t\nB (b)\n ✔ t\nA (a)\n ✘ t",
    "OK (3 tests, 3 assertions)\n ✔ after summary",
    "Foo ✔ (Bar)\n ✔ mark in heading",
    " ✔ Foo (Bar)",
    "Foo (Bar)\n ✔ " + "n" * 110_000,
    "S" + "u" * 100_000 + " (Bar)\n ✘ long suite",
    "Foo (Bar)\n" + big_line(random.Random(0)) + "\n ↩ after big",
]


def cases(rng: random.Random):
    logs = list(NEAR_MISSES)
    logs += [testdox_log(rng) for _ in range(20)]
    logs += [debug_log(rng) for _ in range(6)]
    for _ in range(3):
        logs += hostile(rng, testdox_log(rng))
    logs += [mutate(rng, testdox_log(rng), rng.randint(1, 30)) for _ in range(10)]
    logs += ["Foo (Bar)\n" + "".join(nasty_char(rng) for _ in range(40)) + "✔ x" for _ in range(5)]
    logs += degenerate()
    repos = ["phpoffice/phpspreadsheet", "laravel/framework", "php-cs-fixer/php-cs-fixer",
             "briannesbitt/carbon"]
    for log in logs:
        repo = rng.choice(repos)
        yield {"parser": "parse_log_phpunit", "log": log, "repo": repo,
               "instance_id": f"{repo.replace('/', '__')}-{rng.randint(1, 9999)}",
               "version": rng.choice(["", "10.x", "1.29"])}
