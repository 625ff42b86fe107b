#!/usr/bin/env python3
"""`rex eval` from the outside, with local deployments: results and artifacts, the progress
output (plain lines, and the bar in a pseudo-terminal), resuming, a SIGKILL in the middle of a
run, SIGINT, and bad instances files.

Usage: test_eval.py PATH/TO/rex [unittest arguments]

Every process wait and pty read is bounded, so a hang fails instead of blocking.
"""

import faulthandler
import json
import os
import pty
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cli import marked_processes, wait_until  # noqa: E402

REX = ""
RUN_TIMEOUT = 60.0  # any one rex invocation
USAGE = 2


def read_results(out_dir):
    """The records of DIR/results.jsonl, in file order; fails on a line that is not JSON."""
    path = os.path.join(out_dir, "results.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        text = f.read()
    assert text == "" or text.endswith("\n"), f"results.jsonl ends inside a line: {text[-200:]!r}"
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write_instances(path, instances):
    with open(path, "w") as f:
        for instance in instances:
            f.write((json.dumps(instance) if isinstance(instance, dict) else instance) + "\n")


class EvalTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rex-eval-")
        self.dir = self.tmp.name
        self.out = os.path.join(self.dir, "out")
        self.instances = os.path.join(self.dir, "instances.jsonl")
        self.env = dict(os.environ, HOME=self.dir, TERM="xterm")
        self.env.pop("DOCKER_HOST", None)

    def tearDown(self):
        self.tmp.cleanup()

    def rex_eval(self, *args, timeout=RUN_TIMEOUT):
        p = subprocess.run([REX, "eval", self.instances, "--output", self.out, *args],
                           capture_output=True, env=self.env, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def start_eval(self, *args):
        return subprocess.Popen([REX, "eval", self.instances, "--output", self.out, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)


class RunTest(EvalTestCase):
    """One evaluation of 34 instances with every kind of outcome."""

    def make_instances(self):
        data = os.path.join(self.dir, "data")
        os.makedirs(os.path.join(data, "tree", "sub"))
        with open(os.path.join(data, "input.txt"), "w") as f:
            f.write("uploaded text\n")
        with open(os.path.join(data, "tree", "sub", "deep.txt"), "w") as f:
            f.write("deep\n")
        instances = []
        for i in range(30):
            instances.append({
                "id": f"ok-{i:02}",
                "upload": [{"source": "data/input.txt", "target": "in/input.txt"}],
                "setup": ["mkdir -p build", "cd build", f"export NUMBER={i}"],
                "run": "cat ../in/input.txt > copy.txt\necho \"n=$NUMBER in $(basename $PWD)\"",
                "artifacts": ["build/copy.txt"],
            })
        instances.append({"id": "fails", "run": "echo about to fail; exit 3"})
        instances.append({"id": "times-out", "run": "echo started; sleep 30", "timeout": 0.5})
        instances.append({"id": "setup-fails", "setup": ["true", "ls /no/such/dir"],
                          "run": "echo never"})
        instances.append({"id": "tree", "upload": [{"source": "data/tree", "target": "t"}],
                          "run": "cat t/sub/deep.txt; echo big > big.txt; seq 1 20000",
                          "artifacts": ["t/sub", "big.txt", "/no/such/artifact"]})
        write_instances(self.instances, instances)
        return instances

    def test_results_artifacts_output_and_resume(self):
        instances = self.make_instances()
        started = time.monotonic()
        status, out, err = self.rex_eval("--parallel", "8")
        self.assertLess(time.monotonic() - started, 30)
        # No instance's result is an error except setup-fails: exit status 1.
        self.assertEqual(status, 1, out + err)
        results = read_results(self.out)
        by_id = {r["id"]: r for r in results}
        self.assertEqual(len(results), len(instances))
        self.assertEqual(set(by_id), {i["id"] for i in instances})

        ok = by_id["ok-07"]
        self.assertEqual(ok["status"], "passed")
        self.assertEqual(ok["exit_code"], 0)
        self.assertEqual(ok["setup_exit_codes"], [0, 0, 0])
        self.assertIsNone(ok["error"])
        self.assertEqual(ok["output"], "n=7 in build\n")  # cd and export of setup carried over
        self.assertFalse(ok["output_truncated"])
        self.assertEqual(ok["artifacts"], [{"path": "build/copy.txt",
                                            "saved": "artifacts/ok-07/copy.txt"}])
        with open(os.path.join(self.out, "artifacts", "ok-07", "copy.txt")) as f:
            self.assertEqual(f.read(), "uploaded text\n")
        with open(os.path.join(self.out, "artifacts", "ok-07", "setup.log")) as f:
            self.assertEqual(f.read(), "$ mkdir -p build\n[exit 0]\n$ cd build\n[exit 0]\n"
                                       "$ export NUMBER=7\n[exit 0]\n")
        for phase in ("start", "setup", "run", "teardown"):
            self.assertGreaterEqual(ok["times"][phase], 0)
        self.assertRegex(ok["started"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertLessEqual(ok["started"], ok["finished"])

        fails = by_id["fails"]
        self.assertEqual((fails["status"], fails["exit_code"]), ("failed", 3))
        self.assertEqual(fails["output"], "about to fail\n")

        late = by_id["times-out"]
        self.assertEqual(late["status"], "timeout")
        self.assertIsNone(late["exit_code"])
        self.assertIsNone(late["error"])
        self.assertLess(late["times"]["run"], 10)
        with open(os.path.join(self.out, "artifacts", "times-out", "run.log")) as f:
            self.assertIn("started", f.read())

        setup = by_id["setup-fails"]
        self.assertEqual(setup["status"], "error")
        self.assertEqual(setup["setup_exit_codes"], [0, 2])
        self.assertEqual(setup["error"]["phase"], "setup")
        self.assertEqual(setup["error"]["type"], "SetupCommandFailed")
        self.assertIn("setup command 2 of 2 exited with 2: ls /no/such/dir", setup["error"]["message"])
        self.assertIsNone(setup["times"]["run"])
        self.assertFalse(os.path.exists(os.path.join(self.out, "artifacts", "setup-fails", "run.log")))

        tree = by_id["tree"]
        self.assertEqual(tree["status"], "passed")
        self.assertTrue(tree["output_truncated"])
        self.assertEqual(len(tree["output"].encode()), 16 * 1024)
        self.assertTrue(tree["output"].endswith("19999\n20000\n"))
        with open(os.path.join(self.out, "artifacts", "tree", "run.log")) as f:
            full = f.read()
        self.assertTrue(full.startswith("deep\n1\n2\n"), full[:40])
        self.assertTrue(full.endswith("\n20000\n"))
        saved = {a["path"]: a for a in tree["artifacts"]}
        self.assertEqual(saved["t/sub"]["saved"], "artifacts/tree/sub")
        self.assertTrue(os.path.isfile(os.path.join(self.out, "artifacts", "tree", "sub", "deep.txt")))
        self.assertEqual(saved["big.txt"]["saved"], "artifacts/tree/big.txt")
        self.assertIsNone(saved["/no/such/artifact"]["saved"])
        self.assertIn("No such file", saved["/no/such/artifact"]["error"])

        # Working directories are removed once their instance is recorded.
        self.assertEqual(os.listdir(os.path.join(self.out, "work")), [])

        # Non-terminal progress: one line per finished instance, then the summary on stdout.
        lines = [l for l in err.splitlines() if l.startswith("[")]
        self.assertEqual(len(lines), len(instances), err)
        self.assertRegex(lines[0], r"^\[1/34\] \S+ \S+")
        self.assertRegex(err, r"\[\d+/34\] fails failed \(exit 3\) \d")
        self.assertRegex(err, r"\[\d+/34\] times-out timeout \d")
        self.assertRegex(err, r"\[\d+/34\] setup-fails error \(setup: setup command 2 of 2")
        self.assertIn("rex eval: 34 instances to run on local, 8 at once", err)
        self.assertIn("34 instances finished in", out)
        self.assertRegex(out, r"passed +31 +31\n")
        self.assertRegex(out, r"failed +1 +1\n")
        self.assertRegex(out, r"timeout +1 +1\n")
        self.assertRegex(out, r"error +1 +1\n")
        for phase in ("start", "setup", "run", "teardown"):
            self.assertRegex(out, rf"\n  {phase} +\S+ +\S+ +\S+\n")
        self.assertIn("results.jsonl (34 of 34 instances)", out)

        # A rerun finds everything done: nothing runs, nothing is appended.
        results_path = os.path.join(self.out, "results.jsonl")
        with open(results_path) as f:
            before = f.read()
        status, out, err = self.rex_eval("--parallel", "8")
        self.assertEqual(status, 1, out + err)  # setup-fails is still an error
        self.assertIn("skipping 34 instances already done", err)
        self.assertIn("0 instances finished", out)
        with open(results_path) as f:
            self.assertEqual(f.read(), before)

        # --retry-errors runs the error again, and only it; its old record goes.
        status, out, err = self.rex_eval("--retry-errors")
        self.assertEqual(status, 1, out + err)
        self.assertIn("running 1 instance again whose result was an error", err)
        self.assertIn("skipping 33 instances already done", err)
        results = read_results(self.out)
        self.assertEqual(len(results), len(instances))
        self.assertEqual(results[-1]["id"], "setup-fails")


class ProgressBarTest(EvalTestCase):
    def test_bar_in_a_terminal(self):
        write_instances(self.instances,
                        [{"id": f"i{n}", "run": f"sleep 0.{n % 4 + 1}"} for n in range(12)] +
                        [{"id": "bad", "run": "exit 1"}])
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(REX, [REX, "eval", self.instances, "--output", self.out, "-j", "4"],
                          self.env)
            finally:
                os._exit(127)
        data = b""
        deadline = time.monotonic() + RUN_TIMEOUT
        try:
            while time.monotonic() < deadline:
                ready = select.select([fd], [], [], 1)[0]
                if not ready:
                    continue
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
            _, wait_status = os.waitpid(pid, 0)
        finally:
            os.close(fd)
        text = data.decode(errors="replace")
        self.assertEqual(os.waitstatus_to_exitcode(wait_status), 0, text)
        # Redrawn in place: carriage return, erase line, the bar and its counters.
        self.assertIn("\r\x1b[K[", text)
        self.assertRegex(text, r"\] 13/13  failed 1  running 0  [\d.]+/s  ETA")
        self.assertRegex(text, r"\] \d+/13  failed \d  running [1-4]  ")
        self.assertIn("bad failed (exit 1)", text)  # not-passed instances get their own line
        self.assertNotRegex(text, r"\[\d+/13\] i\d")  # no per-instance lines for passed ones
        self.assertIn("13 instances finished in", text)


class InterruptTest(EvalTestCase):
    def slow_instances(self, count, go):
        # Each finishes at once when `go` exists, and runs 30 s otherwise.
        return [{"id": f"s{n:02}", "run": f"if [ -e {go} ]; then echo fast; else sleep 30; fi"}
                for n in range(count)]

    def test_sigkill_loses_no_result_and_a_rerun_does_each_id_once(self):
        instances = [{"id": f"k{n:02}", "run": f"sleep 0.{n % 3 + 2}; echo {n}"}
                     for n in range(40)]
        write_instances(self.instances, instances)
        p = self.start_eval("-j", "4")
        try:
            wait_until(lambda: len(read_results(self.out)) >= 6, 30, "six results")
            p.kill()
        finally:
            p.kill()
            p.communicate(timeout=10)
        first = read_results(self.out)
        self.assertLess(len(first), len(instances))
        # What a kill in the middle of a write leaves: the rerun repairs it.
        torn = '{"id":"k39","status":"pas'
        with open(os.path.join(self.out, "results.jsonl"), "a") as f:
            f.write(torn)
        status, out, err = self.rex_eval("-j", "8")
        self.assertEqual(status, 0, out + err)
        self.assertIn(f"dropped a torn last line ({len(torn)} bytes)", err)
        self.assertIn(f"skipping {len(first)} instances already done", err)
        results = read_results(self.out)
        ids = [r["id"] for r in results]
        self.assertEqual(sorted(ids), sorted(i["id"] for i in instances))  # each exactly once
        self.assertEqual(results[:len(first)], first)  # the first run's results kept as they were

    def test_sigint_stops_everything_and_a_rerun_completes(self):
        marker = f"REX_EVAL_TEST_{uuid.uuid4().hex}"
        go = os.path.join(self.dir, "go")
        fast = [{"id": f"f{n}", "run": "echo quick"} for n in range(3)]
        write_instances(self.instances, fast + self.slow_instances(6, go))
        p = self.start_eval("-j", "3", "--env", f"MARK={marker}")
        try:
            wait_until(lambda: len(marked_processes(marker, "sleep")) == 3, 20,
                       "three instances sleeping")
            self.assertEqual(len(read_results(self.out)), 3)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=20)
        finally:
            p.kill()
            p.communicate(timeout=10)
        out, err = out.decode(), err.decode()
        self.assertEqual(p.returncode, 128 + signal.SIGINT, out + err)
        self.assertIn("rex eval: SIGINT: stopping 3 running instances", err)
        self.assertIn("3 instances finished in", out)  # the summary still comes
        self.assertIn("6 unfinished", out)
        wait_until(lambda: not marked_processes(marker), 5, "the instances' processes to end")
        self.assertEqual(sorted(r["id"] for r in read_results(self.out)), ["f0", "f1", "f2"])

        open(go, "w").close()
        status, out, err = self.rex_eval("-j", "3")
        self.assertEqual(status, 0, out + err)
        self.assertIn("skipping 3 instances already done", err)
        results = read_results(self.out)
        self.assertEqual(len(results), 9)
        self.assertEqual(len({r["id"] for r in results}), 9)
        self.assertTrue(all(r["status"] == "passed" for r in results))

    def test_two_signals_at_once(self):
        marker = f"REX_EVAL_TEST_{uuid.uuid4().hex}"
        write_instances(self.instances, [{"id": "long", "run": "sleep 30"}])
        p = self.start_eval("--env", f"MARK={marker}")
        try:
            wait_until(lambda: marked_processes(marker, "sleep"), 20, "the instance to run")
            p.send_signal(signal.SIGTERM)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=20)
        finally:
            p.kill()
            p.communicate(timeout=10)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        wait_until(lambda: not marked_processes(marker), 5, "the instance's processes to end")
        self.assertEqual(read_results(self.out), [])


class UsageTest(EvalTestCase):
    def check_refused(self, lines, expect, *args):
        write_instances(self.instances, lines)
        status, out, err = self.rex_eval(*args)
        self.assertEqual(status, USAGE, out + err)
        for text in expect:
            self.assertIn(text, err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "results.jsonl")))

    def test_bad_instances_are_refused_before_anything_runs(self):
        path = self.instances
        self.check_refused(
            ['{"id":"a","run":"touch ran"}', "", '{"id":"b","run":"x","timeout":"5"}',
             '{"id":"a","run":"y"}', '{"id":"c","run":"x","artefacts":[]}',
             '{"id":"d","run":"x","upload":[{"source":"nope.txt","target":"t"}]}', "not json"],
            [f"{path}:3: timeout: expected a positive number of seconds, got a string",
             f"{path}:4: id \"a\" is already used on line 1",
             f"{path}:5: unknown field \"artefacts\"",
             f"{path}:6: upload[0].source: no such file or directory",
             f"{path}:7: not valid JSON"])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ran")))

    def test_image_needs_a_deployment_that_starts_from_one(self):
        self.check_refused(['{"id":"a","run":"true","image":"python:3.12"}'],
                           ["instance \"a\" (line 1): image: a local deployment cannot start a "
                            "sandbox from an image (docker, kubernetes, fargate"])

    def test_flags(self):
        self.check_refused(['{"id":"a","run":"true"}'], ["--image does not apply to a local"],
                           "--image", "x")
        write_instances(self.instances, ['{"id":"a","run":"true"}'])
        p = subprocess.run([REX, "eval", self.instances], capture_output=True, env=self.env,
                           timeout=RUN_TIMEOUT)
        self.assertEqual(p.returncode, USAGE)
        self.assertIn(b"--output is required", p.stderr)

    def test_one_evaluation_per_output_directory(self):
        write_instances(self.instances, [{"id": "long", "run": "sleep 30"}])
        p = self.start_eval()
        try:
            wait_until(lambda: os.path.exists(os.path.join(self.out, "results.jsonl")), 20,
                       "the first evaluation to start")
            status, out, err = self.rex_eval()
            self.assertEqual(status, USAGE, out + err)
            self.assertIn("is in use by another rex eval", err)
        finally:
            p.kill()
            p.communicate(timeout=10)


if __name__ == "__main__":
    faulthandler.dump_traceback_later(600, exit=True)
    args = sys.argv[1:]
    if len(args) < 1:
        sys.exit("usage: test_eval.py PATH/TO/rex [unittest arguments]")
    REX = os.path.abspath(args[0])
    unittest.main(argv=[sys.argv[0], *args[1:]], verbosity=2)
