"""Tests of src/gateway/notebook_kernel.py with real kernel and client processes.

Run from the repository root: python3 -m unittest tests/gateway/test_notebook_kernel.py -v
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "gateway",
                      "notebook_kernel.py")
DEADLINE = 20  # seconds any one process may take


class KernelTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rexnb")
        self.sock = os.path.join(self.dir, "k.sock")
        self.proc = None

    def tearDown(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=DEADLINE)
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self):
        self.log = open(os.path.join(self.dir, "kernel.log"), "wb")
        self.proc = subprocess.Popen([sys.executable, KERNEL, "serve", self.sock],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)
        deadline = time.monotonic() + DEADLINE
        while not (os.path.exists(self.sock) and os.path.exists(self.sock + ".pid")):
            self.assertIsNone(self.proc.poll(), "the kernel exited at start")
            self.assertLess(time.monotonic(), deadline, "the kernel did not start")
            time.sleep(0.02)

    def run_cell(self, code, *extra, expect_rc=0):
        done = subprocess.run([sys.executable, KERNEL, "run", self.sock] + list(extra),
                              input=code.encode("utf-8"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=DEADLINE)
        self.assertEqual(done.returncode, expect_rc, done.stderr.decode("utf-8", "replace"))
        lines = done.stdout.decode("utf-8").splitlines()
        self.assertEqual(len(lines), 1, done.stdout)
        return json.loads(lines[0])

    def ok(self, code, *extra):
        reply = self.run_cell(code, *extra)
        self.assertIsNone(reply["error"], reply)
        return reply

    def value(self, code):
        results = self.ok(code)["results"]
        self.assertEqual(len(results), 1, results)
        self.assertEqual(results[0]["type"], "text")
        return results[0]["text"]

    def test_state_persists(self):
        self.start()
        first = self.ok("x = 1")
        self.assertEqual(first["results"], [])
        self.assertEqual(first["execution_count"], 1)
        second = self.ok("x + 1")
        self.assertEqual(second["results"], [{"type": "text", "text": "2"}])
        self.assertEqual(second["execution_count"], 2)

    def test_imports_and_functions_persist(self):
        self.start()
        self.ok("import math\nfrom collections import Counter")
        self.ok("def double(a):\n    return a * 2\n\nclass Box:\n    pass")
        self.assertEqual(self.value("math.sqrt(16)"), "4.0")
        self.assertEqual(self.value("double(21)"), "42")
        self.assertEqual(self.value("Counter('aab')['a']"), "2")
        self.assertEqual(self.value("import pickle\npickle.loads(pickle.dumps(Box())).__class__.__name__"),
                         "'Box'")
        self.assertEqual(self.value("__name__"), "'__main__'")

    def test_last_expression(self):
        self.start()
        self.assertEqual(self.ok("None")["results"], [])
        self.assertEqual(self.ok("for i in range(3):\n    i")["results"], [])
        self.assertEqual(self.value("1\n'a' + 'b'"), "'ab'")
        self.assertEqual(self.value("_"), "'ab'")  # like IPython, _ is the last value
        self.assertEqual(self.value("[1, {'k': None}]"), "[1, {'k': None}]")
        reply = self.ok("print('hi')")  # print returns None: no result
        self.assertEqual(reply["results"], [])
        self.assertEqual(reply["stdout"], "hi\n")

    def test_stdout_and_stderr(self):
        self.start()
        reply = self.ok("import sys\nprint('out', 1)\nprint('err', file=sys.stderr)\n"
                        "sys.stdout.write('more\\n')\nsys.stderr.write('e2')\n7")
        self.assertEqual(reply["stdout"], "out 1\nmore\n")
        self.assertEqual(reply["stderr"], "err\ne2")
        self.assertEqual(reply["results"], [{"type": "text", "text": "7"}])
        self.assertEqual(self.ok("x = 1")["stdout"], "")  # nothing carries over
        self.assertEqual(self.run_cell("input()")["error"]["name"], "EOFError")  # never hangs

    def test_unicode_and_lone_surrogates(self):
        self.start()
        self.assertEqual(self.ok("print('héllo ✓ 日本')")["stdout"], "héllo ✓ 日本\n")
        self.assertEqual(self.value("'ü'"), "'ü'")
        reply = self.ok("print('a\\udcffb')")  # must not break the reply
        self.assertIn("udcff", reply["stdout"])

    def test_exception_keeps_output_and_state(self):
        self.start()
        reply = self.run_cell("print('before')\ny = 5\ndef f():\n    return 1 / 0\nf()\nprint('after')")
        self.assertEqual(reply["stdout"], "before\n")
        error = reply["error"]
        self.assertEqual(error["name"], "ZeroDivisionError")
        self.assertEqual(error["value"], "division by zero")
        self.assertIn('File "<cell 1>", line 5', error["traceback"])
        self.assertIn("return 1 / 0", error["traceback"])
        self.assertTrue(error["traceback"].startswith("Traceback (most recent call last):"))
        self.assertNotIn("notebook_kernel", error["traceback"])
        self.assertEqual(self.value("y"), "5")
        self.assertEqual(self.run_cell("undefined_name")["error"]["name"], "NameError")

    def test_syntax_error_runs_nothing(self):
        self.start()
        reply = self.run_cell("z = 1\nx = (")
        self.assertEqual(reply["error"]["name"], "SyntaxError")
        self.assertIn("line 2", reply["error"]["value"])
        self.assertIn("SyntaxError", reply["error"]["traceback"])
        self.assertEqual(self.run_cell("z")["error"]["name"], "NameError")
        self.assertEqual(self.run_cell("return 1")["error"]["name"], "SyntaxError")

    def test_system_exit_does_not_kill_the_kernel(self):
        self.start()
        reply = self.run_cell("import sys\nprint('bye')\nsys.exit(3)")
        self.assertEqual(reply["error"]["name"], "SystemExit")
        self.assertEqual(reply["error"]["value"], "3")
        self.assertEqual(reply["stdout"], "bye\n")
        self.assertEqual(self.run_cell("exit()")["error"]["name"], "SystemExit")
        self.assertEqual(self.value("1 + 1"), "2")
        self.assertIsNone(self.proc.poll())

    def test_timeout_interrupts_the_cell(self):
        self.start()
        self.ok("n = 41")
        started = time.monotonic()
        reply = self.run_cell("print('spinning')\nwhile True: pass", "--timeout", "1")
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(reply["error"]["name"], "KeyboardInterrupt")
        self.assertEqual(reply["stdout"], "spinning\n")
        reply = self.run_cell("import time\ntime.sleep(60)", "--timeout", "0.5")
        self.assertEqual(reply["error"]["name"], "KeyboardInterrupt")
        self.assertEqual(self.value("n + 1"), "42")

    def test_timeout_when_the_kernel_never_answers(self):
        self.start()
        # A cell that swallows KeyboardInterrupt keeps the kernel busy past the grace period.
        reply = self.run_cell("import time\nwhile True:\n    try:\n        time.sleep(1)\n"
                              "    except KeyboardInterrupt:\n        pass",
                              "--timeout", "0.5", expect_rc=4)
        self.assertEqual(reply["kernel"], "timeout")

    def test_idle_kernel_ignores_sigint(self):
        self.start()
        self.ok("kept = 'yes'")
        os.kill(self.proc.pid, signal.SIGINT)
        time.sleep(0.3)
        self.assertIsNone(self.proc.poll())
        self.assertEqual(self.value("kept"), "'yes'")

    def test_unreachable_kernel(self):
        reply = self.run_cell("1", expect_rc=3)
        self.assertEqual(reply["kernel"], "unreachable")
        self.assertTrue(reply["message"])
        self.start()  # a kernel that died leaves a socket nobody listens on
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=DEADLINE)
        self.assertEqual(self.run_cell("1", expect_rc=3)["kernel"], "unreachable")

    def test_kernel_dying_mid_cell_is_reported_as_died(self):
        self.start()
        reply = self.run_cell("import os\nos._exit(1)", expect_rc=5)
        self.assertEqual(reply["kernel"], "died")

    def test_stale_socket_is_replaced(self):
        import socket
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(self.sock)
        stale.close()  # the file stays, nobody listens
        self.start()
        self.assertEqual(self.value("'fresh'"), "'fresh'")

    def test_concurrent_clients_run_one_after_another(self):
        self.start()
        self.ok("counter = 0")
        # Read, sleep, write: overlapping cells would lose updates.
        cell = "import time\nseen = counter\ntime.sleep(0.05)\ncounter = seen + 1\ncounter"
        values, counts, failures = [], [], []

        def client():
            try:
                for _ in range(4):
                    reply = self.run_cell(cell)
                    values.append(int(reply["results"][0]["text"]))
                    counts.append(reply["execution_count"])
            except BaseException as e:  # reported by the main thread
                failures.append(e)

        threads = [threading.Thread(target=client) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE)
        self.assertEqual(failures, [])
        self.assertEqual(sorted(values), list(range(1, 13)))
        self.assertEqual(sorted(counts), list(range(2, 14)))
        self.assertEqual(self.value("counter"), "12")

    def test_large_output_is_truncated(self):
        self.start()
        reply = self.ok("print('x' * (9 * 1024 * 1024))\nprint('y' * 10)")
        self.assertTrue(reply["stdout"].endswith("[output truncated]"))
        self.assertLessEqual(len(reply["stdout"].encode("utf-8")), 8 * 1024 * 1024 + 64)
        self.assertEqual(self.ok("print('small')")["stdout"], "small\n")

    def test_socket_mode_and_sigterm_cleanup(self):
        self.start()
        self.assertEqual(stat.S_IMODE(os.stat(self.sock).st_mode), 0o600)
        self.assertTrue(stat.S_ISSOCK(os.stat(self.sock).st_mode))
        with open(self.sock + ".pid") as f:
            self.assertEqual(int(f.read()), self.proc.pid)
        self.ok("a = 1")
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=DEADLINE), 0)
        self.assertFalse(os.path.exists(self.sock))
        self.assertFalse(os.path.exists(self.sock + ".pid"))

    def test_second_kernel_refuses_a_live_socket(self):
        self.start()
        other = subprocess.run([sys.executable, KERNEL, "serve", self.sock], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=DEADLINE)
        self.assertNotEqual(other.returncode, 0)
        self.assertEqual(self.value("'still here'"), "'still here'")


if __name__ == "__main__":
    unittest.main()
