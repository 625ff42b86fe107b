#!/usr/bin/env python3
"""`rex shell` in its terminal mode, driven the way a person drives it: through a terminal.

Usage: test_shell_tty.py PATH/TO/rex PATH/TO/rex-server [unittest arguments]
(`LocalShellTtyTest RemoteShellTtyTest ShellTtyEndingsTest` or `DockerShellTtyTest` as unittest
arguments select classes; with none, all run.)

Each test starts its own private tmux server (`tmux -L <unique name> -f /dev/null`, its socket
in the test's temporary HOME, killed at the end) whose one pane runs `rex shell ...; echo
EXIT=$?`, and then types into the pane (send-keys) and reads it back (capture-pane). In the
sandbox's shell: the Python REPL, vi editing a file, top, Ctrl-C on a running command and at
the prompt, a window resize seen by `stty size`, and the exit status of `rex shell` after Ctrl-D
and after `exit 3`. The same scenarios run against a local deployment, a remote one (a
rex-server this file starts), a docker one (skipped when the engine or the test image is
missing) and kubernetes ones (a pod of the local cluster at its address, and through the API
server's pod proxy; skipped without the cluster).

ShellTtyEndingsTest covers the other ways out, each with a server of its own: the server killed,
SIGTERM to rex, and SWE-ReX's own swerex-remote (no terminals: refused with the way out,
`--no-tty`); after each the terminal is blocking, canonical and echoing again.
AttachSessionTtyTest lends the terminal to an agent's bash session on a server (`rex shell
--attach-session`) and hands it back with Ctrl-P Ctrl-Q.

Every wait polls the pane with a deadline; a failure shows what the pane held.
"""

import faulthandler
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import uuid

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protocol"))
from rexserver import RexServer  # noqa: E402

REX = ""
REX_SERVER = ""

SCREEN_TIMEOUT = 15.0  # any one wait for the pane to show something
TMUX_TIMEOUT = 10.0  # any one tmux command
STOP_TIMEOUT = 30.0  # rex shell ending (a docker deployment stops its container)
INTERRUPT_LIMIT = 5.0  # Ctrl-C to the next prompt
RESIZE_LIMIT = 5.0  # tmux's resize to `stty size` in the sandbox seeing it
KEY_PAUSE = 0.2  # between keystrokes a full-screen program must see apart (vi's Escape)

PROMPT = "ttytest>"  # the sandbox shell's PS1 (without its trailing space)
WIDTH, HEIGHT = 100, 30  # the pane at first
EXIT_RE = re.compile(r"^EXIT=(\d+)$", re.MULTILINE)

DOCKER_IMAGE = os.environ.get("REX_TEST_IMAGE", "rex-test-bookworm:latest")


class Tmux:
    """A private tmux server with one session, `t`, of one pane."""

    def __init__(self, env):
        self.name = "rex-tty-" + uuid.uuid4().hex[:12]
        self.env = env

    def __call__(self, *args, check=True):
        p = subprocess.run(["tmux", "-L", self.name, "-f", "/dev/null", *args], env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=TMUX_TIMEOUT)
        if check and p.returncode != 0:
            raise AssertionError(f"tmux {shlex.join(args)} failed ({p.returncode}): "
                                 f"{p.stderr.strip()}")
        return p.stdout

    def start(self, command, width, height):
        # The pane stays after its command ends (for its last words), and the window is all
        # pane (no status line).
        self("start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
             "set-option", "-g", "status", "off", ";",
             "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)

    def screen(self):
        """The pane's text, its history included, wrapped lines joined, trailing blanks cut."""
        text = self("capture-pane", "-p", "-J", "-S", "-", "-t", "t", check=False)
        return "\n".join(line.rstrip() for line in text.splitlines()).rstrip("\n")

    def keys(self, *keys):
        """Keys by tmux's names: Enter, Escape, C-c, C-d (text() types text as it is)."""
        self("send-keys", "-t", "t", *keys)

    def text(self, text):
        self("send-keys", "-t", "t", "-l", text)

    def size(self):
        """The pane's size as `stty size` says it: "ROWS COLUMNS"."""
        return self("display-message", "-p", "-t", "t", "#{pane_height} #{pane_width}").strip()

    def pane_pid(self):
        out = self("display-message", "-p", "-t", "t", "#{pane_pid}", check=False).strip()
        return int(out) if out.isdigit() else None

    def kill(self):
        self("kill-server", check=False)


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: every process's parent
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
        return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def lines_of(screen):
    return screen.split("\n")


def last_line(screen):
    lines = [line for line in lines_of(screen) if line.strip()]
    return lines[-1] if lines else ""


# After rex, in the pane: whether it left the terminal as the shell it came from needs it
# (blocking, and canonical with echo).
AFTER_REX = shlex.join([
    "python3", "-c",
    "import fcntl, os, termios\n"
    "print('STDIN_NONBLOCK=%d' % bool(fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK))\n"
    "lflag = termios.tcgetattr(0)[3]\n"
    "print('TERMINAL_COOKED=%d' % (bool(lflag & termios.ICANON) and bool(lflag & termios.ECHO)))"])


class PaneCase:
    """A private tmux server whose pane runs `rex shell ARGS; echo EXIT=$?; AFTER_REX`, and the
    ways to read and type into it. A subclass (also a unittest.TestCase) launches rex."""

    @classmethod
    def setUpClass(cls):
        if shutil.which("tmux") is None:
            raise unittest.SkipTest("tmux is not installed (scripts/common.sh's REX_PACKAGES "
                                    "has it)")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rex-tty-")
        self.addCleanup(self.tmp.cleanup)
        self.home = self.tmp.name
        self.env = dict(os.environ, HOME=self.home, TERM="xterm-256color", SHELL="/bin/sh",
                        TMUX_TMPDIR=self.home)
        for name in ("TMUX", "TMUX_PANE"):
            self.env.pop(name, None)
        self.asked = 0
        self.tmux = Tmux(self.env)
        self.rex_pid = None
        self.addCleanup(self.stop)

    def launch(self, args, start_timeout=30.0, wait_for_prompt=True):
        """Starts rex shell with `args` and waits for the sandbox's shell to say something (its
        prompt), beyond rex's own messages; then sets a prompt of its own (the typed line does
        not show it) with nothing else drawn with it."""
        self.tmux.start(shlex.join([REX, "shell", *args]) + "; echo EXIT=$?; " + AFTER_REX,
                        WIDTH, HEIGHT)
        if not wait_for_prompt:
            return
        self.wait_screen(lambda s: any(line.strip() and not line.startswith("rex:")
                                       for line in lines_of(s)),
                         "the sandbox shell's first prompt", timeout=start_timeout)
        self.rex_pid = self.find_rex()
        self.line(f"PS1='{PROMPT[:3]}''{PROMPT[3:]} '; unset PROMPT_COMMAND")
        self.wait_prompt()

    def find_rex(self):
        pane = self.tmux.pane_pid()
        found = children(pane) if pane else []
        self.assertEqual(len(found), 1, f"rex among the pane's children ({found}):\n"
                                        f"{self.tmux.screen()}")
        return found[0]

    def stop(self):
        """rex ended (SIGTERM if it still runs, then a bounded wait), then the tmux server."""
        try:
            pid = self.rex_pid
            if pid is None:  # setUp failed before it looked
                pane = self.tmux.pane_pid()
                pid = next(iter(children(pane)), None) if pane else None
            if pid and alive(pid):
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + STOP_TIMEOUT
                while alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            self.after_rex(self.tmux.screen())
        finally:
            self.tmux.kill()

    def after_rex(self, screen):
        """Checks once rex has ended (the docker class: its container is gone)."""

    def wait_screen(self, predicate, what, timeout=SCREEN_TIMEOUT, rex_may_end=False):
        """Polls the pane until predicate(screen); returns the screen."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.tmux.screen()
            if not rex_may_end and EXIT_RE.search(screen):
                self.fail(f"rex shell ended while waiting for {what}; the pane:\n{screen}")
            if predicate(screen):
                return screen
            if time.monotonic() >= deadline:
                self.fail(f"no {what} within {timeout} s; the pane:\n{screen}")
            time.sleep(0.05)

    def wait_prompt(self, what="the shell prompt", timeout=SCREEN_TIMEOUT):
        """The prompt as the last line. Callers wait for it only once the last line was seen
        to be something else (a program's screen, the typed line), or the prompt that was
        already there would do."""
        return self.wait_screen(lambda s: last_line(s) == PROMPT, what, timeout)

    def wait_exit(self, timeout=STOP_TIMEOUT):
        screen = self.wait_screen(lambda s: EXIT_RE.search(s), "the end of rex shell (EXIT=)",
                                  timeout=timeout, rex_may_end=True)
        return int(EXIT_RE.search(screen).group(1))

    def assert_terminal_restored(self):
        """After rex: the terminal blocking, canonical and echoing again."""
        screen = self.wait_screen(lambda s: "TERMINAL_COOKED=" in s,
                                  "the terminal's mode after rex", rex_may_end=True)
        self.assertIn("STDIN_NONBLOCK=0", screen, "rex left the terminal non-blocking")
        self.assertIn("TERMINAL_COOKED=1", screen, "rex left the terminal in raw mode")
        return screen

    # --- typing -----------------------------------------------------------------------------

    def line(self, text):
        self.tmux.text(text)
        self.tmux.keys("Enter")

    def ask(self, expression):
        """The value of a shell word (`$?`, `$(stty size)`) in the sandbox: typed at the prompt,
        read from the answer line (which the typed line cannot be mistaken for)."""
        self.asked += 1
        tag = f"answer{self.asked}="
        self.line(f'echo "{tag}{expression}"')
        screen = self.wait_screen(
            lambda s: any(line.startswith(tag) for line in lines_of(s)) and last_line(s) == PROMPT,
            f"the answer to {expression!r} and the prompt after it")
        return next(line for line in lines_of(screen) if line.startswith(tag))[len(tag):]

    def assert_usable(self, what):
        started = time.monotonic()
        self.assertEqual(self.ask("$((6*7))"), "42", f"the shell after {what}")
        return time.monotonic() - started

    def require(self, program):
        if self.ask(f"$(command -v {program} >/dev/null && echo yes || echo no)") != "yes":
            self.skipTest(f"{program} is not in the sandbox ({self.where_programs_come_from})")

    where_programs_come_from = "scripts/common.sh's REX_PACKAGES"


class ShellTtyScenarios(PaneCase):
    """The scenarios; a subclass says which deployment runs them."""

    start_timeout = 30.0
    host_sees_files = False  # the sandbox's files are this machine's (local, remote here)

    def deployment_args(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        self.launch(self.deployment_args(), self.start_timeout)

    # --- the scenarios ----------------------------------------------------------------------

    def test_python_repl(self):
        self.require("python3")
        self.line("python3 -q")
        self.wait_screen(lambda s: last_line(s) == ">>>", "Python's >>> prompt")
        self.line("6*7")
        self.wait_screen(lambda s: "42" in lines_of(s) and last_line(s) == ">>>",
                         "42 from Python and its next prompt")
        self.tmux.keys("C-d")
        self.wait_prompt("the shell prompt after Ctrl-D left Python")
        self.assert_usable("python3")

    def test_vi_edits_a_file(self):
        self.require("vi")
        if self.host_sees_files:
            path = os.path.join(self.home, "edited.txt")
        else:
            path = f"/tmp/rex-tty-{uuid.uuid4().hex[:8]}.txt"
        self.line(f"vi {path}")
        self.wait_screen(lambda s: "~" in lines_of(s), "vi's empty buffer (lines of ~)")
        self.tmux.keys("i")
        time.sleep(KEY_PAUSE)
        self.tmux.text("hello from vi")
        time.sleep(KEY_PAUSE)
        self.tmux.keys("Escape")
        time.sleep(KEY_PAUSE)  # an Escape followed at once by more keys may be a key code
        self.line(":wq")
        self.wait_prompt("the shell prompt after :wq")
        self.assertEqual(self.ask(f"$(cat {path})"), "hello from vi", "the file vi wrote")
        if self.host_sees_files:
            with open(path) as f:
                self.assertEqual(f.read(), "hello from vi\n", f"{path} on disk")

    def test_top_draws_and_quits(self):
        self.require("top")
        self.line("top")
        self.wait_screen(lambda s: "load average" in s and "Tasks:" in s, "top's header")
        self.tmux.keys("q")
        self.wait_prompt("the shell prompt after top quit")
        self.assert_usable("top")

    def test_ctrl_c_interrupts_a_command(self):
        shell = self.ask("$$")
        # The echo and the sleep are one process: once the line is out, what Ctrl-C interrupts
        # is running.
        self.line("sh -c 'echo \"slee\"\"ping\"; exec sleep 100'")
        self.wait_screen(lambda s: "sleeping" in lines_of(s), "the command to start")
        started = time.monotonic()
        self.tmux.keys("C-c")
        self.wait_prompt("the prompt after Ctrl-C")
        took = time.monotonic() - started
        self.assertLess(took, INTERRUPT_LIMIT, "Ctrl-C to the next prompt")
        self.assertEqual(self.ask("$?"), "130", "the status of the interrupted command")
        self.assertEqual(self.ask("$$"), shell, "the same shell after Ctrl-C")
        self.assertTrue(alive(self.rex_pid), "rex shell after Ctrl-C")
        self.assertLess(self.assert_usable("Ctrl-C"), INTERRUPT_LIMIT, "the next command")

    def test_ctrl_c_at_the_prompt_stays_in_the_sandbox(self):
        shell = self.ask("$$")
        self.tmux.text("echo discarded")
        self.wait_screen(lambda s: last_line(s) == f"{PROMPT} echo discarded", "the typed line")
        for _ in range(3):
            self.tmux.keys("C-c")
            time.sleep(KEY_PAUSE)
        self.wait_prompt("the prompt after Ctrl-C")
        self.assertEqual(self.ask("$$"), shell, "the same shell after Ctrl-C at the prompt")
        self.assertTrue(alive(self.rex_pid), "rex shell after Ctrl-C at the prompt")
        screen = self.tmux.screen()
        self.assertNotIn("discarded", lines_of(screen), f"the line Ctrl-C discarded ran:\n{screen}")
        self.assertIsNone(EXIT_RE.search(screen), f"rex shell ended:\n{screen}")

    def test_window_resize_reaches_the_sandbox(self):
        self.assertEqual(self.ask("$(stty size)"), self.tmux.size(), "the size at the start")
        self.tmux("resize-window", "-t", "t", "-x", "120", "-y", "40")
        self.assertEqual(self.tmux.size(), "40 120", "tmux resized the pane")
        deadline = time.monotonic() + RESIZE_LIMIT
        seen = []
        while True:
            seen.append(self.ask("$(stty size)"))
            if seen[-1] == "40 120":
                break
            if time.monotonic() >= deadline:
                self.fail(f"`stty size` in the sandbox said {seen} within {RESIZE_LIMIT} s of "
                          f"the resize to 40 rows of 120; the pane:\n{self.tmux.screen()}")
            time.sleep(0.1)

    def test_ctrl_d_at_the_prompt_ends_with_status_0(self):
        self.tmux.keys("C-d")
        self.assertEqual(self.wait_exit(), 0, self.tmux.screen())
        self.assert_terminal_restored()

    def test_large_output_arrives_whole(self):
        # Everything the pane receives, recorded by tmux itself.
        record = os.path.join(self.home, "pane.out")
        self.tmux("pipe-pane", "-o", "-t", "t", "cat >> " + shlex.quote(record))
        self.line("seq 1 200000; echo seq-done")
        self.wait_screen(lambda s: "seq-done" in lines_of(s) and last_line(s) == PROMPT,
                         "the end of seq's output", timeout=60)
        self.tmux("pipe-pane", "-t", "t")  # stops recording
        with open(record, "rb") as f:
            text = f.read().decode(errors="replace").replace("\r", "")
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # bash's bracketed-paste switches
        numbers = [line for line in text.split("\n") if line.isdigit()]
        self.assertEqual(len(numbers), 200000, "lines of seq's output lost on the way")
        self.assertEqual(numbers[0], "1")
        self.assertEqual(numbers[-1], "200000")
        self.assertTrue(all(int(n) == i + 1 for i, n in enumerate(numbers)),
                        "seq's output out of order")

    def test_exit_status_of_the_shell_is_rex_shells(self):
        self.line("exit 3")
        self.assertEqual(self.wait_exit(), 3, self.tmux.screen())


class LocalShellTtyTest(ShellTtyScenarios, unittest.TestCase):
    host_sees_files = True

    def deployment_args(self):
        self.workdir = os.path.join(self.home, "work dir")
        return ["--deployment", "local", "--env", "REX_TTY_MARK=marked", "--workdir",
                self.workdir]

    def test_the_deployments_env_and_workdir_apply(self):
        self.assertEqual(self.ask("$REX_TTY_MARK $PWD"), f"marked {self.workdir}")


class RemoteShellTtyTest(ShellTtyScenarios, unittest.TestCase):
    host_sees_files = True  # the server runs on this machine
    token = "shell-tty-token"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server_home = tempfile.TemporaryDirectory(prefix="rex-tty-server-")
        env = dict(os.environ, HOME=cls.server_home.name)
        cls.server = RexServer(REX_SERVER, token=cls.token, env=env)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()  # SIGTERM to its PID, a bounded wait
        cls.server_home.cleanup()

    def deployment_args(self):
        return ["--deployment", "remote", "--url", f"http://127.0.0.1:{self.server.port}",
                "--token", self.token]


def descendants(pid):
    found = []
    for child in children(pid):
        found += [child, *descendants(child)]
    return found


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ShellTtyEndingsTest(PaneCase, unittest.TestCase):
    """The ways out of the terminal mode besides the shell's own end, each against a server of
    its own: the terminal is restored, and a message says what happened."""

    token = "shell-tty-endings"

    def start_server(self):
        env = dict(os.environ, HOME=self.home)
        server = RexServer(REX_SERVER, token=self.token, env=env)
        self.addCleanup(server.terminate)
        return server

    def remote_args(self, port):
        return ["--deployment", "remote", "--url", f"http://127.0.0.1:{port}", "--token",
                self.token]

    def rex_lines(self, screen):
        return [line for line in lines_of(screen) if line.startswith("rex")]

    def test_a_server_that_dies_ends_rex_shell_with_a_message(self):
        server = self.start_server()
        self.launch(self.remote_args(server.port))
        self.line("sleep 1000")
        time.sleep(0.3)
        left = descendants(server.proc.pid)  # the sandbox's shell and its sleep, orphaned below
        self.addCleanup(kill_all, left)
        server.proc.kill()
        server.proc.wait(timeout=STOP_TIMEOUT)
        status = self.wait_exit(timeout=SCREEN_TIMEOUT)
        screen = self.assert_terminal_restored()
        self.assertNotEqual(status, 0, screen)
        self.assertTrue(self.rex_lines(screen), f"no message from rex:\n{screen}")

    def test_sigterm_to_rex_restores_the_terminal_and_ends_the_shell(self):
        server = self.start_server()
        self.launch(self.remote_args(server.port))
        pid_file = os.path.join(self.home, "shell.pid")
        self.line(f"echo $$ > {shlex.quote(pid_file)}; sleep 1000")
        wait = time.monotonic() + SCREEN_TIMEOUT
        while not os.path.exists(pid_file) and time.monotonic() < wait:
            time.sleep(0.05)
        time.sleep(0.1)
        with open(pid_file) as f:
            shell = int(f.read())
        os.kill(self.rex_pid, signal.SIGTERM)
        status = self.wait_exit(timeout=SCREEN_TIMEOUT)
        screen = self.assert_terminal_restored()
        self.assertEqual(status, 128 + signal.SIGTERM, screen)
        deadline = time.monotonic() + SCREEN_TIMEOUT
        while alive(shell) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(shell), "the sandbox's shell outlived rex shell's SIGTERM")

    def test_swerex_remote_is_refused_with_the_way_out(self):
        binary = os.environ.get("REX_SWEREX_REMOTE", "")
        if not os.access(binary, os.X_OK):
            self.skipTest("SWE-ReX's swerex-remote is not installed (REX_SWEREX_REMOTE names it; "
                          "scripts/test.sh installs it)")
        port = free_port()
        log = open(os.path.join(self.home, "swerex.log"), "wb")
        self.addCleanup(log.close)
        proc = subprocess.Popen([binary, "--port", str(port), "--auth-token", self.token],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def stop():
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.addCleanup(stop)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() >= deadline or proc.poll() is not None:
                    self.fail("swerex-remote did not listen within 30 s")
                time.sleep(0.1)
        self.launch(self.remote_args(port), wait_for_prompt=False)
        status = self.wait_exit(timeout=SCREEN_TIMEOUT)
        screen = self.assert_terminal_restored()
        self.assertEqual(status, 1, screen)
        self.assertIn("--no-tty", screen)


class AttachSessionTtyTest(PaneCase, unittest.TestCase):
    """`rex shell --attach-session NAME`: a person's terminal lent an agent's bash session on a
    rex-server between its commands, then handed back with Ctrl-P Ctrl-Q."""

    token = "shell-tty-attach"

    def setUp(self):
        super().setUp()
        env = dict(os.environ, HOME=self.home)
        self.server = RexServer(REX_SERVER, token=self.token, env=env)
        self.addCleanup(self.server.terminate)
        self.server.create_session("agent")
        r = self.server.run(f"cd {shlex.quote(self.home)} && AGENT=busy", session="agent")
        self.assertEqual(r.status, 200, r)

    def agent_runs(self, command):
        return self.server.run(command, session="agent", check="silent")

    def test_a_person_looks_in_and_hands_the_session_back(self):
        self.launch(["--deployment", "remote", "--url", f"http://127.0.0.1:{self.server.port}",
                     "--token", self.token, "--attach-session", "agent"])
        self.assertEqual(self.ask("$AGENT $PWD"), f"busy {self.home}")
        r = self.agent_runs("echo meanwhile")
        self.assertEqual(r.status, 511, r)
        self.assertIn("a terminal is attached", r.json()["swerexception"]["message"])
        # A program that reads the terminal, in the agent's session.
        self.line("python3 -q")
        self.wait_screen(lambda s: last_line(s) == ">>>", "python's prompt")
        self.line("6*7")
        self.wait_screen(lambda s: "42" in lines_of(s) and last_line(s) == ">>>", "6*7 answered")
        self.tmux.keys("C-d")
        self.wait_prompt("the shell after python")
        self.line("cd / && PERSON=was-here")
        self.wait_prompt()
        self.tmux.keys("C-p")
        self.tmux.keys("C-q")
        self.assertEqual(self.wait_exit(), 0, self.tmux.screen())
        screen = self.assert_terminal_restored()
        self.assertIn("rex: detached from session agent", screen)
        r = self.agent_runs("echo $AGENT $PERSON $PWD")
        self.assertEqual((r.status, r.json().get("output")), (200, "busy was-here /\n"), r)

    def test_a_session_that_does_not_exist_is_named(self):
        self.launch(["--deployment", "remote", "--url", f"http://127.0.0.1:{self.server.port}",
                     "--token", self.token, "--attach-session", "nobody"],
                    wait_for_prompt=False)
        self.assertNotEqual(self.wait_exit(timeout=SCREEN_TIMEOUT), 0)
        screen = self.assert_terminal_restored()
        self.assertIn("'nobody' does not exist", screen)


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def docker_connection():
    """An HTTP connection to the Docker engine (DOCKER_HOST or the default socket), or None."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        return UnixConnection(host[len("unix://"):])
    if host.startswith("tcp://"):
        u = urllib.parse.urlsplit(host)
        return http.client.HTTPConnection(u.hostname, u.port or 2375, timeout=10)
    return None


def docker_get(path):
    """(status, body) of a GET to the engine; status None when it cannot be reached."""
    conn = docker_connection()
    if conn is None:
        return None, f"DOCKER_HOST={os.environ.get('DOCKER_HOST')} is neither unix:// nor tcp://"
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    except OSError as e:
        return None, str(e)
    finally:
        conn.close()


class DockerShellTtyTest(ShellTtyScenarios, unittest.TestCase):
    start_timeout = 90.0  # a container to create and start
    where_programs_come_from = (f"image {DOCKER_IMAGE}; scripts/common.sh's "
                                f"_rex_recipe_bookworm lists its packages")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        status, body = docker_get("/_ping")
        if status != 200:
            raise unittest.SkipTest(
                f"the Docker engine is not reachable ({body.strip()[:200]}); scripts/common.sh's "
                f"rex_docker_setup starts it")
        status, body = docker_get(f"/images/{urllib.parse.quote(DOCKER_IMAGE, safe='')}/json")
        if status != 200:
            raise unittest.SkipTest(f"the test image {DOCKER_IMAGE} is missing "
                                    f"(scripts/common.sh's rex_docker_setup builds it)")

    def deployment_args(self):
        return ["--deployment", "docker", "--image", DOCKER_IMAGE, "--pull", "never"]

    def after_rex(self, screen):
        m = re.search(r"rex: creating container (\S+)", screen)
        if not m:
            return
        name = m.group(1)
        status, body = docker_get(f"/containers/{name}/json")
        if status == 200:
            conn = docker_connection()
            try:
                conn.request("DELETE", f"/containers/{name}?force=1")
                conn.getresponse().read()
            finally:
                conn.close()
            self.fail(f"container {name} outlived rex shell (removed now); the pane:\n{screen}")


KUBECONFIG = os.environ.get("REX_KUBECONFIG", "/var/lib/rex-k8s/admin.kubeconfig")
KUBECTL = os.environ.get("REX_KUBECTL", "/var/cache/rex-k8s/v1.34.4/bin/kubectl")


class KubernetesShellTtyTest(ShellTtyScenarios, unittest.TestCase):
    """The scenarios in a pod of the local cluster (scripts/k8s.sh; the k8s.images test puts the
    test image into its containerd), reached at the pod's address."""

    start_timeout = 120.0  # a pod to schedule and start
    connect = "auto"
    where_programs_come_from = (f"image {DOCKER_IMAGE}; scripts/common.sh's "
                                f"_rex_recipe_bookworm lists its packages")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not (os.path.exists(KUBECONFIG) and os.path.exists(KUBECTL)):
            raise unittest.SkipTest(f"no local cluster ({KUBECONFIG}): scripts/k8s.sh up "
                                    f"starts one")

    def deployment_args(self):
        config = os.path.join(self.home, "k8s.json")
        with open(config, "w") as f:
            json.dump({"type": "kubernetes", "image": DOCKER_IMAGE, "kubeconfig": KUBECONFIG,
                       "image_pull_policy": "Never", "connect": self.connect}, f)
        return ["--deployment", config]

    def after_rex(self, screen):
        m = re.search(r"pod (\S+)/(rex-[a-z0-9-]+)", screen)
        if not m:
            return
        namespace, name = m.group(1), m.group(2)
        deadline = time.monotonic() + STOP_TIMEOUT
        while True:
            done = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "-n", namespace, "get",
                                   "pod", name, "-o", "jsonpath={.metadata.deletionTimestamp}"],
                                  capture_output=True, text=True, timeout=60)
            if done.returncode != 0 or done.stdout.strip():
                return  # gone, or being deleted
            if time.monotonic() >= deadline:
                subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "-n", namespace, "delete",
                                "pod", name, "--wait=false"], capture_output=True, timeout=60)
                self.fail(f"pod {namespace}/{name} outlived rex shell (deleted now); the pane:\n"
                          f"{screen}")
            time.sleep(0.5)


class KubernetesProxyShellTtyTest(KubernetesShellTtyTest):
    """The same through the API server's pod proxy (TLS, the kubeconfig's credentials). The
    proxy drops about one shell stream in ten right after its head; rex shell takes it up again
    by the shell's tag, and these scenarios pass through that too."""

    connect = "proxy"


def main():
    faulthandler.dump_traceback_later(900, exit=True)
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit("usage: test_shell_tty.py PATH/TO/rex PATH/TO/rex-server [unittest arguments]")
    global REX, REX_SERVER
    REX, REX_SERVER = os.path.abspath(args[0]), os.path.abspath(args[1])
    program = unittest.main(argv=[sys.argv[0], *args[2:]], verbosity=2, exit=False)
    result = program.result
    if not result.wasSuccessful():
        sys.exit(1)
    # Everything skipped (no tmux, no Docker engine): 77, which CTest reports as skipped. A
    # class skipped in setUpClass is one entry in `skipped` and no test in testsRun.
    skipped_tests = sum(isinstance(test, unittest.TestCase) for test, _ in result.skipped)
    if result.skipped and result.testsRun == skipped_tests:
        sys.exit(77)
    sys.exit(0)


if __name__ == "__main__":
    main()
