"""Cases for the C and C++ log parsers: redis/valkey's test runner, jq's automake test-suite,
nlohmann/json's doctest XML report (well-formed, damaged and every XML construct expat takes or
refuses), micropython's run-tests.py and googletest (fmt); then damaged copies (the damage helpers
are corpus_python.py's)."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_python import big_line, degenerate, mutate, nasty_char, sprinkle  # noqa: E402

# --- redis / valkey -----------------------------------------------------------------------------

REDIS_TESTS = [
    "Basic LPUSH, RPUSH, LLENGTH, LINDEX, LPOP - quicklist",
    "SET and GET an item", "PSYNC2: Set #1 to replicate from #0",
    "MULTI with config error", "Crash report generated on SIGABRT",
    "Test replication with lazy expire", "ünïcode key 键 works", "ZADD - Variadic version (base case)",
    "Check if maxclients works refusing connections", "test (with parens) in (name)",
    "EXPIRE - It should be still possible to read 'x'", "Not supported in cluster mode",
]


def redis_log(rng: random.Random) -> str:
    lines = ["Cleanup: may take some time... OK", "Starting test server at port 21079",
             "[ready]: 12345", "Testing unit/type/list"]
    for _ in range(rng.randint(0, 14)):
        name = rng.choice(REDIS_TESTS)
        kind = rng.choices(["ok", "err", "skip", "ignore", "exception"], [10, 2, 2, 1, 1])[0]
        if kind == "ok":
            lines.append(f"[ok]: {name}" + rng.choice(
                [f" ({rng.randint(0, 9999)} ms)", f" ({rng.randint(1, 99)}ms)", f" ({rng.randint(1, 9)} s)",
                 "", f" ({rng.randint(1, 9)}  ms)", " (3 us)", " (ms)"]))
        elif kind == "err":
            lines.append(f"[err]: {name}" + rng.choice(
                [" in tests/unit/multi.tcl", "", " in tests/unit/type/list.tcl (3 ms)",
                 "  in   tests/x.tcl", " in", " in \t", f" ({rng.randint(1, 99)} ms)"]))
            lines.append("Expected 'OK' to equal or match 'ERR'")
        elif kind == "exception":
            lines += ["[exception]: Executing test client: ERR unknown command.", "ERR unknown command",
                      "    while executing"]
        else:
            lines.append(f"[{kind}]: {name}")
        if rng.random() < 0.2:
            lines.append(f"[{rng.randint(1, 99)}/{rng.randint(100, 120)} done]: unit/type/list"
                         f" ({rng.randint(1, 60)} seconds)")
    lines += ["", "                   The End", "", "Execution time of different units:",
              "  12 seconds - unit/type/list", "", rng.choice(["\\o/ All tests passed without errors!",
                                                              "!!! WARNING The following tests failed:"])]
    return "\n".join(lines)


REDIS_NEAR = [
    "[ok]:", "[ok]: ", "[ok]:x", "[ok]:  x", "[ok]:\tx", "[ok] : x", "[OK]: x", " [ok]: padded",
    "[ok]: x (12 ms)", "[ok]: x (12ms)", "[ok]: x (12  ms)", "[ok]: x (12 s)", "[ok]: x (ms)",
    "[ok]: x (12 m)", "[ok]: x (12 mss)", "[ok]: x (\u0663 ms)", "[ok]: (1 ms)", "[ok]:  (1 ms)",
    "[ok]: x (1 ms) (2 ms)", "[ok]: x\xa0(1 ms)", "[ok]: x (1 ms)\r", "[ok]: x\u2028y",
    "[err]: x in y", "[err]: x in", "[err]: x in y z", "[err]: in y", "[err]:  x   in   y  ",
    "[err]: x in y (3 ms)", "[err]: x\tin\ty", "[err]: x in\u3000y", "[err]: x\u2028in y",
    "[skip]: x", "[ignore]: x (1 ms)", "[skip]:x", "[exception]: x", "[ok]: \x1b[32mx\x1b[0m",
    "[ok]: x ", "[ok]: x\x00", "\x1b[32m[ok]: colored\x1b[0m", "[ok]: dup", "[err]: dup", "[ok]: dup",
]


def redis_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        return big_line(rng, rng.choice(["[ok]: ", "[err]: ", "[skip]: "]),
                        rng.choice([" (12 ms)", " in tests/x.tcl", "", " ("]),
                        alphabet="abc xyz-_()")
    log = redis_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, REDIS_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- jq -----------------------------------------------------------------------------------------

JQ_TESTS = ["tests/mantest", "tests/jqtest", "tests/shtest", "tests/utf8test", "tests/base64test",
            "tests/onigtest", "tests/optionaltest", "tests/manonigtest", "tests/ünïcode test"]


def jq_log(rng: random.Random) -> str:
    lines = ["make  check-TESTS", "make[1]: Entering directory '/testbed'"]
    for _ in range(rng.randint(0, 10)):
        lines.append(f"{rng.choices(['PASS', 'FAIL', 'SKIP', 'XFAIL', 'ERROR'], [8, 2, 1, 1, 1])[0]}:"
                     f" {rng.choice(JQ_TESTS)}")
        if rng.random() < 0.2:
            lines += ["Test #12: 'map(.+1)' at line number 34", "*** Expected [2,3], but got [1,2]"]
    lines += ["=" * 76, "Testsuite summary for jq 1.7", "=" * 76, "# TOTAL: 9", "# PASS:  8",
              "# SKIP:  0", "# XFAIL: 0", "# FAIL:  1", "# XPASS: 0", "# ERROR: 0"]
    return "\n".join(lines)


JQ_NEAR = [
    "PASS:", "PASS: ", "PASS:x", "PASS:  x", "PASS:\tx", " PASS: indented", "\tFAIL: tab",
    "PASS : x", "pass: x", "# PASS:  3", "XPASS: x", "PASS: x\r", "PASS: x\u2028", "PASS:\xa0x",
    "FAIL: \x1b[31mx\x1b[0m", "PASS: a PASS: b", "FAIL:\u3000x", "PASS: dup", "FAIL: dup",
]


def jq_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        return big_line(rng, rng.choice(["PASS: ", "FAIL: ", "  PASS:  "]), "", alphabet="ab/ ._")
    log = jq_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, JQ_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- micropython --------------------------------------------------------------------------------

MP_TESTS = ["basics/0prelim.py", "basics/andor.py", "basics/string_format.py",
            "extmod/uasyncio_basic.py", "micropython/viper_error.py", "float/float_parse.py",
            "basics/ünïcode.py", "misc/sys settrace.py"]


def micropython_log(rng: random.Random) -> str:
    lines = ["+ cd tests", "+ ./run-tests.py"]
    for _ in range(rng.randint(0, 14)):
        lines.append(f"{rng.choices(['pass', 'FAIL', 'skip', 'lrge'], [10, 2, 2, 1])[0]}"
                     f"{' ' * rng.randint(1, 3)}{rng.choice(MP_TESTS)}")
    lines += [f"{rng.randint(0, 900)} tests performed ({rng.randint(0, 9000)} individual testcases)",
              f"{rng.randint(0, 900)} tests passed", "3 tests skipped: async_await bytearray1 a",
              "1 tests failed: string_format"]
    return "\n".join(lines)


MP_NEAR = [
    "pass", "pass ", "pass x", "passx", "pass\tx", "pass  x  ", " pass padded", "PASS x", "FAIL x",
    "fail x", "skip", "skip\u3000x", "pass\xa0x", "pass x\r", "FAIL  \x1b[31mx\x1b[0m",
    "skip x\u2028y", "pass dup", "FAIL dup", "pass \x00", "FAIL\x1cx",
]


def micropython_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        return big_line(rng, rng.choice(["pass ", "FAIL  ", "skip "]), "", alphabet="ab/ ._")
    log = micropython_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, MP_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- googletest ---------------------------------------------------------------------------------

GTEST_TESTS = ["format_test.escape", "format_test.unmatched_braces", "printf_test.length",
               "chrono_test.format_default", "xchar_test.format_explicitly_convertible_to_std_string_view",
               "ranges_test/0.format_vector", "util_test.utf8_to_utf16 ünïcode",
               "format_test.big_print", "args_test.named_int"]


def googletest_log(rng: random.Random) -> str:
    lines = ["Running main() from /testbed/test/gtest/gmock-gtest-all.cc",
             "[==========] Running 9 tests from 3 test suites.",
             "[----------] Global test environment set-up.", "[----------] 3 tests from format_test"]
    failed = []
    for _ in range(rng.randint(0, 12)):
        name = rng.choice(GTEST_TESTS)
        suffix = rng.choice(["", "", ", where TypeParam = int", ", where GetParam() = (1, 2)"])
        lines.append(f"[ RUN      ] {name}{suffix}")
        if rng.random() < 0.25:
            lines += [f"/testbed/test/format-test.cc:{rng.randint(1, 999)}: Failure",
                      "Expected equality of these values:", '  "{}"', "    Which is: 1"]
            lines.append(f"[  FAILED  ] {name}{suffix} ({rng.randint(0, 99)} ms)")
            failed.append(name)
        else:
            lines.append(f"[       OK ] {name}{suffix} ({rng.randint(0, 99)} ms)")
    lines += ["[----------] 3 tests from format_test (12 ms total)", "",
              "[==========] 9 tests from 3 test suites ran. (40 ms total)",
              f"[  PASSED  ] {rng.randint(0, 9)} tests."]
    if failed:
        lines.append(f"[  FAILED  ] {len(failed)} tests, listed below:")
        lines += [f"[  FAILED  ] {n}" for n in failed]
        lines += ["", f" {len(failed)} FAILED TESTS"]
    if rng.random() < 0.3:
        lines += ["Test project /testbed/build",
                  "    Start 1: args-test", "1/2 Test #1: args-test ........................   Passed    0.01 sec",
                  "2/2 Test #2: format-test ......................***Failed    0.05 sec"]
    return "\n".join(lines)


GTEST_NEAR = [
    "[ OK ] x (1 ms)", "[OK] x (1 ms)", "[       OK ] x", "[       OK ] x ()", "[       OK ] (1 ms)",
    "[       OK ]  (1 ms)", "[       OK ] x(1 ms)", "[       OK ]x (1 ms)", "[  FAILED  ] x (1 ms)",
    "[  FAILED  ] x, where GetParam() = (1, 2) (3 ms)", "prefix [ OK ] x (1 ms)",
    "[ OK ] a [ OK ] b (1 ms)", "[ OK ] a (1) (2)", "[ OK ] a (1) b", "[ OK ] a (1)\r",
    "[\u3000OK\u3000] x (1 ms)", "[ OK ]\xa0x\xa0(1 ms)", "[ ok ] x (1 ms)", "[ FAILED ] x (ms",
    "[  PASSED  ] 9 tests.", "[  FAILED  ] 1 test, listed below:", "[ OK ] x (1 ms)\u2028",
    "\x1b[0;32m[       OK ] \x1b[mcolored (0 ms)", "[ OK ] dup (1 ms)", "[ FAILED ] dup (1 ms)",
]


def googletest_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        return big_line(rng, rng.choice(["[       OK ] ", "[  FAILED  ] ", "x [ OK ] "]),
                        rng.choice([" (1 ms)", "", " (", ")"]), alphabet="abc._/ ")
    log = googletest_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, GTEST_NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


# --- doctest XML --------------------------------------------------------------------------------

DOCTEST_CASES = ["Unicode (1/5)", "parser class", "element access 1", "value conversion",
                 "regression tests 1", "JSON pointers", "algorithms", "BSON", "CBOR",
                 "ünïcode & \"quotes\" <tags>", "iterators 1"]
DOCTEST_SUBCASES = ["\\uxxxx sequences", "correct sequences", "incorrect sequences",
                    "check that parse() throws", "issue #1234 - crash", "empty", "ünïcode é",
                    "a > b", "quotes \"'", "tab\tand newline\nin name"]


def xml_attr(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
            .replace("\t", "&#9;").replace("\n", "&#10;"))


def doctest_subcase(rng: random.Random, depth: int) -> list[str]:
    pad = "  " * (depth + 3)
    name = rng.choice(DOCTEST_SUBCASES)
    lines = [f'{pad}<SubCase name="{xml_attr(name)}" filename="/testbed/tests/src/unit.cpp"'
             f' line="{rng.randint(1, 999)}">']
    for _ in range(rng.randint(0, 2)):
        success = rng.choices(["true", "false", "True", "1"], [10, 3, 1, 1])[0]
        lines += [f'{pad}  <Expression success="{success}" type="CHECK"'
                  f' filename="/testbed/tests/src/unit.cpp" line="{rng.randint(1, 999)}">',
                  f"{pad}    <Original>", f"{pad}      j == json::parse(s)", f"{pad}    </Original>",
                  f"{pad}    <Expanded>", f"{pad}      {{}} == &quot;x&quot; &lt; y", f"{pad}    </Expanded>",
                  f"{pad}  </Expression>"]
    if depth < 2 and rng.random() < 0.3:
        lines += doctest_subcase(rng, depth + 1)
    lines.append(f"{pad}</SubCase>")
    return lines


def doctest_xml(rng: random.Random) -> str:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<doctest binary="/testbed/build/tests/test-unicode1" version="2.4.11">',
             '  <Options order_by="file" rand_seed="0" first="0" last="4294967295" abort_after="0"'
             ' subcase_filter_levels="2147483647" case_sensitive="false" no_throw="false"'
             ' no_skip="false"/>', "  <TestSuite>"]
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(DOCTEST_CASES)
        attrs = f'name="{xml_attr(name)}" ' if rng.random() < 0.95 else ""
        lines.append(f'    <TestCase {attrs}filename="/testbed/tests/src/unit.cpp" line="{rng.randint(1, 999)}">')
        for _ in range(rng.randint(0, 3)):
            lines += doctest_subcase(rng, 0)
        if rng.random() < 0.3:
            lines += ['      <Expression success="false" type="REQUIRE" filename="x" line="1">',
                      "        <Original>", "          a", "        </Original>", "      </Expression>"]
        lines += [f'      <OverallResultsAsserts successes="{rng.randint(0, 999)}" failures="0"'
                  ' test_case_success="true"/>', "    </TestCase>"]
    lines += ["  </TestSuite>", '  <OverallResultsAsserts successes="1" failures="0"/>',
              '  <OverallResultsTestCases successes="1" failures="0"/>', "</doctest>"]
    return "\n".join(lines)


def doctest_log(rng: random.Random) -> str:
    before = ["+ cd /testbed/build", "+ ./tests/test-unicode1 -s -r=xml",
              "[doctest] doctest version is \"2.4.11\""]
    after = ["+ echo done", "done"]
    if rng.random() < 0.2:
        after.insert(0, "</doctest>")  # a second end tag: only the first counts
    return "\n".join(before + [doctest_xml(rng)] + after)


# Pieces of XML put into a report in place of an element: what expat takes and what it refuses.
XML_SNIPPETS = [
    "<x/>", "<x></x>", "<x >text</x >", "<x a='1' b=\"2\"/>", "<x a = '1'/>", "<x a='1'b='2'/>",
    "<x a='1' a='2'/>", "<x a='&lt;&gt;&amp;&quot;&apos;'/>", "<x a='&#60;&#x3C;'/>", "<x a='&#0;'/>",
    "<x a='&#x110000;'/>", "<x a='&#xD800;'/>", "<x a='&#xFFFE;'/>", "<x a='&#9;&#10;&#13;'/>",
    "<x a='&nbsp;'/>", "<x a='&;'/>", "<x a='&#;'/>", "<x a='&#x;'/>", "<x a='&#12a;'/>",
    "<x a='<'/>", "<x a='>'/>", "<x a='&'/>", "<x a='\x01'/>", "<x a='\x7f\x85'/>",
    "<x a=1/>", "<x a/>", "<x =''/>", "<x a:b='1'/>", "<x xmlns:a='u' a:b='1'/>",
    "<x xmlns:a='u' xmlns:b='u' a:c='1' b:c='2'/>", "<x xmlns:a='u' a:c='1' c='2'/>",
    "<x xmlns='u'/>", "<x xmlns=''/>", "<x xmlns:a=''/>", "<x xmlns:xml='u'/>",
    "<x xmlns:xml='http://www.w3.org/XML/1998/namespace'/>", "<x xmlns:a='http://www.w3.org/XML/1998/namespace'/>",
    "<x xmlns:xmlns='u'/>", "<x xmlns:a='http://www.w3.org/2000/xmlns/'/>", "<x xmlns='a}b'/>",
    "<x xml:lang='en'/>", "<a:x/>", "<x:/>", "<:x/>", "<x:y:z/>", "<x xmlns:p='u'><p:y/></x>",
    "<p:y xmlns:p='u'></p:y>", "<p:y xmlns:p='u'></y>", "<x></y>", "<x>", "</x>", "<x/><y/>",
    "<!-- comment -->", "<!-- a -- b -->", "<!---->", "<!--->", "<!-- x --->", "<!--\x01-->",
    "<![CDATA[ <not> &markup; ]]>", "<![CDATA[", "]]>", "]]", "] ]>", "<!DOCTYPE x>", "<!ELEMENT x>",
    "<?pi data?>", "<?pi?>", "<?xml version='1.0'?>", "<?XML x?>", "<?xMl?>", "<?pi:x y?>",
    "<?pi", "<??>", "&lt;", "&unknown;", "&#65;", "&#x1F600;", "&#1114112;", "& ", "&#x",
    "\x00", "\x08", "\x0b", "\x1f", "\ufffe", "\uffff", "\ud7ff", "\ue000", "😀", "\x85",
    "\r\n", "\r", "<x\ta='1'\n/>", "<x a='1'\r/>", "<é/>", "<x é='1'/>", "<x-y.z_1/>", "<1x/>",
    "<-x/>", "<x\u00b7/>", "<\u0e01/>", "<\u3000/>", "<x\u0300/>", "<\U0001F600/>", "<x a=\"'\"/>",
    "<TestCase/>", "<TestCase name='loose'/>", "<TestCase name='n'><SubCase name='s'/></TestCase>",
    "<TestCase name='outer'><TestCase name='inner'><SubCase/></TestCase></TestCase>",
    "<TestCase xmlns='u' name='ns'><SubCase name='s'/></TestCase>",
    "<TestCase xmlns='' name='unns'><SubCase name='s'/></TestCase>",
    "<p:TestCase xmlns:p='u' name='p'><SubCase name='s'/></p:TestCase>",
    "<TestCase xmlns:p='u' p:name='pn'><SubCase name='s'/></TestCase>",
    "<TestCase name='e'><SubCase name='s'><Expression/></SubCase></TestCase>",
    "<TestCase name='e'><SubCase name='s'><Expression success='true'/><Expression success='false'/></SubCase></TestCase>",
    "<TestCase name='e'><SubCase name='s'><x><Expression success='0'/></x></SubCase></TestCase>",
    "<TestCase name='a&#10;b'><SubCase name='c&#9;d\te'/></TestCase>",
    "<TestCase name='dup'><SubCase name='s'/></TestCase><TestCase name='dup'><SubCase name='s'><Expression/></SubCase></TestCase>",
    "<doctest><TestCase name='nested doctest'><SubCase/></TestCase></doctest>",
]


def doctest_damaged(rng: random.Random) -> str:
    log = doctest_log(rng)
    roll = rng.random()
    if roll < 0.5:
        # An element's or attribute's place taken by a snippet.
        at = rng.choice([m for m in range(len(log)) if log.startswith("<", m) and
                         not log.startswith("</doctest", m) and not log.startswith("<doctest", m)]
                        or [len(log)])
        cut = log.find(">", at) + 1 if rng.random() < 0.5 and log.find(">", at) >= 0 else at
        snippet = "".join(rng.choice(XML_SNIPPETS) for _ in range(rng.randint(1, 2)))
        return log[:at] + snippet + log[cut:]
    if roll < 0.7:
        # Damage right inside the report.
        start = log.find("<doctest")
        pos = rng.randint(start, len(log))
        return log[:pos] + rng.choice(XML_SNIPPETS + [nasty_char(rng)]) + log[pos:]
    if roll < 0.8:
        return mutate(rng, log)
    if roll < 0.9:
        # Cut short, or its start and end tags moved about.
        return rng.choice([
            log[: rng.randint(0, len(log))],
            log.replace("</doctest>", ""),
            log.replace("<doctest ", "<doctestx "),
            log.replace("</doctest>", "</doctest >"),
            log.replace('<?xml version="1.0" encoding="UTF-8"?>', ""),
            "</doctest>" + log,
            "<doctest" + log,
            "x<doctest></doctest>", "<doctest", "<doctest>", "<doctest/>", "<doctest></doctest>",
            "<doctest/></doctest>", "12345678<doctest></doctest>", "é<doctest", "abc</doctest><doctest",
            "<doctest a='1'>\n</doctest> trailing", "<doctest><!-- c --></doctest><!-- after -->",
            "<doctest></doctest><?pi after?>", "<doctest></doctest> <x/>", "<doctest xmlns='u'></doctest>",
        ])
    return log.replace("\n", "\r\n") if rng.random() < 0.5 else log.replace(">", ">" + nasty_char(rng), 1)


def doctest_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.07:
        name = "n" * 120_000
        return (f'<doctest><TestSuite><TestCase name="{name}"><SubCase name="{name[:1000]}">'
                '<Expression success="true"/></SubCase></TestCase></TestSuite></doctest>')
    if roll < 0.45:
        return doctest_log(rng)
    return doctest_damaged(rng)


# --- the cases ----------------------------------------------------------------------------------


def case(parser: str, log: str, repo: str) -> dict:
    return {"parser": parser, "instance_id": "", "repo": repo, "version": "", "log": log}


def cases(rng: random.Random):
    for _ in range(250):
        yield case("parse_log_redis", redis_case(rng), rng.choice(["redis/redis", "valkey-io/valkey"]))
    for _ in range(200):
        yield case("parse_log_jq", jq_case(rng), "jqlang/jq")
    for _ in range(450):
        yield case("parse_log_doctest", doctest_case(rng), "nlohmann/json")
    for _ in range(200):
        yield case("parse_log_micropython_test", micropython_case(rng), "micropython/micropython")
    for _ in range(250):
        yield case("parse_log_googletest", googletest_case(rng), "fmtlib/fmt")
    # Each XML snippet alone inside a report, and every near miss given to every parser.
    for snippet in XML_SNIPPETS:
        yield case("parse_log_doctest", f"<doctest>{snippet}</doctest>", "nlohmann/json")
        yield case("parse_log_doctest",
                   f"<doctest><TestCase name='t'><SubCase name='s'>{snippet}</SubCase></TestCase></doctest>",
                   "nlohmann/json")
    near = "\n".join(REDIS_NEAR + JQ_NEAR + MP_NEAR + GTEST_NEAR)
    mixed = [redis_log(rng), jq_log(rng), micropython_log(rng), googletest_log(rng), doctest_log(rng)]
    for name in ["parse_log_redis", "parse_log_jq", "parse_log_doctest", "parse_log_micropython_test",
                 "parse_log_googletest"]:
        yield case(name, near, "")
        for log in mixed:
            yield case(name, log, "")
