"""Cases for the Ruby log parsers: minitest -v, cucumber's progress lines, test-unit's verbose
output, rspec results flattened to "<description> - <status>" and jekyll's choice between the
first two by instance id (ids it rejects included), then damaged copies (the damage helpers are
corpus_java.py's)."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_java import big_line, degenerate, hostile, mutate, nasty_char  # noqa: E402

# --- minitest ------------------------------------------------------------------------------------

MINITEST_NAMES = [
    "TestFilters#test_: filters with a date should format a date with short format. ",
    "TestFilters#test_: filters should convert array to sentence. ",
    "TestSite#test_: creating sites should have an empty tag hash by default. ",
    "TestSite#test_site_build",  # a plain name: no ". " before the timing, so no match
    "TestKramdown#test_: kramdown should render fenced code blocks. ",
    "TestUtils#test_: The `Utils.slugify` method should ignore ü characters. ",
    "TestConvertible#test_: yaml front matter should not parse if there is syntax error. ",
]


def minitest_log(rng: random.Random) -> str:
    lines = ["+ bundle exec ruby -Itest test/test_filters.rb -v", "Run options: -v --seed 4242",
             "", "# Running:", ""]
    for _ in range(rng.randint(0, 14)):
        outcome = rng.choices([".", "F", "E", "S"], [8, 2, 1, 1])[0]
        seconds = f"{rng.randint(0, 3)}.{rng.randint(0, 99):02d}"
        lines.append(f"{rng.choice(MINITEST_NAMES)} = {seconds} s = {outcome}")
    lines += ["", f"Finished in 0.{rng.randint(100, 999)}s, 95.0 runs/s, 180.0 assertions/s.", "",
              "  1) Failure:", "TestFilters#test_: filters x. [test/test_filters.rb:42]:",
              "Expected: 1", "  Actual: 2", "",
              f"{rng.randint(1, 40)} runs, 60 assertions, 1 failures, 0 errors, 1 skips"]
    return "\n".join(lines)


MINITEST_NEAR = [
    "a. = .",
    "a. =.",
    "a.  = F",
    ". = .",
    "a.= .",
    "a. b = x",
    "a. b = xF",
    "a. = E.",
    "a. = .F",
    "a. = F = .",
    "a. b. = E",
    "a. b. c = .",
    "name. = 0.01 s = E\r",
    "name.\u00a0= 0.01 s = .",
    "name. \u00a0= F",
    "name. = 0.01 s = .\x1b[0m",
    "name.\u2028 = .",
    "é中😀. = 0.00 s = .",
    "name. = \x00 = F",
    "TestA#test_x. = 1.00 s = .\nTestA#test_x. = 1.00 s = F\nTestB#y. = 0 s = .",
    "  padded. = .  ",
    "n" * 100_000 + ". = 0.00 s = .",
    "a. = " + "x" * 100_000 + "F",
]

# --- cucumber ------------------------------------------------------------------------------------

SCENARIOS = [
    "features/create_sites.feature:7", "Scenario: Blank site", "Scenario Outline: Post with <x>",
    "features/site_configuration.feature:12", "Scenario: Ünïcode permalinks",
    "Feature: Collections", "features/rendering.feature:100",
]


def cucumber_log(rng: random.Random) -> str:
    lines = ["+ bundle exec cucumber --format progress features/", "Using the default profile..."]
    for _ in range(rng.randint(0, 12)):
        steps = "".join(rng.choices(".F-U", [10, 1, 1, 1], k=rng.randint(1, 12)))
        lines.append(f"{rng.choice(SCENARIOS)} {rng.choice(['', '.', '..'])}{steps}")
    lines += ["", "(::) failed steps (::)", "",
              "expected: 1 got: 2 (RSpec::Expectations::ExpectationNotMetError)",
              f"{rng.randint(1, 90)} scenarios (1 failed, 89 passed)",
              "340 steps (1 failed, 5 skipped, 334 passed)", "0m12.345s"]
    return "\n".join(lines)


CUCUMBER_NEAR = [
    "a .",
    "a ..",
    "a .F",
    "a ...F..",
    "a F",
    "a ..-",
    " ..",
    "..",
    "a b ..",
    "a .. b ..F",
    "a .. b .x",
    "a\u00a0..",
    "a \u00a0..",
    "a\t..",
    "a ..\r",
    "a\r ..",
    "é中😀 ....",
    "a\x00 ..",
    "   a ..   ",
    "dup ..\ndup .F\nother ..",
    "a " + "." * 100_000,
    "n" * 100_000 + " ..F",
]

# --- test-unit -----------------------------------------------------------------------------------

UNIT_TESTS = [
    "test: parse with oj", "test_city", "test: 'foo' is parsed", "test_street_name",
    "test: Ünicode key", "test_default_value(TestFaker::TestAddress)", "test: a: b: c",
]


def ruby_unit_log(rng: random.Random) -> str:
    lines = ["+ bundle exec ruby -Itest test/test_address.rb -v", "Loaded suite test/test_address",
             "Started"]
    for _ in range(rng.randint(0, 4)):
        lines.append(rng.choice(["TestFaker::TestAddress: ", "ParserTest::JSONParser: ",
                                 "Fluent::Plugin::Ü: "]))
        for _ in range(rng.randint(0, 6)):
            outcome = rng.choices([".", "F", "E", "O", "N", "P"], [8, 2, 1, 1, 1, 1])[0]
            tabs = "\t" * rng.randint(1, 6)
            name = rng.choice(UNIT_TESTS)
            if outcome in "FE" and rng.random() < 0.6:
                lines += [f"  {name}:{tabs}{outcome}", "=" * 79,
                          f"{'Failure' if outcome == 'F' else 'Error'}: {name}",
                          "<1> expected but was", "<2>", "=" * 79,
                          f": ({rng.random():.6f})"]
            else:
                lines.append(f"  {name}:{tabs}{outcome}: ({rng.random():.6f})")
    lines += ["", f"Finished in 0.{rng.randint(100, 999)} seconds.", "-" * 79,
              "12 tests, 40 assertions, 1 failures, 0 errors, 0 pendings, 1 omissions,"
              " 0 notifications", "91.6667% passed", "-" * 79]
    return "\n".join(lines)


UNIT_NEAR = [
    "a: .",
    "a:.",
    "a: E",
    "a: Error",
    "a: E:",
    "a: F.",
    "a: Fé",
    "a: F_",
    "a: F٣",
    "a: O",
    "a: Omitted",
    "a: P",
    "a: N",
    "test: a: .",
    "test: : .",
    "test: x: y: F",
    "test:  a: .",
    "test a: .",
    ": .",
    "a:\u00a0.",
    "a:\u2028.",
    "a:\x1f.",
    "a:\t\t.\r",
    "a: .\r",
    "a: E\r",
    "a\x00: E",
    "é中😀: O",
    "  \tindented: .",
    "dup: .\ndup: F\nother: O\ndup: .",
    "a: \x1b[32m.\x1b[0m",
    "n" * 100_000 + ": F",
    "a: " + "." * 100_000,
]

# --- rspec (swebench's transformed json) ---------------------------------------------------------

RSPEC_NAMES = [
    "Fastlane::Actions::GitBranchAction #run returns the branch",
    "FPM::Package::Deb#output with a - dash in the name",
    "RuboCop::Cop::Style::StringLiterals when configured - single quotes - passed flags",
    "Fastlane::Helper::ShÜnicode handles ü",
    "RuboCop::CLI --auto-correct corrects offenses - failed twice",
]


def rspec_log(rng: random.Random) -> str:
    lines = ["+ bundle exec rspec --format json --out /tmp/rspec.json spec/",
             "+ ruby transform_rspec_json.rb /tmp/rspec.json"]
    for _ in range(rng.randint(0, 14)):
        status = rng.choices(["passed", "failed", "pending"], [8, 2, 1])[0]
        lines.append(f"{rng.choice(RSPEC_NAMES)} - {status}")
    return "\n".join(lines)


RSPEC_NEAR = [
    "a - passed",
    "a - failed",
    "a - pending",
    "a - passedX",
    "a -passed",
    "a  - passed",
    " - passed",
    "- passed",
    "a - passed - failed",
    "a - failed - passed",
    "a - PASSED",
    "a\u00a0- passed",
    "a -\u00a0passed",
    "a - passed\r",
    "a\r - failed",
    "a\x00 - passed",
    "é中😀 - failed",
    "  padded - passed  ",
    "dup - passed\ndup - failed\nother - passed",
    "n" * 100_000 + " - passed",
    "a - passed" + "x" * 100_000,
]

# --- jekyll --------------------------------------------------------------------------------------

# Ids whose second "-" part jekyll's parser knows, and ids it refuses (unknown pull request, or no
# "-" at all).
JEKYLL_MINITEST_IDS = ["jekyll__jekyll-9141", "jekyll__jekyll-8047", "jekyll__jekyll-8167",
                       "x-9141-y", "-8047", "jekyll__jekyll-8167-extra"]
JEKYLL_CUCUMBER_IDS = ["jekyll__jekyll-8761", "jekyll__jekyll-8771", "a-8761-b-c", "-8771-"]
JEKYLL_BAD_IDS = ["jekyll__jekyll-1234", "jekyll__jekyll", "", "jekyll__jekyll-09141",
                  "jekyll__jekyll-9141 ", "a-b-9141", "jekyll__jekyll-８７６１",
                  "jekyll__jekyll–9141", "jekyll__jekyll-", "-", "9141", "jekyll__jekyll-8761\n"]


def jekyll_cases(rng: random.Random):
    for instance_id in JEKYLL_MINITEST_IDS:
        for log in (minitest_log(rng), rng.choice(MINITEST_NEAR), cucumber_log(rng)):
            yield instance_id, log
    for instance_id in JEKYLL_CUCUMBER_IDS:
        for log in (cucumber_log(rng), rng.choice(CUCUMBER_NEAR), minitest_log(rng)):
            yield instance_id, log
    for instance_id in JEKYLL_BAD_IDS:
        yield instance_id, minitest_log(rng)
    yield "jekyll__jekyll-9141", ""
    yield "jekyll__jekyll-8761", ""
    for log in hostile(rng, minitest_log(rng)):
        yield "jekyll__jekyll-9141", log
    for log in hostile(rng, cucumber_log(rng)):
        yield "jekyll__jekyll-8771", log


def line_cases(rng: random.Random, near: list[str], realistic):
    yield from near
    for _ in range(16):
        yield realistic(rng)
    for _ in range(2):
        yield from hostile(rng, realistic(rng))
    for _ in range(6):
        yield mutate(rng, realistic(rng), rng.randint(1, 30))
    for _ in range(3):
        yield "".join(nasty_char(rng) for _ in range(60))
    yield big_line(rng) + "\n" + realistic(rng)
    yield from degenerate()


def cases(rng: random.Random):
    for parser, near, realistic, repo in (
        ("parse_log_minitest", MINITEST_NEAR, minitest_log, "jekyll/jekyll"),
        ("parse_log_cucumber", CUCUMBER_NEAR, cucumber_log, "jekyll/jekyll"),
        ("parse_log_ruby_unit", UNIT_NEAR, ruby_unit_log, "fluent/fluentd"),
        ("parse_log_rspec_transformed_json", RSPEC_NEAR, rspec_log, "rubocop/rubocop"),
    ):
        for log in line_cases(rng, near, realistic):
            yield {"parser": parser, "log": log, "repo": repo,
                   "instance_id": f"{repo.replace('/', '__')}-{rng.randint(1, 9999)}",
                   "version": rng.choice(["", "0.1", "4.3"])}
    for instance_id, log in jekyll_cases(rng):
        yield {"parser": "parse_log_jekyll", "log": log, "repo": "jekyll/jekyll",
               "instance_id": instance_id, "version": rng.choice(["", "4.3"])}
