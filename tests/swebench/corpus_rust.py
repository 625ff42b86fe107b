"""Cases for the Rust log parser: `cargo test` runs (unit, integration and doc tests, ignored and
failed tests, interleaved output, the failures section), then damaged copies (the damage helpers
are corpus_python.py's)."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_python import big_line, degenerate, mutate, sprinkle  # noqa: E402

TESTS = ["tests::it_works", "searcher::tests::binary_detection", "printer::standard::tests::max_columns",
         "flags::defs::test_context", "io::stdio::ünïcode", "bytes::tests::test_λ", "r#type::raw_ident",
         "lib::tests::case_1", "misc::compressed_gzip", "regression::r1159_invalid_flag"]
OUTCOMES = ["ok", "FAILED", "ignored", "ignored, requires network", "bench:  123 ns/iter (+/- 4)"]


def cargo_log(rng: random.Random) -> str:
    lines = ["   Compiling ripgrep v14.1.0 (/testbed)",
             "    Finished test [unoptimized + debuginfo] target(s) in 12.34s"]
    failed = []
    for target in rng.sample(["src/lib.rs", "src/main.rs", "tests/integration.rs"], k=rng.randint(0, 3)):
        tests = rng.sample(TESTS, k=rng.randint(0, 6))
        lines += [f"     Running unittests {target} (target/debug/deps/rg-0123456789abcdef)", "",
                  f"running {len(tests)} tests"]
        for t in tests:
            outcome = rng.choices(OUTCOMES, [12, 2, 2, 1, 1])[0]
            if rng.random() < 0.1:
                # Another thread's output lands on the test's line.
                lines.append(f"test {t} ... thread 'x' panicked at src/lib.rs:1:1:")
                lines.append(outcome)
            else:
                lines.append(f"test {t} ... {outcome}")
            if outcome == "FAILED":
                failed.append(t)
        lines.append("")
        if failed:
            lines += ["failures:", ""]
            for t in failed:
                lines += [f"---- {t} stdout ----", f"thread '{t}' panicked at src/lib.rs:10:9:",
                          "assertion `left == right` failed", "  left: 1", " right: 2", ""]
            lines += ["failures:"] + [f"    {t}" for t in failed] + [""]
        lines.append(f"test result: {'FAILED' if failed else 'ok'}. {len(tests)} passed;"
                     f" {len(failed)} failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s")
        lines.append("")
    if rng.random() < 0.4:
        lines += ["   Doc-tests rg", "", "running 2 tests",
                  "test src/lib.rs - Searcher (line 10) ... ok",
                  "test src/lib.rs - printer::Standard::new (line 42) ... FAILED",
                  "test src/lib.rs - x (line 1) ... ignored", ""]
    return "\n".join(lines)


NEAR = [
    "test a ... ok", "test a ... ok ", "test  a  ...  ok", "test\ta\t...\tok", "test a ...ok",
    "test a... ok", "test a .. ok", "test a ... ", "test a ...", "test ... ok", "test a b ... ok",
    "test a ... FAILED", "test a ... failed", "test a ... ignored", "test a ... ok!", "test a ... ok ok",
    " test a ... ok", "tests a ... ok", "test a ... ok\r", "test a\xa0...\xa0ok", "test a ... ok\u2028",
    "test a ... \x1b[32mok\x1b[0m", "\x1b[32mtest a ... ok", "test ünïcode ... ok", "test a ... ünïcode",
    "test a ... ok_2", "test a ... \u0663", "test a::b::c ... FAILED", "test a ... FAILED\x00",
    "test dup ... ok", "test dup ... FAILED", "test result: ok. 1 passed", "test a ... ok\ntest b ... FAILED",
]


def cargo_case(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return degenerate(rng)
    if roll < 0.08:
        return big_line(rng, rng.choice(["test ", "test a ... ", "test x::"]),
                        rng.choice([" ... ok", " ... FAILED", "", " ... "]), alphabet="abc_:")
    log = cargo_log(rng)
    if rng.random() < 0.5:
        log = sprinkle(rng, log, NEAR)
    if rng.random() < 0.4:
        log = mutate(rng, log)
    return log


def cases(rng: random.Random):
    repos = ["burntsushi/ripgrep", "sharkdp/bat", "astral-sh/ruff", "tokio-rs/tokio",
             "uutils/coreutils", "nushell/nushell", "tokio-rs/axum"]
    for _ in range(400):
        yield {"parser": "parse_log_cargo", "instance_id": "", "repo": rng.choice(repos),
               "version": "", "log": cargo_case(rng)}
    yield {"parser": "parse_log_cargo", "instance_id": "", "repo": "", "version": "",
           "log": "\n".join(NEAR)}
    yield {"parser": "parse_log_cargo", "instance_id": "", "repo": "", "version": "",
           "log": "test " + "x" * 1_000_000 + " ... ok"}
