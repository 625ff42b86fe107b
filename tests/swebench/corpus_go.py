"""Cases for the Go log parser: `go test -v` runs (subtests, skips, panics, several packages,
build failures), then damaged copies (the damage helpers are corpus_python.py's)."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_python import big_line, degenerate, mutate, sprinkle  # noqa: E402

PACKAGES = ["github.com/caddyserver/caddy/v2/modules/caddyhttp",
            "github.com/gin-gonic/gin", "github.com/gohugoio/hugo/hugolib",
            "github.com/prometheus/prometheus/promql", "github.com/hashicorp/terraform/internal/command"]
TESTS = ["TestServeHTTP", "TestContextRenderJSON", "TestParseDuration", "TestÜnïcode",
         "TestRouterGroup", "TestEngine_Handle", "Test_lowercase", "TestX"]
SUBTESTS = ["basic", "with_spaces_replaced", "#00", "nested/deeper", "ünïcode", "(parens)",
            "a:b", "trailing_", "1.5s", "--- FAIL: fake"]


def duration(rng: random.Random) -> str:
    return rng.choice([f"{rng.randint(0, 9)}.{rng.randint(0, 99):02d}s", "0.00s", "12.345s", "0s",
                       "1m2.5s"])


def gotest_log(rng: random.Random) -> str:
    lines = ["+ go test -v ./..."]
    for package in rng.sample(PACKAGES, k=rng.randint(0, 3)):
        failed = False
        for _ in range(rng.randint(0, 6)):
            test = rng.choice(TESTS)
            lines.append(f"=== RUN   {test}")
            subs = rng.sample(SUBTESTS, k=rng.randint(0, 3))
            results = []
            for sub in subs:
                lines.append(f"=== RUN   {test}/{sub}")
                if rng.random() < 0.2:
                    lines.append(f"=== PAUSE {test}/{sub}")
                    lines.append(f"=== CONT  {test}/{sub}")
                outcome = rng.choices(["PASS", "FAIL", "SKIP"], [8, 2, 1])[0]
                if outcome != "PASS":
                    lines.append(f"    {test.lower()}_test.go:{rng.randint(1, 400)}: expected 1, got 2")
                results.append(f"    --- {outcome}: {test}/{sub} ({duration(rng)})")
            outcome = rng.choices(["PASS", "FAIL", "SKIP"], [8, 2, 1])[0]
            if any("FAIL" in r for r in results):
                outcome = "FAIL"
            failed = failed or outcome == "FAIL"
            lines.append(f"--- {outcome}: {test} ({duration(rng)})")
            lines += results
        if rng.random() < 0.1:
            lines += ["panic: runtime error: invalid memory address or nil pointer dereference [recovered]",
                      "goroutine 7 [running]:", "testing.tRunner.func1.2({0x10, 0x20})"]
        lines.append("FAIL" if failed else "PASS")
        lines.append(f"{'FAIL' if failed else 'ok  '}\t{package}\t{rng.choice(['0.012s', '(cached)'])}")
    if rng.random() < 0.1:
        lines += ["# github.com/x/y [github.com/x/y.test]", "./y_test.go:3:2: undefined: foo",
                  "FAIL\tgithub.com/x/y [build failed]"]
    return "\n".join(lines)


NEAR = [
    "--- PASS: TestA (0.00s)", "--- PASS: TestA (0.00s) ", "--- PASS:TestA (0.00s)",
    "---  PASS: TestA (0.00s)", "--- PASS: TestA(0.00s)", "--- PASS: TestA ()", "--- PASS: TestA ( )",
    "--- PASS:  (0.00s)", "--- PASS: (0.00s)", "--- PASS: TestA (0.00s) (1.00s)", "--- PASS: A B (1s)",
    "--- pass: TestA (0.00s)", "--- PASSED: TestA (0.00s)", "--- FAIL: TestA (0.00s)\r",
    "    --- FAIL: TestA/sub (0.00s)", "\t--- SKIP: TestA (0s)", "--- SKIP: TestA (0s)x",
    "--- PASS: TestA\xa0(0.00s)", "--- PASS: TestA (0.00s)\u2028", "--- PASS: Test\x00A (0s)",
    "--- PASS: \x1b[32mTestA\x1b[0m (0s)", "\x1b[32m--- PASS: TestA (0s)\x1b[0m", "--- PASS: TestA (\n)",
    "=== RUN   TestA", "--- BENCH: BenchmarkA", "--- PASS: dup (0s)", "--- FAIL: dup (0s)",
    "--- PASS: ünïcode (0s)", "--- PASS: a (b) (c)", "--- PASS: a ((0s))", "--- PASS: ) (",
]


def gotest_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        # Spaces and parentheses only in a shorter one: the pattern backtracks over the line
        # once per " (" (quadratic in Python too).
        if rng.random() < 0.3:
            return big_line(rng, "--- PASS: ", " (0.00s)", size=3000, alphabet="TestAb_/ ()")
        return big_line(rng, rng.choice(["--- PASS: ", "    --- FAIL: ", "--- SKIP: T"]),
                        rng.choice([" (0.00s)", "", " (", " (x) y"]), alphabet="TestAb_/")
    log = gotest_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


def cases(rng: random.Random):
    repos = ["caddyserver/caddy", "hashicorp/terraform", "prometheus/prometheus", "gohugoio/hugo",
             "gin-gonic/gin"]
    for _ in range(400):
        yield {"parser": "parse_log_gotest", "instance_id": "", "repo": rng.choice(repos),
               "version": "", "log": gotest_case(rng)}
    yield {"parser": "parse_log_gotest", "instance_id": "", "repo": "", "version": "",
           "log": "\n".join(NEAR)}
    yield {"parser": "parse_log_gotest", "instance_id": "", "repo": "", "version": "",
           "log": "--- PASS: " + "x" * 1_000_000 + " (0.00s)"}
