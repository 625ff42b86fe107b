"""Cases for swebench's JavaScript log parsers (harness/log_parsers/javascript.py): logs in the
formats of the tools they read (jest, vitest, mocha's spec and JSON reporters, karma, TAP,
cypress, deno, the repositories' own runners), then the same logs damaged (lines dropped,
repeated, cut, re-indented with Unicode whitespace, \\r\\n endings, ANSI escapes, NUL...), and
near-misses, huge lines, and versions and instance ids that pick branches or make swebench raise.
"""

import json
import random

# --- names --------------------------------------------------------------------------------------

WORDS = [
    "should render", "handles empty input", "parses options", "returns null", "works with arrays",
    "throws on bad input", "merges config", "keeps order", "escapes html", "reads the file",
    "updates state", "calls the callback", "resolves the promise", "rejects invalid ids",
    "formats dates", "supports nested lists", "ignores comments", "sorts keys", "emits events",
    "clamps values",
]
SUITES = [
    "Button", "Modal", "parser", "lexer", "Renderer", "utils", "core/reactivity", "Scheduler",
    "Chart.controllers.bar", "ol/source/Vector", "hljs.highlight", "RuleTester", "Modeler",
    "p5.prototype.createCanvas", "Audit: font-size", "lib/rules/no-unused-vars",
]
UNICODE_NAMES = [
    "日本語のテスト", "naïve café résumé", "emoji 🎉 party", "Ünïcödé Test", "rtl שלום עולם",
    "greek αβγ δ", "math ∑∫√", "zero\u200bwidth", "nbsp\u00a0inside", "line\u2028sep",
    "nel\u0085name", "fs\x1cgs\x1drs\x1eus\x1f", "digits ٣٤٥", "fullwidth ＡＢＣ", "tab\tinside",
    'quote "q" and \\ back', "ideographic\u3000space", "bell\x07ctl", "del\x7fchar",
    "nul\x00byte", "cr\rinside", "vt\x0bff\x0c", "combining e\u0301", "astral 𝒜𝒷𝒸",
]
UNI_WS = ["\u00a0", "\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e", "\x1f", "\u3000",
          "\u2003", "\x0b", "\x0c", "\t", "\r", "\u1680", "\u202f", "\u205f"]
JUNK = ["\x00", "\x1b[31m", "\x1b[0m", "\x1b[2K", "\x1b[1A", "\x1b[", "\x1bM", "\ufffd", "é",
        "日本", "🎉", "\u200b", "\\", '"', "{", "}", "[", "]", "(", ")", ":", "✓", "✕", "✔",
        "✖", "×", "↓", "○", "✗", "<a>", "</a>", "(12ms)", " (3 ms)", "FAILED", "PASS ", "FAIL ",
        "1) ", "ok 1 ", "\u2028", "\u0085", "\x1c", "\r", "\t", "...", "Error", "٣"]


def word(rng):
    return rng.choice(WORDS) + rng.choice(["", "", f" #{rng.randint(1, 99)}", " (edge)", "()"])


def name(rng, unicode_share=0.2):
    if rng.random() < unicode_share:
        return rng.choice(UNICODE_NAMES) + rng.choice(["", f" {rng.randint(1, 9)}"])
    return word(rng)


def suite(rng, unicode_share=0.15):
    if rng.random() < unicode_share:
        return rng.choice(UNICODE_NAMES)
    return rng.choice(SUITES)


def ms(rng):
    return rng.randint(0, 4000)


# --- damage -------------------------------------------------------------------------------------


def mutate(log, rng, edits=None):
    """The log with a few random line edits, maybe cut short or given \\r\\n endings."""
    lines = log.split("\n")
    for _ in range(edits if edits is not None else rng.randint(1, 5)):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        op = rng.randrange(11)
        line = lines[i]
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, line)
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            k = rng.randint(0, len(line))
            lines[i] = line[:k] + rng.choice(JUNK) + line[k:]
        elif op == 4:
            lines[i] = line + "\r"
        elif op == 5:
            lines[i] = rng.choice(UNI_WS) * rng.randint(1, 3) + line
        elif op == 6:
            lines[i] = line[: rng.randint(0, len(line))]
        elif op == 7 and line:
            k = rng.randrange(len(line))
            lines[i] = line[:k] + rng.choice(JUNK + UNI_WS) + line[k + 1 :]
        elif op == 8:
            lines.insert(i, "".join(rng.choice(JUNK + UNI_WS + ["a", " ", "  "]) for _ in range(6)))
        elif op == 9:
            lines[i] = line.strip()
        else:
            lines[i] = line + rng.choice(UNI_WS)
    text = "\n".join(lines)
    roll = rng.random()
    if roll < 0.15:
        text = text[: rng.randint(0, len(text))]
    elif roll < 0.25:
        text = text.replace("\n", "\r\n")
    elif roll < 0.3:
        text = text.replace("\n", "\u2028")
    return text


def ansi(text, rng):
    """Text wrapped in colour escapes the way test reporters print it."""
    return f"\x1b[{rng.choice(['32', '31', '90', '1', '2', '33'])}m{text}\x1b[0m"


HOSTILE = [
    "",
    "\n",
    "\n\n\n",
    "   \t  ",
    "\r\n\r\n",
    "\x00\x00\x00",
    "\ufeff",
    "\u2028\u2029\u0085\x1c\x1d\x1e\x1f",
    "\x1b[31m\x1b[0m\x1b[2K\x1b[1A",
    "é" * 50,
    "🎉" * 30 + "\n" + "日本語" * 20,
]


def hostile(rng):
    """Logs in no format at all."""
    yield from HOSTILE
    yield "".join(rng.choice(JUNK + UNI_WS + ["\n", " ", "a", "1"]) for _ in range(400))
    yield "x" * 120_000


# --- formats ------------------------------------------------------------------------------------


def jest_file_lines(rng, leading_space=False):
    """Jest's per-file summary lines (PASS/FAIL path (time)), with noise between them."""
    out = ["$ jest --ci", ""]
    for _ in range(rng.randint(1, 10)):
        path = f"packages/{rng.choice(['react', 'core', 'utils'])}/src/{name(rng, 0.1)}-test.js"
        timing = rng.choice(
            ["", f" ({ms(rng)}ms)", f" ({rng.randint(1, 30)}.{rng.randint(0, 999)} s)",
             f" ({rng.randint(1, 9)}.{rng.randint(0, 9)}s)", f" ({ms(rng)} ms)", " (1.2.3 s)",
             " (ms)", f" ({rng.randint(1, 9)}s) trailing"]
        )
        mark = rng.choice(["PASS", "PASS", "FAIL"])
        sep = rng.choice([" ", " ", "  ", "\t", "\u00a0", "\u2028"])
        line = f"{mark}{sep}{path}{timing}"
        if leading_space or rng.random() < 0.1:
            line = " " + line
        if rng.random() < 0.1:
            line = ansi(mark, rng) + f" {path}{timing}"
        out.append(line)
        if rng.random() < 0.3:
            out.append(f"  ● {suite(rng)} › {word(rng)}")
            out.append("    expect(received).toBe(expected)")
    out.append(f"Test Suites: 1 failed, {rng.randint(1, 9)} passed")
    return "\n".join(out)


def mocha_spec(rng, check="✓", with_failures=True, summary=True, numbered_detail=True):
    """Mocha's spec reporter: suites by indentation, ✓ passes, N) failures, then the epilogue."""
    out = [""]
    failures = []
    for _ in range(rng.randint(1, 4)):
        out.append(f"  {suite(rng)}")
        for _ in range(rng.randint(1, 5)):
            if rng.random() < 0.3:
                out.append(f"    {suite(rng)}")
            if with_failures and rng.random() < 0.25:
                failures.append(name(rng))
                out.append(f"      {len(failures)}) {failures[-1]}")
            else:
                timing = rng.choice(["", f" ({ms(rng)}ms)", f" ({ms(rng)}ms) (2ms)"])
                out.append(f"      {check} {name(rng)}{timing}")
        out.append("")
    if summary:
        out.append(f"  {rng.randint(1, 50)} passing ({rng.randint(1, 9)}s)")
        if failures:
            out.append(f"  {len(failures)} failing")
        out.append("")
        if numbered_detail:
            for i, failure in enumerate(failures, 1):
                out.append(f"  {i}) {suite(rng)}")
                out.append(f"       {failure}:")
                out.append("     AssertionError: expected 1 to equal 2")
                out.append("      at Context.<anonymous> (test/index.js:12:5)")
                out.append("")
    return "\n".join(out)


def mocha_json(rng, passes=None, failures=None, indent=2, ascii_only=None):
    passes = passes if passes is not None else [name(rng) for _ in range(rng.randint(0, 5))]
    failures = failures if failures is not None else [name(rng) for _ in range(rng.randint(0, 3))]

    def test(title, err):
        return {"title": title.split(" ")[-1], "fullTitle": title, "file": "/app/test.js",
                "duration": ms(rng), "currentRetry": 0, "err": err}

    report = {
        "stats": {"suites": 3, "tests": len(passes) + len(failures), "passes": len(passes),
                  "pending": 0, "failures": len(failures), "start": "2024-01-01T00:00:00.000Z",
                  "duration": ms(rng)},
        "tests": [test(t, {}) for t in passes + failures],
        "pending": [],
        "failures": [test(t, {"message": "expected 1 to equal 2", "stack": "Error\n at x"})
                     for t in failures],
        "passes": [test(t, {}) for t in passes],
    }
    if ascii_only is None:
        ascii_only = rng.random() < 0.5
    return json.dumps(report, indent=indent, ensure_ascii=ascii_only)


# --- per parser ---------------------------------------------------------------------------------


def calypso_logs(rng):
    def run():
        out = ["+ yarn run ./node_modules/.bin/jest --verbose -c=test/client/jest.config.js x", ""]
        out.append(f" PASS  client/{name(rng, 0.1)}/test/index.js")
        for _ in range(rng.randint(1, 4)):
            depth = rng.randint(1, 3)
            for d in range(depth):
                out.append("  " * (d + 1) + suite(rng))
            for _ in range(rng.randint(1, 4)):
                mark = rng.choice(["✓", "✓", "✕"])
                timing = rng.choice(["", f" ({ms(rng)}ms)"])
                out.append("  " * (depth + 1) + f"{mark} {name(rng)}{timing}")
            out.append("")
        if rng.random() < 0.5:
            out.append(f"  ● {suite(rng)} › {word(rng)}")
            out.append("    ✓ not reached")
        out.append("Test Suites: 1 passed, 1 total")
        return "\n".join(out)

    for _ in range(14):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    # The runs start only after " ./node_modules/.bin/jest "; before it nothing counts.
    yield "  ✓ before any run\n" + run()
    yield run() + "\n" + run()
    # Shapes swebench raises on: a ✓ with no indentation, a timing not at the end, \r\n.
    yield "+ ./node_modules/.bin/jest x\n✓ unindented\n"
    yield "+ ./node_modules/.bin/jest x\n  suite\n    ✓ timed (3ms) then more\n"
    yield "+ ./node_modules/.bin/jest x\r\n  suite\r\n    ✓ timed (3ms)\r\n"
    yield "+ ./node_modules/.bin/jest x\r\n  suite\r\n    ✓ untimed\r\n"
    yield "+ ./node_modules/.bin/jest x\n    ✓\n"
    yield "+ ./node_modules/.bin/jest x\n  \u00a0✕ nbsp indent (12ms)\n  ✕\u2028sep\n"
    yield ("+ ./node_modules/.bin/jest x\n   \n  a\n      b\n    c\n    ✓ t (1ms)\n"
           "Test Suites\n  ✓ after")
    yield "+ ./node_modules/.bin/jest x\n  s\n    ✓ ✓ double (5ms)(6ms)\n    ✕ x (ms)\n"
    yield "./node_modules/.bin/jest x\n  s\n    ✓ no leading space before the command\n"
    yield "+ ./node_modules/.bin/jest \n" + "  s\n    ✓ " + "名" * 60_000 + " (3ms)\n"
    yield from hostile(rng)


def bpmn_logs(rng):
    def run():
        out = ["> bpmn-js@8.0.0 test", "> karma start test/config/karma.unit.js", ""]
        for _ in range(rng.randint(1, 8)):
            kind = rng.randrange(5)
            test = f"{suite(rng)} {name(rng)}"
            if kind == 0:
                out.append(f"\x1b[1A\x1b[2KPhantomJS 2.1.1 (Linux 0.0.0) {test} FAILED")
            elif kind == 1:
                out.append(f"\x1b[2KPhantomJS 2.1.1 (Linux x86_64) {test} FAILED")
            elif kind == 2:
                out.append(f"Chrome Headless 91.0.4472.0 (Linux x86_64) {test} FAILED")
            elif kind == 3:
                out.append(f"HeadlessChrome 0.0.0 (Linux 0.0.0) {test} FAILED")
            else:
                out.append(f"HeadlessChrome 79.0 (Linux 0.0.0): Executed {rng.randint(1, 99)}"
                           " of 100 SUCCESS")
            if rng.random() < 0.4:
                out.append("\tExpected undefined to be defined.")
        out.append("TOTAL: 1 FAILED, 99 SUCCESS")
        return "\n".join(out)

    for _ in range(12):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "2KPhantomJS 2.1.1 (Linux 0.0.0) no newline after FAILED"
    yield "2KPhantomJS 2.1.1 (Linux 0.0.0) a FAILED b FAILED\n"
    yield "Chrome Headless 1 (Linux x86_64) A (Linux x86_64) B FAILED\n"
    yield "Chrome\u00a0Headless\u2028x\u00a0(Linux\u2003x86_64)\u0085t FAILED\n"
    yield "HeadlessChrome 1.2 (Linux 3.4) crlf FAILED\r\n"
    yield "HeadlessChrome ١.٢ (Linux 3.4) arabic digits FAILED\n"
    yield "2KPhantomJS 2.1.1\n(Linux\n0.0.0)\nsplit FAILED\n"
    yield "HeadlessChrome 1 (Linux 1) " + "x" * 110_000 + " FAILED\n"
    yield from hostile(rng)


def carbon_logs(rng):
    for _ in range(12):
        yield jest_file_lines(rng)
    for _ in range(10):
        yield mutate(jest_file_lines(rng), rng)
    yield "PASS a (1ms)\nPASS a (2 s)\nFAIL a\nPASS b (1.5s)\nFAIL c (2.5 s)\nFAIL d (3ms)"
    yield "PASS\tname (12ms)\nPASS\nPASS \nFAIL\u00a0nbsp (1 s)\nFAIL\u2028u2028 (2s)"
    yield "PASS x (1ms) (2ms)\nPASS y (..ms)\nFAIL z (1.2.3s)\nPASS w ( 1 s)\nPASS v (1\u00a0s)"
    yield "PASS ok (١٢ms)\nFAIL nope (12ms)\r\nPASS crlf (3 s)\r"
    yield "PASS " + "p" * 120_000 + " (12ms)\nFAIL " + "é" * 50_000
    yield from hostile(rng)


def eslint_logs(rng):
    def run():
        out = ["> eslint@8.0.0 test", "> node Makefile.js mocha", ""]
        failures = []
        for _ in range(rng.randint(1, 6)):
            out.append(f"  {suite(rng)}")
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.3:
                    failures.append((suite(rng), name(rng)))
                    out.append(f"    {len(failures)}) {failures[-1][1]}")
                else:
                    out.append(f"    ✓ {name(rng)}")
        out.append("")
        out.append(f"  {rng.randint(1, 900)} passing ({rng.randint(1, 60)}s)")
        out.append(f"  {len(failures)} failing")
        out.append("")
        for i, (s, t) in enumerate(failures, 1):
            out.append(f"  {i}) {s}")
            out.append(f"       {t}:")
            err = rng.choice(
                ["AssertionError [ERR_ASSERTION]", "TypeError", "Error", "SyntaxError"])
            out.append(f"     {err}: Should have no errors but had 1")
            out.append("      at testInvalidTemplate (lib/rule-tester/rule-tester.js:12:5)")
            out.append("")
        return "\n".join(out)

    for _ in range(12):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "  1) no error word follows"
    yield "  1)Error"
    yield "  1) a\n\n\n  Error"
    yield "\u00a0\u00a01) nbsp indent\n   TypeError: x"
    yield "\t\t12) tabs\u2028and seps\n  MyError"
    yield "  1) one  2) two\n  Error Error"
    yield "  ١) arabic\n  Error"
    yield "  1) crlf\r\n       name:\r\n     Error: x\r\n"
    yield "  1) " + "w" * 120_000 + "\n     Error: end"
    yield "  1) a" + " w" * 300 + "\n     Error: end"
    yield from hostile(rng)


def grommet_logs(rng):
    for _ in range(12):
        yield jest_file_lines(rng)
    for _ in range(10):
        yield mutate(jest_file_lines(rng), rng)
    yield ("PASS a (1.2 s)\nPASS b (12 ms)\nFAIL c (3ms)\nFAIL d (4.5s)\nPASS e (1 s) x\n"
           "PASS f ( 1s)")
    yield "FAIL\na\nPASS\nb\nFAIL  \n"
    yield "PASS x (1 s)\r\nFAIL y (2ms)\r\nPASS z\u00a0(3 s)\nPASS w (4\u2003ms)"
    yield "PASS \u2028(1 s)\nFAIL (2 s)\nPASS (3s)(4s)"
    yield "PASS a (1 s)\nFAIL a (2 s)\nPASS a (3 s)"
    yield "PASS " + "g" * 120_000 + " (1.5 s)"
    yield from hostile(rng)


def highlightjs_logs(rng):
    for _ in range(8):
        yield mocha_spec(rng, check=rng.choice(["✓", "✔"]))
    for _ in range(10):
        yield mutate(mocha_spec(rng, check=rng.choice(["✓", "✔"])), rng)
    yield mocha_spec(rng, summary=False)
    yield mocha_spec(rng, numbered_detail=False)
    yield "  suite\n    ✓ a (1ms)\n    ✔ b (2ms) (3ms)\n  1) failing one (4ms)\n\t5 passing"
    yield "  s\n    ✓ before\n\n 12 passing\n    ✓ after\n  1) after"
    yield "  s\n    ✓ before\n12 passing\n    ✓ after"
    yield "✓ top level\n1) top fail\n  suite\n✔\n1)\n    ✓\u00a0nbsp\n  \u2028sep suite\n  ✓ x"
    yield "  s\r\n    ✓ crlf (1ms)\r\n    2) fails\r\n"
    yield "  s\n    ✓ ✓ twice ✔ (5ms)\n    1) a) b) c\n    ١) arabic digit\n"
    yield "\n  5 passing"
    yield "  s\n" + "    ✓ " + "h" * 120_000 + " (12ms)\n"
    yield from hostile(rng)


def lighthouse_mocha_run(rng):
    out = ["yarn unit-core", f"running {rng.randint(1, 99)} test files", ""]
    for _ in range(rng.randint(1, 4)):
        out.append(f"  {suite(rng)}")
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:
                out.append(f"    {suite(rng)}")
            r = rng.random()
            if r < 0.2:
                out.append(f"      {rng.randint(1, 9)}) {name(rng)}")
            elif r < 0.3:
                out.append(f"      {rng.randint(1, 9)}) {name(rng)} ({ms(rng)}ms)")
            else:
                out.append(f"      ✔ {name(rng)}" + rng.choice(["", f" ({ms(rng)}ms)", " (12mms)"]))
        out.append("")
    out.append(f"  {rng.randint(1, 99)} passing ({rng.randint(1, 9)}s)")
    out.append("  1) after the summary")
    return "\n".join(out)


def lighthouse_json_run(rng):
    return ("+ ./node_modules/.bin/mocha --reporter json lighthouse-core/test\n"
            + mocha_json(rng) + "\nDone in 3.2s\n")


def lighthouse_cases(rng):
    repo = "GoogleChrome/lighthouse"
    for version in ["9.5", "10.0", "10.2"]:
        for _ in range(4):
            yield repo, version, lighthouse_mocha_run(rng)
        for _ in range(3):
            yield repo, version, mutate(lighthouse_mocha_run(rng), rng)
    yield repo, "10.0", lighthouse_mocha_run(rng) + "\n" + lighthouse_mocha_run(rng)
    yield repo, "9.5", ("running 3 test files\n  s\n   \n    ✔ a\n  \u00a0t\n"
                        "    5) b (1ms)\n4 passing")
    yield repo, "9.5", "no runs here\n  ✔ ignored"
    for version in ["3.0", "5.2", "11.1", "10.1", "9.6", " 3 ", "\u00a03.5\u2028", "1_0", "٣",
                    "3e0", "inf", "+4", "1e5000", "7_7.5"]:
        yield repo, version, jest_file_lines(rng)
    for version in ["2.0", "2.9", "1.5", "0", "-inf", "nan", "NaN", "2.9e0", "1e-400", "-3",
                    ".5", "2."]:
        yield repo, version, lighthouse_json_run(rng)
        if rng.random() < 0.5:
            yield repo, version, mutate(lighthouse_json_run(rng), rng)
    yield repo, "2.0", lighthouse_json_run(rng) + lighthouse_json_run(rng)
    yield repo, "2.0", ('./node_modules/.bin/mocha --reporter json\n"passes": [\n'
                        '    "fullTitle": "a \\"quoted\\" one",\n    "fullTitle": "b",\r\n'
                        '    "fullTitle":\u00a0"c",\n  ],\n"failures": [\n"fullTitle": "d",\n],')
    yield repo, "2.0", './node_modules/.bin/mocha --reporter json "fullTitle": "e",\n'
    # float() refuses these: swebench raises.
    for version in ["", "abc", "1.2.3", "1__0", "_1", "1_", "3\x1c", "\x1f3", "0x10", "1e",
                    "nan(1)", "infinit", "3 .0", "١.٢.٣", "None", "3\x00"]:
        yield repo, version, jest_file_lines(rng)
    for log in hostile(rng):
        yield repo, rng.choice(["9.5", "5.0", "2.0"]), log


def next_karma_run(rng):
    out = ["+ cd /app", "+ xvfb-run npm run test -- --single-run", "START:",
           "Starting browser ChromeHeadless", "Starting browser Chrome", ""]
    for _ in range(rng.randint(1, 4)):
        out.append(f"  {suite(rng)}")
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:
                out.append(f"    {suite(rng)}")
            r = rng.random()
            if r < 0.2:
                out.append(f"      ✗ {name(rng)}")
                out.append("\tAssertionError: #expected foo\n\tat bar\n")
            elif r < 0.3:
                out.append(f"      {rng.choice(['LOG', 'WARN', 'ERROR'])}: 'noise ✓'")
            else:
                out.append(f"      ✓ {name(rng)}")
        out.append("")
    out.append("Finished in 1.2 secs / 0.9 secs @ 10:00:00 GMT+0000")
    out.append("")
    out.append("TOTAL: 1 FAILED, 12 SUCCESS")
    out.append("  ✓ after total")
    return "\n".join(out)


def next_cypress_run(rng):
    out = ["====", "  (Run Starting)", ""]
    for i in range(rng.randint(1, 3)):
        spec = f"{name(rng, 0.1)}.spec.js"
        out.append(f"  Running:  {spec}{' ' * rng.randint(1, 30)}({i + 1} of 3)")
        out.append("")
        out.append("")
        out.append(f"  {suite(rng)}")
        for j in range(rng.randint(1, 5)):
            if rng.random() < 0.3:
                out.append(f"    {j + 1}) {name(rng)}")
            else:
                out.append(f"    ✓ {name(rng)} ({ms(rng)}ms)")
        out.append("")
        out.append(f"  {rng.randint(1, 5)} passing ({rng.randint(1, 9)}s)")
        out.append("")
    return "\n".join(out)


def next_cases(rng):
    repo = "alibaba-fusion/next"
    for _ in range(10):
        yield repo, rng.choice(["1.19", "1.25", "1.26", "2.0"]), next_karma_run(rng)
    for _ in range(8):
        yield repo, rng.choice(["1.19", "1.24"]), mutate(next_karma_run(rng), rng)
    for _ in range(8):
        yield repo, "1.27", next_cypress_run(rng)
    for _ in range(6):
        yield repo, "1.27", mutate(next_cypress_run(rng), rng)
    yield repo, "1.27", next_karma_run(rng)
    yield repo, "1.26", next_cypress_run(rng)
    for version in ["1.27.0", " 1.27", "1.270"]:
        yield repo, version, next_cypress_run(rng)
    yield repo, "1.20", next_karma_run(rng) + "\n" + next_karma_run(rng)
    yield repo, "1.20", (" xvfb-run x\nStarting browser Chrome\n  a\n    b\n  c\n      ✓ t\n"
                         "   in progress ✓ skipped by prefix\n  Check ✗\nx✗y\n"
                         "\x1b[32m✓\x1b[0m coloured\n"
                         "AssertionError:   #gone\n✓ hidden\n\n  ✓ kept\n")
    yield repo, "1.20", " xvfb-run \n\u00a0\u00a0nbsp suite\n\u2028✓ t\n  ✓\r\n  ✗\ttab\n"
    yield repo, "1.27", ("  Running:  a.js  (1 of 1)\n\n\n  Suite\n    1) f\n    ✓ p (1ms)\n"
                         "  Running:  b.js  (2 of 2)\n\n\n\u00a0\u00a0Nbsp\n    ✓ q (2ms)\n"
                         "    ✓ no paren\n     ✓ five spaces (3ms)\n\t\t\t\t1) tabs\n")
    yield repo, "1.27", "Running:x)\n\n\n  S\n    1) a\nRunning:y)\r\n\n\n  T\n    1) b\n"
    yield repo, "1.20", " xvfb-run \n  s\n    ✓ " + "n" * 120_000 + "\n"
    for log in hostile(rng):
        yield repo, rng.choice(["1.27", "1.20"]), log


def openlayers_logs(rng):
    def run():
        out = ["> ol@7.0.0 test", "> npm run karma -- --single-run", ""]
        for _ in range(rng.randint(1, 6)):
            kind = rng.randrange(5)
            test = f"{suite(rng)} {name(rng)}"
            if kind == 0:
                out.append(f"Chrome Headless 120.0.6099.109 (Linux x86_64) {test} FAILED")
                out.append("\tError: Expected 1 to be 2.")
            elif kind == 1:
                out.append(f"Chrome 98.0.4758.80 (Linux x86_64) {test} FAILED")
            elif kind == 2:
                out.append(f"  {rng.randint(1, 20)}) {suite(rng)}")
                out.append(f"       {name(rng)}:")
                out.append(f"     {rng.choice(['Error', 'TypeError', 'AssertionError'])}: nope")
            elif kind == 3:
                out.append(f"case {name(rng, 0.1)}: mismatch {rng.random():.3f}")
            else:
                out.append(f"Chrome Headless 120.0 (Linux x86_64): Executed {rng.randint(1, 9)}"
                           " of 9 SUCCESS")
        return "\n".join(out)

    for _ in range(12):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "Chrome Headless 1.0 (Linux x86_64) no newline FAILED"
    yield "Chrome Headless 1.0 (Linux x86_64) a FAILED\nChrome 2.0 (Linux x86_64) a FAILED\n"
    yield "Chrome 1 (Linux 1_2) x\u00a0FAILED\nChrome\u20031 (Linux\u2003a) y FAILED\r\n"
    yield "  1) a\n  2) b Error:\n\u00a0\u00a03) nbsp\n\u2028  4) after sep\n   TypeError: x"
    yield "case a: mismatch\ncase\tb:\u00a0mismatch\ncase c:mismatch\n case d: mismatch"
    yield "  1) " + "o" * 110_000 + " Error: x"
    yield from hostile(rng)


def titles(failures, passes):
    """A report whose tests' titles are the given JSON literals."""
    def tests(literals):
        return ", ".join(f'{{"fullTitle": {t}}}' for t in literals)
    return f'{{"failures": [{tests(failures)}], "passes": [{tests(passes)}]}}'


# Reports parse_log_prismjs hands to json.loads; the cases cover what it accepts and refuses.
PRISM_REPORTS = [
    '{"failures": [], "passes": []}',
    '{"passes": [], "failures": []}',
    '{"failures": [{"fullTitle": "a"}], "passes": [{"fullTitle": "a"}]}',
    '{"stats": {"x": NaN, "y": Infinity, "z": -Infinity}, "failures": [],'
    ' "passes": [{"fullTitle": "n"}]}',
    '{"failures": [], "passes": [{"fullTitle": "first"}], "passes": [{"fullTitle": "last"}]}',
    '{"failures": [], "passes": [{"fullTitle": "x", "fullTitle": "y"}]}',
    '{"failures": [], "passes": [{"fullTitle": "tab\there"}]}',
    '{"failures": [], "passes": [{"fullTitle": "nl\nhere"}]}',
    '{"failures": [], "passes": [{"fullTitle": "nul\x00"}]}',
    '{"failures": [], "passes": [{"fullTitle": "del\x7f and \u2028 and \u0085 raw"}]}',
    '{"failures": [], "passes": [{"fullTitle": "\\u00e9\\u00E9 \\ud83c\\udf89 \\uD83C\\uDF89"}]}',
    '{"failures": [], "passes": [{"fullTitle": "esc \\" \\\\ \\/ \\b \\f \\n \\r \\t"}]}',
    '{"failures": [], "passes": [{"fullTitle": "bad \\x41"}]}',
    '{"failures": [], "passes": [{"fullTitle": "bad \\u12"}]}',
    '{"failures": [], "passes": [{"fullTitle": "bad \\u12G4"}]}',
    '{"failures": [], "passes": [{"fullTitle": "hi \\ud83c\\u12G4"}]}',
    '{"failures": [], "passes": [{"fullTitle": "a"},]}',
    '{"failures": [], "passes": [],}',
    "{'failures': [], 'passes': []}",
    '{"failures": [], "passes": [{"fullTitle": 1}, {"fullTitle": 1.0}, {"fullTitle": true}]}',
    '{"failures": [{"fullTitle": "1"}], "passes": [{"fullTitle": 2}]}',
    titles(["null", "false", "0"], ["-0", "0.0", "-0.0"]),
    titles(["NaN", "Infinity", "-Infinity"], ["NaN", "1e400", "-1E999"]),
    titles(["0.1", "1e16", "1e-5", "123.456", "1e22", "5e-324", "-2.5", "1e-400",
            "1234567890123456.0", "0.0001"], []),
    titles(["12345678901234567890", "1.2345678901234567e19", "100000000000000000000", "1e20"],
           ["2.0", "2"]),
    titles(["9007199254740993", "9007199254740992.0"], []),
    '{"failures": [], "passes": [{"fullTitle": ["list"]}]}',
    '{"failures": [], "passes": [{"fullTitle": {"a": 1}}]}',
    '{"failures": {}, "passes": []}',
    '{"failures": {"a": 1}, "passes": []}',
    '{"failures": "", "passes": []}',
    '{"failures": "abc", "passes": []}',
    '{"failures": 5, "passes": []}',
    '{"failures": null, "passes": []}',
    '{"failures": true, "passes": []}',
    '{"passes": []}',
    '{"failures": []}',
    '{"failures": [1], "passes": []}',
    '{"failures": ["x"], "passes": []}',
    '{"failures": [[]], "passes": []}',
    '{"failures": [{}], "passes": []}',
    '{"failures": [{"title": "t"}], "passes": []}',
    '{"failures": [], "passes": [], "n": [01]}',
    '{"failures": [], "passes": [], "n": 1.}',
    '{"failures": [], "passes": [], "n": .5}',
    '{"failures": [], "passes": [], "n": -}',
    '{"failures": [], "passes": [], "n": [1e5, -0.0e-0, 1E+2, 0, -1]}',
    '{"failures": [], "passes": [], "n": 1e}',
    '{"failures": [], "passes": [], "n": -NaN}',
    '{"failures": [], "passes": [], "n": nan}',
    '{"failures": [], "passes": [], "n": True}',
    '{"failures": [], "passes": [], "n": nul}',
    '{"failures":[],"passes":[]} {"a": 1}',
    '{"failures":[],"passes":[]}}',
    '{\t"failures" :\r\n[ ] ,\n"passes":[{"fullTitle":"ws"}]\t}',
    '{\u00a0"failures": [], "passes": []}',
    '{"failures": [], \x0c"passes": []}',
    '{"": 1, "failures": [], "passes": [{"fullTitle": ""}]}',
    '{"failures": [], "passes": [{"fullTitle": "' + "e" * 5000 + '"}]}',
    '{"failures": [], "passes": [], "n": 1' + "0" * 4299 + "}",
    '{"failures": [], "passes": [], "n": -1' + "0" * 4299 + "}",
    '{"failures": [], "passes": [], "n": 1' + "0" * 4300 + "}",
    '{"failures": [], "passes": [], "n": 1' + "0" * 4300 + ".5}",
    '{"failures": [], "passes": [], "n": ' + "[" * 300 + "]" * 300 + "}",
    '{"failures": [], "passes": [], "n": ' + '{"a":' * 300 + "1" + "}" * 300 + "}",
    '{"failures": [], "passes": [], "n": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"failures": [], "passes": [], "n": ' + "[" * 5000 + "}",
    # Lone surrogates only where no title carries them (rex has no UTF-8 for them).
    '{"failures": [{"fullTitle": "ok"}], "passes": [], "x": "\\ud800 \\udc00 \\ud800\\u0041"}',
    '{"failures": [], "passes": [{"fullTitle": "unterminated}]}',
    '{"failures": [], "passes": [{"fullTitle": "a" "b"}]}',
    '{"failures": [], "passes": [{"fullTitle" "a"}]}',
    '{"failures": [], "passes": [{fullTitle: "a"}]}',
    '{"failures": [], "passes": [{"fullTitle": "a"} {"fullTitle": "b"}]}',
    '{"failures": [], "passes": [{"fullTitle": "x\\', 
]


def prism_logs(rng):
    cmd = "./node_modules/.bin/mocha tests/run.js --reporter json"
    pre = "+ cd /testbed\n+ npm ci\nadded 412 packages in 9s\n+ "

    def run(**kw):
        return pre + cmd + "\n" + mocha_json(rng, **kw) + "\n"

    for _ in range(12):
        yield run()
    # Damaged reports keep astral characters raw: an edit inside an escaped surrogate pair would
    # leave a lone surrogate in a title, which rex cannot carry in UTF-8.
    for _ in range(6):
        yield mutate(run(ascii_only=False), rng, edits=1)
    yield run(indent=None)
    yield run(passes=[], failures=[])
    yield run() + run()
    yield run() + "\nnpm ERR! code ELIFECYCLE {exit 1}\n"
    yield run() + "\n}\n"
    yield pre + "no command in this log {\"failures\": 5}"
    yield pre + cmd
    yield pre + cmd + "\nno json at all"
    yield pre + cmd + "\n{ broken"
    yield pre + cmd + cmd + "\n" + mocha_json(rng)
    yield cmd + "\ntext {" + '"failures": [], "passes": [{"fullTitle": "middle"}]' + "} more } text"
    for report in PRISM_REPORTS:
        yield pre + cmd + "\n" + report + "\n"
    for log in hostile(rng):
        yield log


def quarto_logs(rng):
    def run():
        out = ["+ ./run-tests.sh smoke/render/render.test.ts",
               f"running {rng.randint(1, 9)} tests from ./smoke/render/render.test.ts"]
        for _ in range(rng.randint(1, 8)):
            kind = rng.choice(["smoke", "smoke", "unit"])
            target = rng.choice(
                [f"docs/{name(rng, 0.1)}.qmd", f"/tmp/{rng.choice(['abc123', 'x_y', 'q9'])}.qmd",
                 f"/tmp/{rng.choice(['dir1', 'tmpzz'])}/out.html", "yaml intelligence"])
            r = rng.random()
            if r < 0.5:
                status = "\x1b[0m\x1b[32mok\x1b[0m \x1b[0m\x1b[38;5;245m(1s)\x1b[0m"
            elif r < 0.7:
                status = "\x1b[0m\x1b[31mFAILED\x1b[0m (2s)"
            elif r < 0.8:
                status = "\x1b[0m\x1b[34mINFO\x1b[0m"
            else:
                status = "running"
            out.append(f"[{kind}] > quarto render {target} ... {status}")
            if rng.random() < 0.2:
                out.append(f"  [{kind}] step ... \x1b[32mok\x1b[0m")
        out.append(
            rng.choice([
                "\x1b[0m\x1b[32mok\x1b[0m | 3 passed (2 steps) | 0 failed (12s)",
                "test result: ok. [smoke] 3 passed; 0 failed",
                " ERRORS ", "failures:", ""]))
        out.append("[smoke] > after the end ... \x1b[32mok\x1b[0m")
        return "\n".join(out)

    for _ in range(14):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "[smoke] a ... 32mok\n[smoke] a ... 31mFAILED\n[unit] b...32mok 31mFAILED\n[unit] c"
    yield ("[smoke] /tmp/a.qmd and /tmp/b.qmd ... 32mok\n[smoke] /tmp/b.qmd ... 31mFAILED\n"
           "[smoke] /tmp/a/ /tmp/a.qmd ... ok")
    yield ("[smoke] /tmp/日本.qmd ... 32mok\n[unit] /tmp/é_1/x ... 31mFAILED\n"
           "[smoke] /tmp/\u00a0/ ... 32mok")
    yield "test result: [smoke] 32mok\n[smoke] passed failed steps 32mok\n[smoke] x 34mINFO 32mok"
    yield "[smoke]\n[unit]\n[smoke] ...\n...[unit]\n[smoke ] x\n[SMOKE] y\n[smoke]... 32mok"
    yield "[smoke] a ... 32mok\r\n[smoke] b ... 31mFAILED\r\n  ERRORS\r\n[smoke] c ... 32mok"
    yield "[unit] " + "q" * 120_000 + " ... 32mok"
    yield from hostile(rng)


def chart_logs(rng):
    def run():
        out = ["> chart.js@4.0.0 test", "> karma start --single-run --browsers chrome", ""]
        for _ in range(rng.randint(1, 6)):
            version = f"{rng.randint(60, 130)}.0.{rng.randint(0, 9999)}.{rng.randint(0, 99)}"
            test = f"{suite(rng)} {name(rng)}"
            if rng.random() < 0.7:
                line = f"Chrome {version} (Linux x86_64) {test} FAILED"
            else:
                line = f"Chrome {version} (Linux x86_64): Executed 10 of 2000 (1 FAILED)"
            if rng.random() < 0.4:
                line = ansi(line, rng)
            out.append(line)
            out.append("\tExpected 1 to equal 2.")
        return "\n".join(out)

    for _ in range(12):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "Chrome 1.0 (a) t FAILED\nChrome 2.0\n(b) u FAILED\nChrome 3.0 (c)\tv\u00a0FAILED"
    yield "Chrome 1.0 (a) t FAILED\r\nChrome 1.0 (b) u FAILED \nChrome 1.0 () w FAILED"
    yield "Chrome 1.0 (a) (b) x FAILED y FAILED\nChrome\u20031.0\u2003(c)\u2003z FAILED"
    yield "\x1b[31mChrome 1.0 (a)\x1b[0m \x1b[1mcoloured\x1b[0m FAILED\x1b[0m"
    yield "Chrome 1.0 (a) t FAILED\u2028Chrome 1.0 (b) u FAILED\u0085"
    yield "Chrome 1.0 (" + "p" * 110_000 + ") t FAILED"
    yield from hostile(rng)


def marked_logs(rng):
    def run():
        out = ["> marked@4.0.0 test", "> node test/run-spec-tests.js", ""]
        for i in range(1, rng.randint(2, 10)):
            r = rng.random()
            if r < 0.5:
                out.append(f"{i}) {suite(rng)} {name(rng)}{rng.choice(['', '  ', chr(9)])}")
            elif r < 0.7:
                out.append(f"  {i}) indented {name(rng)}")
            else:
                out.append(f"    ✔ {name(rng)}")
        out.append(f"{rng.randint(1, 999)} passing")
        return "\n".join(out)

    for _ in range(12):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "1) a\n2)b\n3)\tc\n4)\u00a0d\n5)\u2028e\n6) \n7)\n٣) arabic\n1) a"
    yield "1) crlf\r\n2) x\r\n10) y\u0085\n"
    yield "1) " + "m" * 120_000
    yield from hostile(rng)


def p5_logs(rng):
    def run():
        out = ["Running \"mochaChrome:test\" (mochaChrome) task", ""]
        failures = []
        for _ in range(rng.randint(1, 3)):
            out.append(f"  {suite(rng)}")
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.3:
                    failures.append((suite(rng, 0), name(rng)))
                    out.append(f"    {len(failures)}) {failures[-1][1]}")
                else:
                    out.append(f"    ✓ {name(rng)}")
        if rng.random() < 0.4:
            out += ["{", '  "stats": {"passes": 1}', "}", '["a", "b"]', "[", "  1,", "]",
                    '{"inline": true}']
        if rng.random() < 0.4:
            out += ["<testsuite>", "  <testcase>1) not: a failure</testcase>", "</testsuite>"]
        out.append(f"  {rng.randint(1, 99)} passing (3s)")
        out.append(f"  {len(failures)} failing")
        out.append("")
        for i, (s, t) in enumerate(failures, 1):
            out.append(f"  {i}) {s}")
            out.append(f"       {t}:")
            out.append("     Error: expected 1 to equal 2")
            out.append("      at Context.<anonymous> (test/unit/core.js:12:5)")
            out.append("")
        return "\n".join(out)

    for _ in range(12):
        yield run()
    for _ in range(10):
        yield mutate(run(), rng)
    yield "  1) a\n       b\n         c:\n  2) a\n     b\n   c:\n  3)x:\n4) y:"
    yield "\x1b[31m  1) coloured\x1b[0m\n       \x1b[90mname\x1b[0m:\n"
    yield "  1) " + "n" * 1100 + ":\n  2) short:"
    yield "  1) a {\n  inside: x\n}\n  2) b:\n  [\n  3) c:\n  ]\n  4) d:"
    yield "<a><a>x</a>  1) hidden: </a>  2) shown:\n<b>\n  3) in b:\n</b>\n<c>no close  4) z:"
    yield "<x>  1) y:<y></x></y>  2) q:\n<日本>  1) u:</日本>  5) v:"
    yield "  1) a\r\n       b\r\n         c:\r\n"
    yield "\u00a0\u00a01)\u00a0nbsp:\n\u2028 2) sep\n    more:\n\t3)\ttab\n\t\tdeeper:"
    yield "  ١) arabic:\n  1) ok: \n  1)  : \n  1):"
    yield "  1) " + "n" * 120_000 + "\n  2) end:"
    yield "<t>" + "  1) x:\n" * 200 + "</t>" * 3 + "  9) after:"
    yield from hostile(rng)


def jest_verbose(rng, leading=None):
    out = ["$ jest --verbose", f" PASS  src/{name(rng, 0.1)}.test.js"]
    for _ in range(rng.randint(1, 4)):
        out.append(f"  {suite(rng)}")
        for _ in range(rng.randint(1, 5)):
            mark = rng.choice(["✓", "✓", "✕", "○"])
            timing = rng.choice(["", f" ({ms(rng)} ms)", f" ({ms(rng)}ms)", f" ({ms(rng)} s)",
                                 " (1 ms) (2 ms)", " (ms)"])
            if mark == "○":
                timing = rng.choice(["", " skipped", ""])
            out.append(f"    {mark} {name(rng)}{timing}")
    out.append("")
    out.append(f"Tests:       1 failed, {rng.randint(1, 99)} passed, 100 total")
    return "\n".join(out)


def jest_logs(rng):
    for _ in range(14):
        yield jest_verbose(rng)
    for _ in range(12):
        yield mutate(jest_verbose(rng), rng)
    yield "✓ a\n✕ a\n○ a\n✓a\n✓ \n✓  \n  ✓   spaced out   (3 ms)  \n○ skipped 3 tests"
    yield "✓\u00a0nbsp (1 ms)\n✕\u2028sep\n○\x1cfs\n✓\tt (12 ms)\r\n✕ crlf (4ms)\r"
    yield "✓ x (١ ms)\n✓ y (1 mss)\n✓ z ( 1 ms)\n✓ w (1  ms)\n✓ v (1 s)\n✓ u (1)"
    yield "\x1b[32m✓\x1b[0m coloured (1 ms)\n  \x1b[2m✓ dim\x1b[0m"
    yield "✓ " + "j" * 120_000 + " (5 ms)"
    yield from hostile(rng)


def jest_json_lines(rng):
    out = ["+ npx jest --json | jq -r '.testResults[].assertionResults[] | ...'"]
    for _ in range(rng.randint(1, 12)):
        status = rng.choice(["PASSED", "PASSED", "FAILED", "SKIPPED", "passed"])
        out.append(f"[{status}] {suite(rng)} > {name(rng)}")
    return "\n".join(out)


def jest_json_logs(rng):
    for _ in range(12):
        yield jest_json_lines(rng)
    for _ in range(10):
        yield mutate(jest_json_lines(rng), rng)
    yield ("[PASSED] a\n[FAILED] a\n[PASSED]a\n[PASSED] \n[PASSED]  two spaces\n"
           "  [FAILED] indented  ")
    yield "[PASSED]\u00a0nbsp\n[FAILED]\u2028sep\n[PASSED]\ttab\n[FAILED] crlf\r\n[PASSED] x\u0085"
    yield "[PASSED] [FAILED] nested\n[[PASSED]] no\n[PASSED] " + "k" * 120_000
    yield from hostile(rng)


def vitest_run(rng):
    out = [" RUN  v0.34.6 /testbed", ""]
    for _ in range(rng.randint(1, 10)):
        mark = rng.choice(["✓", "✓", "×", "↓"])
        package = rng.choice(["runtime-core", "reactivity"])
        path = f"packages/{package}/__tests__/{name(rng, 0.1)}.spec.ts"
        tail = rng.choice(["", f" {ms(rng)}ms", f" {ms(rng)} ms", " [skipped]", f" {ms(rng)}s",
                           " 12", " (3)"])
        out.append(f" {mark} {path} > {suite(rng)} > {name(rng)}{tail}")
    out.append(f" Test Files  1 failed | {rng.randint(1, 9)} passed")
    return "\n".join(out)


def vitest_logs(rng):
    for _ in range(14):
        yield vitest_run(rng)
    for _ in range(10):
        yield mutate(vitest_run(rng), rng)
    yield "✓ a\n× a\n↓ a\n✓a\n✓ \n✓  x  12ms  \n↓ s [skipped]\n× f 1 m\n✓ p 1s s"
    yield "✓\u00a0nbsp 3ms\n×\u2028sep\n↓\x1ffs\n✓ crlf 3ms\r\n× t\t5 ms"
    yield "\x1b[32m✓\x1b[39m coloured\n ✓ x ١٢ms\n ✓ y [skipped] [skipped]"
    yield "✓ " + "v" * 120_000 + " 12ms"
    yield from hostile(rng)


def karma_run(rng):
    out = ["> preact@10.0.0 test:karma", "START:", "Starting browser ChromeHeadless"]
    depth = 0
    for _ in range(rng.randint(2, 12)):
        r = rng.random()
        if r < 0.3 and depth < 4:
            depth += 1
            out.append("  " * depth + suite(rng))
        elif r < 0.4 and depth > 1:
            depth -= 1
            out.append("  " * depth + suite(rng))
        else:
            mark = rng.choice(["✔", "✔", "✖"])
            out.append("  " * (depth + 1) + f"{mark} {name(rng)}")
    out.append("")
    out.append("Finished in 2.3 secs / 1.9 secs")
    out.append("")
    out.append(rng.choice(["SUMMARY:", "SUMMARY: ✔ 10 tests completed", ""]))
    out.append("✔ after summary")
    return "\n".join(out)


def karma_logs(rng):
    for _ in range(14):
        yield karma_run(rng)
    for _ in range(12):
        yield mutate(karma_run(rng), rng)
    yield "✔ before start\nStarting browser X\n✔ top\n✖ top fail\n  suite\n    ✔ in suite\n"
    # A pop from an empty suite list (IndexError in swebench).
    yield "Starting browser\n    deep\n   less\n  lesser\n  ✔ t\n"
    yield "Starting browser\n     a\n      b\n    c\n   d\n  e\n ✔ t\n"
    yield "Starting browser\n  a\n    ✔ t\n \u00a0 b\n\u2028c\n✔ u\n"
    yield "Starting browser\n  a\n    b\n  c\n✔ t\n      d\n ✔ u\n"
    yield "Starting browser\n\u00a0\u00a0nbsp\n\u2028sep\n\t\ttab\n  ✔\u00a0x\n✖\ty\r\n  ✔ z\r\n"
    yield "Starting browser\n  \n    \n✔\n✔ \n ✔✔ x\n"
    yield "Starting browser\n  s\n    ✔ " + "r" * 120_000 + "\n"
    yield from hostile(rng)


def tap_run(rng):
    out = ["TAP version 13", f"1..{rng.randint(1, 20)}"]
    for i in range(1, rng.randint(2, 14)):
        status = rng.choice(["ok", "ok", "not ok"])
        indent = "    " if rng.random() < 0.2 else ""
        dash = rng.choice(["- ", ""])
        directive = rng.choice(["", " # SKIP", " # TODO later", ""])
        out.append(f"{indent}{status} {i} {dash}{name(rng)}{directive}")
        if status == "not ok" and rng.random() < 0.5:
            out += ["  ---", "  operator: equal", "  expected: 1", "  ...", ""]
    out.append("# tests 10")
    return "\n".join(out)


def tap_logs(rng):
    for _ in range(14):
        yield tap_run(rng)
    for _ in range(12):
        yield mutate(tap_run(rng), rng)
    yield "ok 1 a\nnot ok 1 a\nok 2\nok  3 x\nok 4  y\nok x z\nnot  ok 5 w\nok ٣ arabic\nOK 6 q"
    yield "ok\u00a01\u00a0nbsp\nok 1\tt\nok 2 crlf\r\nnot ok 3 x\u2028\n\u2028ok 4 y"
    yield "ok 1 " + "t" * 120_000
    yield from hostile(rng)


# --- cases --------------------------------------------------------------------------------------

REPOS = {
    "parse_log_calypso": "Automattic/wp-calypso",
    "parse_log_bpmn_js": "bpmn-io/bpmn-js",
    "parse_log_carbon": "carbon-design-system/carbon",
    "parse_log_eslint": "eslint/eslint",
    "parse_log_grommet": "grommet/grommet",
    "parse_log_highlightjs": "highlightjs/highlight.js",
    "parse_log_openlayers": "openlayers/openlayers",
    "parse_log_prismjs": "PrismJS/prism",
    "parse_log_quarto_cli": "quarto-dev/quarto-cli",
    "parse_log_chart_js": "chartjs/Chart.js",
    "parse_log_marked": "markedjs/marked",
    "parse_log_p5js": "processing/p5.js",
    "parse_log_react_pdf": "diegomura/react-pdf",
    "parse_log_jest": "babel/babel",
    "parse_log_jest_json": "immutable-js/immutable-js",
    "parse_log_vitest": "vuejs/core",
    "parse_log_karma": "preactjs/preact",
    "parse_log_tap": "axios/axios",
}

LOGS = {
    "parse_log_calypso": calypso_logs,
    "parse_log_bpmn_js": bpmn_logs,
    "parse_log_carbon": carbon_logs,
    "parse_log_eslint": eslint_logs,
    "parse_log_grommet": grommet_logs,
    "parse_log_highlightjs": highlightjs_logs,
    "parse_log_openlayers": openlayers_logs,
    "parse_log_prismjs": prism_logs,
    "parse_log_quarto_cli": quarto_logs,
    "parse_log_chart_js": chart_logs,
    "parse_log_marked": marked_logs,
    "parse_log_p5js": p5_logs,
    "parse_log_react_pdf": carbon_logs,
    "parse_log_jest": jest_logs,
    "parse_log_jest_json": jest_json_logs,
    "parse_log_vitest": vitest_logs,
    "parse_log_karma": karma_logs,
    "parse_log_tap": tap_logs,
}


def immutable_cases(rng):
    ids = ["immutable-js__immutable-js-2006", "immutable-js__immutable-js-2005", "x-2006", "2005",
           "immutable-js__immutable-js-2007", "", "2006-", "x-2006 ", "x-٢٠٠٦", "immutable-js"]
    for iid in ids:
        for log in (jest_verbose(rng), jest_json_lines(rng)):
            yield iid, log
    for _ in range(4):
        yield "immutable-js__immutable-js-2006", mutate(jest_verbose(rng), rng)
        yield "immutable-js__immutable-js-2005", mutate(jest_json_lines(rng), rng)
    yield "immutable-js__immutable-js-2006", ""
    yield "immutable-js__immutable-js-2005", "[PASSED] " + "i" * 120_000


def cases(rng: random.Random):
    for parser, logs in LOGS.items():
        for log in logs(rng):
            yield {"parser": parser, "instance_id": f"{REPOS[parser].replace('/', '__')}-1",
                   "repo": REPOS[parser], "version": "1.0", "log": log}
    for repo, version, log in lighthouse_cases(rng):
        yield {"parser": "parse_log_lighthouse", "instance_id": "GoogleChrome__lighthouse-1",
               "repo": repo, "version": version, "log": log}
    for repo, version, log in next_cases(rng):
        yield {"parser": "parse_log_next", "instance_id": "alibaba-fusion__next-1", "repo": repo,
               "version": version, "log": log}
    for iid, log in immutable_cases(rng):
        yield {"parser": "parse_log_immutable_js", "instance_id": iid,
               "repo": "immutable-js/immutable-js", "version": "4.0", "log": log}
