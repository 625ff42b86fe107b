#!/usr/bin/env python3
"""The `rex` executable from the outside: run, shell and gc with local, dummy and remote
deployments.

Usage: test_cli.py PATH/TO/rex PATH/TO/rex-server [unittest arguments]

Every process wait, pipe read and pty read is bounded, so a hang fails instead of blocking.
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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protocol"))
from rexserver import RexServer  # noqa: E402

REX = ""
REX_SERVER = ""

RUN_TIMEOUT = 30.0  # any one rex invocation
PTY_TIMEOUT = 10.0  # any one wait for terminal output
USAGE = 2  # exit status for bad flags and configs


def rex(*args, stdin=None, env=None, timeout=RUN_TIMEOUT):
    """Runs rex to completion; returns (status, stdout, stderr)."""
    p = subprocess.run([REX, *args], input=stdin, capture_output=True, env=env, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def marked_processes(marker, program=None):
    """Live (not zombie) processes whose environment carries marker (and that run program)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if state != "Z" and (program is None or os.path.basename(argv0) == program.encode()):
            found.append(int(entry))
    return found


def read_until(pipe, text, timeout):
    """Reads a pipe (unbuffered) until text has come; returns everything read."""
    data = b""
    deadline = time.monotonic() + timeout
    while text not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([pipe], [], [], left)[0]:
            raise AssertionError(f"no {text!r} within {timeout} s; got {data!r}")
        chunk = os.read(pipe.fileno(), 4096)
        if not chunk:
            raise AssertionError(f"the pipe closed before {text!r}; got {data!r}")
        data += chunk
    return data


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Terminal:
    """rex running in a pseudo-terminal, read with deadlines."""

    def __init__(self, args, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become rex
            try:
                os.execve(REX, [REX, *args], env)
            finally:
                os._exit(127)
        self.buffer = b""
        self.status = None

    def read_until(self, text, timeout=PTY_TIMEOUT):
        """Everything up to and including text; AssertionError with what came on timeout."""
        text = text.encode() if isinstance(text, str) else text
        deadline = time.monotonic() + timeout
        while text not in self.buffer:
            left = deadline - time.monotonic()
            ready = select.select([self.fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                raise AssertionError(f"no {text!r} within {timeout} s; got {self.buffer!r}")
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                data = b""
            if not data:
                raise AssertionError(f"terminal closed before {text!r}; got {self.buffer!r}")
            self.buffer += data
        end = self.buffer.index(text) + len(text)
        out, self.buffer = self.buffer[:end], self.buffer[end:]
        return out.decode(errors="replace")

    def send(self, data):
        os.write(self.fd, data.encode() if isinstance(data, str) else data)

    def wait(self, timeout=RUN_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            self.drain(0.05)
        self.kill()
        raise AssertionError(f"rex did not exit within {timeout} s; got {self.buffer!r}")

    def drain(self, timeout):
        if select.select([self.fd], [], [], timeout)[0]:
            try:
                self.buffer += os.read(self.fd, 4096)
            except OSError:
                pass

    def rest(self):
        """What came after the last read_until (after the process exited)."""
        while True:
            try:
                if not select.select([self.fd], [], [], 0.2)[0]:
                    break
                data = os.read(self.fd, 4096)
            except OSError:
                break
            if not data:
                break
            self.buffer += data
        return self.buffer.decode(errors="replace")

    def kill(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass

    def close(self):
        self.kill()
        os.close(self.fd)


class CliTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rex-cli-")
        self.home = self.tmp.name
        self.env = dict(os.environ, HOME=self.home, TERM="xterm")
        self.env.pop("DOCKER_HOST", None)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, content):
        path = os.path.join(self.home, name)
        with open(path, "w") as f:
            f.write(content)
        return path


class RunTest(CliTestCase):
    def test_local_commands_share_state_and_show_exit_codes(self):
        status, out, err = rex("run", "cd /tmp && export X=42", "echo $X in $PWD", "ls /nonexistent",
                               "exit_status() { return 3; }; exit_status", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("$ echo $X in $PWD\n42 in /tmp\n[exit 0,", out)
        self.assertIn("No such file or directory\n[exit 2,", out)
        self.assertIn("[exit 3,", out)
        self.assertIn("rex: local runtime ready", err)

    def test_local_options_apply(self):
        workdir = os.path.join(self.home, "work")
        status, out, err = rex("run", "--deployment", "local", "--workdir", workdir, "--env",
                               "A=1", "--env", "B=two", "pwd; echo $A-$B", "-q", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn(f"{workdir}\n1-two\n", out)
        self.assertEqual(err, "")  # --quiet

    def test_json_steps(self):
        status, out, err = rex("run", "--json", "-q", "echo hi", env=self.env)
        self.assertEqual(status, 0, err)
        step = json.loads(out.splitlines()[0])
        self.assertEqual(step["observation"]["output"].strip(), "hi")
        self.assertEqual(step["observation"]["exit_code"], 0)

    def test_a_failing_step_gives_status_1(self):
        status, out, err = rex("run", "--timeout", "0.5", "sleep 5", "echo after", env=self.env)
        self.assertEqual(status, 1, out + err)
        self.assertIn("CommandTimeoutError", out)

    def test_dummy(self):
        status, out, err = rex("run", "--deployment", "dummy", "echo hi", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("$ echo hi\n[exit 0,", out)
        self.assertIn("rex: dummy runtime ready", err)

    def test_config_file(self):
        path = self.write("local.json", json.dumps({"type": "local", "env": {"FROM_FILE": "yes"}}))
        status, out, err = rex("run", "--deployment", path, "--env", "MORE=too",
                               "echo $FROM_FILE $MORE", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("yes too\n", out)

    def test_sigterm_stops_the_deployment(self):
        marker = f"REX_CLI_TEST_{uuid.uuid4().hex}"
        p = subprocess.Popen([REX, "run", "--env", f"MARK={marker}", "sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        try:
            wait_until(lambda: marked_processes(marker, "sleep"), 10, "sleep to start")
            started = time.monotonic()
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=10)
            self.assertLess(time.monotonic() - started, 5)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
            self.assertIn(b"SIGTERM: stopping the deployment", err)
            wait_until(lambda: not marked_processes(marker), 5, "the session's processes to end")
        finally:
            p.kill()
            p.wait(timeout=10)


class UsageTest(CliTestCase):
    def check_usage_error(self, *args, expect):
        status, out, err = rex(*args, env=self.env)
        self.assertEqual(status, USAGE, out + err)
        for text in expect:
            self.assertIn(text, err)
        self.assertNotIn("ready", err)  # nothing started

    def test_flag_for_another_type(self):
        self.check_usage_error("run", "--image", "busybox", "echo",
                               expect=["--image does not apply to a local deployment"])
        self.check_usage_error("run", "--deployment", "dummy", "--workdir", "/tmp", "echo",
                               expect=["--workdir does not apply to a dummy deployment"])
        self.check_usage_error("shell", "--deployment", "remote", "--keep",
                               expect=["--keep does not apply to a remote deployment"])
        self.check_usage_error("run", "--deployment", "docker", "--namespace", "ns", "echo",
                               expect=["--namespace does not apply to a docker deployment "
                                       "(only to kubernetes)"])

    def test_unknown_type(self):
        self.check_usage_error("run", "--deployment", "nomad", "echo",
                               expect=['"nomad" is neither a deployment type'])

    def test_kubernetes_without_a_cluster_says_where_it_looked(self):
        env = dict(self.env)
        env.pop("KUBECONFIG", None)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        status, out, err = rex("run", "--deployment", "kubernetes", "echo", env=env)
        self.assertEqual(status, 1, out + err)
        self.assertIn("no kubeconfig", err)
        self.assertIn(".kube/config does not exist", err)
        self.assertIn("set KUBECONFIG", err)

    def test_bad_values_name_the_field(self):
        self.check_usage_error("run", "--deployment", "docker", "--pull", "sometimes", "echo",
                               expect=["docker.pull", "sometimes"])
        self.check_usage_error("run", "--deployment", "remote", "--port", "70000", "echo",
                               expect=["remote.port"])
        self.check_usage_error("run", "--env", "NOEQUALS", "echo", expect=["--env", "KEY=VALUE"])
        self.check_usage_error("run", "--deployment", "docker", "--docker-arg=--frobnicate",
                               "echo", expect=["--frobnicate"])

    def test_bad_config_files(self):
        unknown = self.write("unknown.json", json.dumps({"type": "local", "workdir": "/tmp"}))
        self.check_usage_error("run", "--deployment", unknown, "echo",
                               expect=[unknown, 'unknown field "workdir"'])
        broken = self.write("broken.json", "{not json")
        self.check_usage_error("run", "--deployment", broken, "echo", expect=[broken, "JSON"])

    def test_cli_usage(self):
        self.check_usage_error("run", "--no-such-flag", "echo", expect=["--no-such-flag"])
        self.check_usage_error("run", expect=["nothing to run"])
        self.check_usage_error("frobnicate", expect=["subcommand"])


class RemoteTest(CliTestCase):
    token = "cli-test-token"

    @classmethod
    def setUpClass(cls):
        cls.server = RexServer(REX_SERVER, token=cls.token)
        cls.url = f"http://127.0.0.1:{cls.server.port}"

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_run(self):
        status, out, err = rex("run", "--deployment", "remote", "--url", self.url, "--token",
                               self.token, "cd /tmp", "pwd; false", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("/tmp\n[exit 1,", out)
        self.assertIn(f"connected to {self.url}", err)

    def test_config_file_with_flags_on_top(self):
        path = self.write("remote.json", json.dumps(
            {"type": "remote", "host": "http://127.0.0.1", "auth_token": "wrong"}))
        status, out, err = rex("run", "--deployment", path, "--port", str(self.server.port),
                               "--token", self.token, "echo via file", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("via file\n", out)

    def test_wrong_token_fails_to_start(self):
        status, out, err = rex("run", "--deployment", "remote", "--url", self.url, "--token",
                               "wrong", "--startup-timeout", "1", "echo", env=self.env)
        self.assertEqual(status, 1, out + err)
        self.assertIn("refused the auth_token", err)
        self.assertNotIn("$ echo", out)

    def test_shell_interrupt_through_a_signal(self):
        p = subprocess.Popen([REX, "shell", "-q", "--deployment", "remote", "--url", self.url,
                              "--token", self.token], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        try:
            p.stdin.write(b"echo started\nsleep 60\n")
            p.stdin.flush()
            first = read_until(p.stdout, b"started\n", 10)
            time.sleep(0.5)  # let sleep start (an early SIGINT only ends it sooner)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(b"echo after\n", timeout=20)
            out = first + out
        finally:
            p.kill()
            p.wait(timeout=10)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(b"started\n", out)
        self.assertIn(b"[exit 130]\nafter\n", out)


class ShellPipeTest(CliTestCase):
    def test_commands_state_exit_codes(self):
        script = ("echo one\n"
                  "cd /tmp\n"
                  "pwd\n"
                  "\n"
                  "ls /nonexistent\n"
                  "echo a \\\n"
                  "  b\n"
                  "printf 'no newline'\n"
                  "exit\n"
                  "echo never\n")
        status, out, err = rex("shell", stdin=script.encode(), env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("one\n/tmp\n", out)
        self.assertIn("No such file or directory\n[exit 2]\n", out)
        self.assertIn("a b\nno newline\n", out)
        self.assertNotIn("never", out)
        self.assertNotIn("rex:local $", out)  # no prompt without a terminal
        self.assertIn("rex: local runtime stopped", err)

    def test_exit_status_and_end_of_input(self):
        status, out, err = rex("shell", "-q", stdin=b"exit 3\n", env=self.env)
        self.assertEqual(status, 3, err)
        status, out, err = rex("shell", "-q", stdin=b"false\necho last", env=self.env)
        self.assertEqual(status, 0, err)
        self.assertEqual(out, "[exit 1]\nlast\n")

    def test_timeout_interrupts_and_the_shell_goes_on(self):
        status, out, err = rex("shell", "-q", "--timeout", "0.5", stdin=b"sleep 30\necho next\n",
                               env=self.env, timeout=20)
        self.assertEqual(status, 0, err)
        self.assertIn("timeout", err)
        self.assertIn("next\n", out)

    def test_dummy(self):
        status, out, err = rex("shell", "--deployment", "dummy", stdin=b"echo hi\n",
                               env=self.env)
        self.assertEqual(status, 0, err)
        self.assertIn("rex: dummy runtime stopped", err)


class ShellLineModeOnATerminalTest(CliTestCase):
    """`rex shell --no-tty` on a terminal: the line mode, with local line editing."""

    def setUp(self):
        super().setUp()
        self.history = os.path.join(self.home, ".rex_history")
        self.marker = f"REX_CLI_TEST_{uuid.uuid4().hex}"
        self.term = Terminal(["shell", "--no-tty", "--env", f"MARK={self.marker}"], self.env)

    def tearDown(self):
        self.term.close()
        super().tearDown()

    def test_interactive_session(self):
        t = self.term
        t.read_until("rex:local $ ")
        t.send("echo hello\r")
        self.assertIn("hello\r\n", t.read_until("rex:local $ "))

        # Ctrl-C while a command runs interrupts it; the shell goes on.
        t.send("sleep 30\r")
        t.read_until("sleep 30\r\n")
        # Interrupted once it runs: a job caught between fork and exec may count as ignoring
        # Ctrl-C and be killed instead (exit 137).
        wait_until(lambda: marked_processes(self.marker, "sleep"), 10, "sleep to start")
        started = time.monotonic()
        t.send("\x03")
        self.assertIn("[exit 130]", t.read_until("rex:local $ "))
        self.assertLess(time.monotonic() - started, 5)

        # Up twice recalls the command before the last one.
        t.send("\x1b[A")
        t.read_until("sleep 30")
        t.send("\x1b[A")
        t.read_until("echo hello")
        t.send("\r")
        self.assertIn("hello\r\n", t.read_until("rex:local $ "))

        # Ctrl-C at the prompt discards the line.
        t.send("echo discarded\x03")
        t.read_until("^C")
        t.read_until("rex:local $ ")
        t.send("cd /tmp && false\r")
        self.assertIn("[exit 1]", t.read_until("rex:local $ "))
        t.send("pwd\r")
        self.assertIn("/tmp\r\n", t.read_until("rex:local $ "))

        # Ctrl-D leaves.
        t.send("\x04")
        self.assertEqual(t.wait(), 0, t.rest())
        self.assertNotIn("discarded", t.rest().replace("echo discarded", ""))
        with open(self.history, "rb") as f:
            history = f.read()
        self.assertIn(b"pwd", history)
        self.assertNotIn(b"discarded", history)

    def test_history_persists(self):
        t = self.term
        t.read_until("rex:local $ ")
        t.send("echo remembered\r")
        t.read_until("rex:local $ ")
        t.send("exit\r")
        self.assertEqual(t.wait(), 0, t.rest())
        again = Terminal(["shell", "--no-tty"], self.env)
        try:
            again.read_until("rex:local $ ")
            again.send("\x1b[A")  # exit
            again.read_until("exit")
            again.send("\x1b[A\r")
            self.assertIn("remembered\r\n", again.read_until("rex:local $ "))
            again.send("\x04")
            self.assertEqual(again.wait(), 0, again.rest())
        finally:
            again.close()

    def test_sigterm_at_the_prompt(self):
        t = self.term
        t.read_until("rex:local $ ")
        os.kill(t.pid, signal.SIGTERM)
        self.assertEqual(t.wait(), 128 + signal.SIGTERM, t.rest())
        self.assertIn("rex: local runtime stopped", t.rest())


class GcTest(CliTestCase):
    def test_unreachable_engine(self):
        socket_path = os.path.join(self.home, "no-such-dir", "docker.sock")
        env = dict(self.env, DOCKER_HOST=f"unix://{socket_path}")
        status, out, err = rex("gc", env=env)
        self.assertEqual(status, 1, out + err)
        self.assertTrue(err.startswith("rex gc: "), err)
        # Builds whose Engine client is the placeholder cannot know the socket.
        if "not built into this version" not in err:
            self.assertIn(socket_path, err)

    def test_a_backend_that_cannot_list_is_refused_naming_those_that_can(self):
        status, out, err = rex("gc", "--deployment", "local")
        self.assertEqual(status, 2, out + err)
        self.assertIn("rex gc: a local deployment has no sandboxes to list and collect", err)
        self.assertIn("docker, e2b, kubernetes, fargate, daytona", err)
        status, out, err = rex("gc", "--kubernetes", "--fargate")
        self.assertEqual(status, 1, out + err)
        self.assertIn("one at a time", err)
        # The deployment flags apply as for rex run, and are checked the same way.
        status, out, err = rex("gc", "--deployment", "fargate", "--namespace", "x")
        self.assertEqual(status, 1, out + err)
        self.assertIn("--namespace does not apply to a fargate deployment (only to kubernetes)", err)


class BackendsTest(CliTestCase):
    def test_the_table_is_listed_and_drives_the_flags_help(self):
        status, out, err = rex("backends")
        self.assertEqual(status, 0, out + err)
        names = [line.split()[0] for line in out.splitlines()]
        for name in ("local", "remote", "docker", "dummy", "gateway", "e2b", "kubernetes",
                     "fargate", "daytona", "modal", "podman"):
            self.assertIn(name, names, out)
        status, out, err = rex("run", "--help")
        self.assertEqual(status, 0, out + err)
        # Each flag's help names the backends it applies to and what it sets there.
        self.assertRegex(out, r"--image TEXT +docker, kubernetes, fargate, daytona(, modal)?: "
                              r"the image to start")
        self.assertIn("docker: never, missing or always", out)
        self.assertIn("local, docker, gateway, e2b, kubernetes, fargate, daytona", out)


if __name__ == "__main__":
    faulthandler.dump_traceback_later(600, exit=True)
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit("usage: test_cli.py PATH/TO/rex PATH/TO/rex-server [unittest arguments]")
    REX, REX_SERVER = os.path.abspath(args[0]), os.path.abspath(args[1])
    unittest.main(argv=[sys.argv[0], *args[2:]], verbosity=2)
