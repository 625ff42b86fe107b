"""Cases for the Java log parsers (maven, ant, gradle_custom): logs in the shapes the tools print
under swebench's eval scripts, then the same logs damaged in every way a log can be.

The damage helpers (nasty_char, mutate, hostile, big_line) are shared with corpus_php.py and
corpus_ruby.py.
"""

import random

# Characters where naive text handling parts from Python's: Unicode whitespace (str.strip and \s
# take them), line breaks that str.split("\n") keeps, controls, NUL, escapes, non-ASCII letters
# and digits, a BOM, a replacement character and astral code points.
NASTY = [
    "\u00a0", "\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x1f", "\x0b", "\x0c",
    "\r", "\t", "\x00", "\x07", "\x7f", "\x1b[31m", "\x1b[0m", "\x1b[1;32m", "\u3000", "\u1680",
    "\u200b", "\ufeff", "\ufffd", "é", "ß", "İ", "Σ", "中", "😀", "٣", "\U0001d7d8", " ", "\n",
]

# Letters for long text that no parser backtracks over quadratically (no spaces or dots).
LONG_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_éß中😀"


def nasty_char(rng: random.Random) -> str:
    return rng.choice(NASTY)


def big_line(rng: random.Random, size: int = 100_000) -> str:
    """A line of about size characters without runs that make regexes backtrack for long."""
    return "".join(rng.choices(LONG_ALPHABET, k=size))


def mutate(rng: random.Random, log: str, edits: int | None = None) -> str:
    """The log with a few random line edits: characters inserted, deleted or swapped, lines
    duplicated, dropped, joined, cut, reordered or recoded."""
    lines = log.split("\n")
    for _ in range(edits if edits is not None else rng.randint(1, 6)):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        line = lines[i]
        at = rng.randint(0, len(line))
        op = rng.randrange(12)
        if op == 0:
            lines[i] = line[:at] + nasty_char(rng) + line[at:]
        elif op == 1:
            lines[i] = line[:at] + line[at + 1:]
        elif op == 2:
            lines.insert(i, line)
        elif op == 3 and len(lines) > 1:
            del lines[i]
        elif op == 4 and i + 1 < len(lines):
            lines[i:i + 2] = [line + rng.choice(["", " ", "\r", "\t"]) + lines[i + 1]]
        elif op == 5:
            lines[i] = line[:at]
        elif op == 6:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 7:
            lines[i] = line.replace(" ", rng.choice(["\u00a0", "\t", "  ", "\u2028", "\x1f"]))
        elif op == 8:
            lines[i] = rng.choice(["", "   ", "\r", "\x1b[2K\r"]) + line + rng.choice(
                ["", "\r", " ", "\x1b[0m", "\u00a0", "\x85"])
        elif op == 9:
            lines[i] = line.upper() if rng.random() < 0.5 else line.lower()
        elif op == 10:
            lines[i] = line[:at] + line[at:at + 3] * rng.randint(2, 4) + line[at + 3:]
        else:
            lines.insert(i, "".join(rng.choice(NASTY) for _ in range(rng.randint(1, 8))))
    return "\n".join(lines)


def hostile(rng: random.Random, log: str) -> list[str]:
    """Damaged copies of one log: line endings, truncation, escapes, NULs, huge lines, noise."""
    cut = rng.randint(0, len(log))
    return [
        log.replace("\n", "\r\n"),
        log.replace("\n", "\r"),
        log[:cut],
        log[cut:],
        "\x1b[0m" + log.replace("\n", "\x1b[0m\n\x1b[32m"),
        log.replace(" ", "\x00", 3),
        log.replace("\n", "\u2028"),
        log.replace("\n", "\n\x85", 5),
        big_line(rng) + "\n" + log + "\n" + big_line(rng, 20_000),
        mutate(rng, log),
        mutate(rng, log),
        mutate(rng, log, 20),
    ]


def degenerate() -> list[str]:
    """Logs with no content to speak of."""
    return ["", "\n", "\n\n\n", "\r\n", " ", "\x00", "\ufeff", "\u2028\u2029\x85",
            "\x1c\x1d\x1e\x1f"]


# --- maven ---------------------------------------------------------------------------------------

PACKAGES = [
    "com.google.gson.functional", "com.google.gson.internal.bind", "org.apache.druid.query",
    "com.github.javaparser.ast.expr", "com.github.javaparser.printer",
    "org.apache.druid.sql.calcite",
]
CLASSES = ["JsonParserTest", "ReflectionAccessTest", "ExpressionTest", "PrettyPrinterTest",
           "CalciteQueryTest", "ÜmlautTest", "Test$Inner", "测试类"]
METHODS = ["testParse", "testNullSafe", "testDefaultValue", "testRecordWithComponents",
           "testGroupBy[1]", "testEscaping_ü", "should handle unicode", "test$1", "testÜber"]


def java_test(rng: random.Random) -> str:
    name = f"{rng.choice(PACKAGES)}.{rng.choice(CLASSES)}"
    if rng.random() < 0.8:
        name += f"#{rng.choice(METHODS).replace(' ', '_')}"
    return name


def maven_block(rng: random.Random, test: str, success: bool, color: bool = False) -> list[str]:
    module = rng.choice(["gson", "processing", "javaparser-core-testing", "sql"])
    command = rng.choice([
        f"+ mvn test -B -T 1C -pl {module} -Dtest={test} -Dsurefire.failIfNoSpecifiedTests=false",
        f"+ mvn -q test -Dtest={test}",
        f"+ ./mvnw -Drat.skip=true -Dtest={test} -DfailIfNoTests=false test",
        f"++ mvn test -Dtest={test} -Dmaven.javadoc.skip=true -Dcheckstyle.skip",
    ])
    klass = test.split("#")[0]
    result = "SUCCESS" if success else "FAILURE"
    build = f"\x1b[1;32mBUILD {result}\x1b[m" if color else f"BUILD {result}"
    lines = [
        command,
        "[INFO] Scanning for projects...",
        "[INFO] ",
        f"[INFO] ------------------------< com.google.code.gson:{module} >------------------------",
        "[INFO] Building Gson 2.11.0-SNAPSHOT",
        "[INFO] --------------------------------[ jar ]---------------------------------",
        "[INFO] -------------------------------------------------------",
        "[INFO]  T E S T S",
        "[INFO] -------------------------------------------------------",
        f"[INFO] Running {klass}",
    ]
    if success:
        lines.append(f"[INFO] Tests run: 1, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: "
                     f"0.0{rng.randint(10, 99)} s - in {klass}")
    else:
        lines += [
            f"[ERROR] Tests run: 1, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.1 s"
            f" <<< FAILURE! - in {klass}",
            f"[ERROR] {test}  Time elapsed: 0.05 s  <<< FAILURE!",
            "org.opentest4j.AssertionFailedError: expected: <1> but was: <2>",
            "\tat org.junit.jupiter.api.AssertionUtils.fail(AssertionUtils.java:55)",
        ]
    lines += [
        "[INFO] ",
        "[INFO] Results:",
        "[INFO] ",
        "[INFO] ------------------------------------------------------------------------",
        f"[INFO] {build}",
        "[INFO] ------------------------------------------------------------------------",
        f"[INFO] Total time:  {rng.randint(1, 40)}.{rng.randint(100, 999)} s",
        "[INFO] Finished at: 2024-05-01T12:00:00Z",
    ]
    if not success:
        lines.append("[ERROR] Failed to execute goal org.apache.maven.plugins:"
                     "maven-surefire-plugin:3.2.5:test (default-test) on project gson")
    return lines


def maven_log(rng: random.Random) -> str:
    lines = ["+ cd /testbed", "+ git checkout abc123 -- src/test/java"]
    for _ in range(rng.randint(0, 6)):
        lines += maven_block(rng, java_test(rng), rng.random() < 0.7, rng.random() < 0.2)
    return "\n".join(lines) + rng.choice(["\n", "", "\n\n"])


def maven_interleaved(rng: random.Random) -> str:
    """Commands and BUILD lines out of step, as concurrent tracing and maven output leave them."""
    tests = [java_test(rng) for _ in range(rng.randint(1, 6))]
    events = [f"+ mvn test -Dtest={t}" for t in tests]
    events += [f"[INFO] BUILD {rng.choice(['SUCCESS', 'FAILURE'])}"
               for _ in range(rng.randint(0, len(tests) + 2))]
    rng.shuffle(events)
    return "\n".join(events)


def maven_cases(rng: random.Random):
    near = [
        "+ mvn test -Dtest=Foo#bar\n[INFO] BUILD SUCCESSFUL",
        "+ mvn test -Dtest=Foo#bar\nBUILD SUCCESS ",
        "+ mvn test -Dtest=Foo#bar\n[INFO] BUILD SUCCESS\x1b[m",
        "+ mvn test -Dtest=\n[INFO] BUILD SUCCESS",
        "+ mvn test -Dtest= Foo\n[INFO] BUILD FAILURE",
        "+ mvn -Dtest=A -Dtest=B test\n[INFO] BUILD SUCCESS",
        "+ mvn -Dtest=A -Dtest= test\n[INFO] BUILD FAILURE",
        "+ mvn -Dtest=A\u00a0-Dtest=B\nBUILD\u00a0SUCCESS",
        "+ mvn -Dtest=A\u2028B\nBUILD SUCCESS",
        "+ mvn -Dtest=X BUILD SUCCESS",
        "-Dtest=X BUILD FAILURE\n-Dtest=Y\n-Dtest=Z\nBUILD SUCCESS",
        "BUILD SUCCESS\nBUILD FAILURE\n-Dtest=late1\n-Dtest=late2\n-Dtest=late3",
        "-Dtest=a\n-Dtest=a\nBUILD FAILURE\nBUILD SUCCESS",
        "-Dtest=a\nBUILD FAILURE\n-Dtest=a\nBUILD SUCCESS\n-Dtest=b\nbuild success",
        "-DTEST=a\nBUILD SUCCESS",
        "\t-Dtest=tabbed\t\n\tBUILD FAILURE\t",
        "-Dtest=crlf\r\nBUILD SUCCESS\r\n",
        "-Dtest=é中😀\nBUILD SUCCESS",
        "-Dtest=\x00nul\x00\nBUILD SUCCESS",
        "-Dtest=a\x1cb\nBUILD SUCCESS",
        "-Dtest=a\x85b\nBUILD FAILURE",
        "[INFO] BUILD FAILURE\n[INFO] BUILD SUCCESS\n+ mvn -Dtest=T1\n+ mvn -Dtest=T2",
        "+ mvn -Dtest=" + "x" * 120_000 + "\nBUILD SUCCESS",
    ]
    for log in near:
        yield log
    for _ in range(14):
        yield maven_log(rng)
    for _ in range(10):
        yield maven_interleaved(rng)
    for _ in range(2):
        yield from hostile(rng, maven_log(rng))
    yield from degenerate()


# --- ant -----------------------------------------------------------------------------------------

def ant_log(rng: random.Random) -> str:
    lines = [
        "+ ant -Dtests.quiet=true test",
        "Buildfile: /testbed/buildScripts/build.xml",
        "",
        "test:",
        "    [junit] Running lombok.TestJavac",
        "    [junit] Testsuite: lombok.TestJavac",
    ]
    for _ in range(rng.randint(0, 12)):
        status = rng.choices(["PASS", "FAIL", "ERR", "SKIP"], [6, 2, 1, 1])[0]
        file = rng.choice(["Accessors", "Builder", "SuperBuilder", "ValPlain", "Jacksonized",
                           "Ünïcode", "With Space"])
        lines.append(f"    [junit] [{status}] {file}.java(lombok.TestJavac)")
        if status in ("FAIL", "ERR"):
            lines.append("    [junit] junit.framework.ComparisonFailure: expected:<[a]>"
                         " but was:<[b]>")
    lines += [
        f"    [junit] Tests run: 12, Failures: 2, Errors: 1, Skipped: 0, Time elapsed: 3.2 sec",
        "",
        "BUILD FAILED" if rng.random() < 0.5 else "BUILD SUCCESSFUL",
        "Total time: 1 minute 2 seconds",
    ]
    return "\n".join(lines)


def ant_cases(rng: random.Random):
    near = [
        "[junit] [PASS] a\n[junit] [FAIL] a",
        "[junit] [PASS]",
        "[junit] [PASS] ",
        "[junit] [PASS]\ta\tb\t",
        "[junit][PASS] a",
        "[junit]  [ERR]   spaced name  ",
        "  [junit]\u00a0[PASS]\u00a0nbsp",
        "[junit] [PASS]\u2028line separator",
        "[junit] [PASS] cr\r",
        "[JUNIT] [PASS] upper",
        "[junit] [pass] lower",
        "[junit] [PASSED] long",
        "[junit] [ERROR] long",
        "x [junit] [PASS] prefixed",
        "[junit] [FAIL] é中😀 \x00 nul",
        "[junit] [PASS] a\x1fb",
        "[junit] [PASS] \x1b[32mcolored\x1b[0m",
        "[junit] [PASS] " + "n" * 110_000,
        "[junit] [FAIL] dup\n[junit] [PASS] other\n[junit] [PASS] dup",
    ]
    for log in near:
        yield log
    for _ in range(14):
        yield ant_log(rng)
    for _ in range(2):
        yield from hostile(rng, ant_log(rng))
    yield from degenerate()


# --- gradle --------------------------------------------------------------------------------------

GRADLE_CLASSES = ["org.apache.lucene.index.TestIndexWriter",
                  "org.apache.lucene.search.TestBoolean2", "io.reactivex.rxjava3.core.FlowableTest",
                  "io.reactivex.rxjava3.internal.Ünï", "TestDefaultPackage",
                  "org.apache.lucene.util.Test测试"]
GRADLE_METHODS = ["testBasic", "testRandom", "testNPE[1]", "testWith Space", "test[param=1, b]",
                  "testÜnicode", "testEmpty()", "test > nested"]


def gradle_log(rng: random.Random) -> str:
    lines = ["+ ./gradlew test --tests org.apache.lucene.index.TestIndexWriter -Ptests.seed=1",
             "> Configure project :", "> Task :lucene:core:compileJava UP-TO-DATE",
             "> Task :lucene:core:test"]
    for _ in range(rng.randint(0, 12)):
        name = f"{rng.choice(GRADLE_CLASSES)} > {rng.choice(GRADLE_METHODS)}"
        status = rng.choices(["PASSED", "FAILED", "SKIPPED"], [6, 2, 1])[0]
        shape = rng.randrange(5)
        if shape == 0:  # the status on a line of its own, after interleaved warnings
            lines += [name, "WARNING: A terminally deprecated method in java.lang.System has been"
                      " called", "WARNING: System::setSecurityManager will be removed", status]
        elif shape == 1:
            lines += [name, status]
        elif shape == 2:
            lines.append(f"{name}{rng.choice(['  ', chr(9), ' ' * 5])}{status}")
        else:
            lines.append(f"{name} {status}")
        if status == "FAILED":
            lines += ["    java.lang.AssertionError: expected:<1> but was:<2>",
                      "        at org.junit.Assert.fail(Assert.java:89)"]
    lines += ["", f"{rng.randint(1, 300)} tests completed, {rng.randint(0, 5)} failed",
              "> Task :lucene:core:test FAILED", "BUILD FAILED in 1m 3s"]
    return "\n".join(lines)


def gradle_cases(rng: random.Random):
    near = [
        "> Task :test PASSED",
        ">a > b PASSED",
        "a > b PASSED",
        "a PASSED",
        " PASSED",
        "PASSED",
        "x PASSED",
        "xy PASSED",
        "a > b\nPASSED",
        "a > b\nWARNING: x\nwarning\nFAILED",
        "a > b\n\nPASSED\nFAILED",
        "a > b\nc > d\nFAILED",
        "a > b\nx PASSED\nPASSED",
        "a > b c\nPASSED",
        "a>b\nPASSED",
        ">a > b\nPASSED",
        "a > b\nPASSED ",
        "a > b\n PASSED\u00a0",
        "a > b\npassed",
        "a > b\nSKIPPED\nPASSED",
        "a\u00a0>\u00a0b\nFAILED",
        "a\u2028> b\nPASSED",
        "a > b\u0085\nPASSED",
        "a > b PASSED\r",
        "a > b\r\nPASSED\r\n",
        "é > 中\nPASSED",
        "a > b\x00\nPASSED",
        "a > b  \t PASSED",
        "a > b\tFAILED",
        "a > bPASSED",
        "a > b PASSEDX",
        "a > b PASSED\nPASSED",
        "Test > m FAILED\nTest > m PASSED\nOther > m PASSED",
        "a > " + "b" * 100_000 + " PASSED",
        "a > " + "b" * 100_000 + "\nFAILED",
        "\x1c a > b \x1d\nPASSED",
    ]
    for log in near:
        yield log
    for _ in range(14):
        yield gradle_log(rng)
    for _ in range(2):
        yield from hostile(rng, gradle_log(rng))
    yield from degenerate()


def cases(rng: random.Random):
    for parser, generate, instance_id, repo in (
        ("parse_log_maven", maven_cases, "google__gson-2479", "google/gson"),
        ("parse_log_ant", ant_cases, "projectlombok__lombok-3602", "projectlombok/lombok"),
        ("parse_log_gradle_custom", gradle_cases, "apache__lucene-12196", "apache/lucene"),
    ):
        for log in generate(rng):
            yield {"parser": parser, "log": log, "instance_id": instance_id, "repo": repo,
                   "version": rng.choice(["", "0.1", "2.10"])}
