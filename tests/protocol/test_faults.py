#!/usr/bin/env python3
"""Faults rex-server and its clients must survive, with nothing lost and nothing leaked.

Usage: test_faults.py PATH/TO/rex-server PATH/TO/rex [unittest arguments]

- bash killed with SIGKILL in the middle of a command;
- commands that start daemons (setsid, nohup, double fork) and exit;
- the open-file limit reached while creating sessions, and recovery once sessions close;
- a full disk under write_file and upload (a small tmpfs; needs root, skipped otherwise);
- rex-server killed in the middle of a request, seen by a client (`rex run --deployment
  remote`), and the daemons of a killed server's sessions ended by the next server (cgroups);
- the session faults again with 1,000 other sessions open (REX_FAULTS_OTHER_SESSIONS).
Every wait is bounded. REX_SESSION_TEARDOWN in the environment reaches the server.
"""

import concurrent.futures
import faulthandler
import io
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zipfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rexserver import RexServer, children_of, is_gone, process_state, wait_until  # noqa: E402

SERVER = ""
CLI = ""
TOKEN = "faults-token"
OTHER_SESSIONS = int(os.environ.get("REX_FAULTS_OTHER_SESSIONS", "1000"))


def session_leader(pid):
    """Whether `pid` leads its own session; False when it is gone already."""
    try:
        return os.getsid(pid) == pid
    except ProcessLookupError:
        return False


def processes_running(needle):
    """Pids of live processes whose command line contains `needle`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline and not is_gone(int(entry)):
            found.append(int(entry))
    return found


def open_sessions(server, count, prefix):
    """Opens `count` sessions, 16 requests at a time; fails on any error."""
    def create(i):
        return server.post("/create_session", {"session": f"{prefix}{i}"})
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(create, range(count)))
    bad = [r for r in replies if r.status != 200]
    if bad:
        raise AssertionError(f"{len(bad)} of {count} sessions failed to open: {bad[0]}")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class FaultTestCase(unittest.TestCase):
    server_kwargs = {}

    def setUp(self):
        self.server = RexServer(SERVER, token=TOKEN, **self.server_kwargs)

    def tearDown(self):
        rc = self.server.terminate()
        self.assertEqual(rc, 0, self.server.output())

    def exception(self, reply):
        self.assertEqual(reply.status, 511, reply)
        return reply.json()["swerexception"]


class TestSessionFaults(FaultTestCase):

    def test_bash_killed_mid_command_is_reported_and_the_session_replaced(self):
        s = self.server
        s.create_session("victim")
        bash = int(s.run("echo $$", session="victim").json()["output"])
        self.assertIn(bash, children_of(s.pid))
        answer = {}
        # A command line of this test alone: the same test runs beside it on another server.
        needle = f"sleep {random.randint(600, 999)}"
        runner = threading.Thread(target=lambda: answer.update(r=s.run(
            needle, session="victim", timeout=120)))
        started = time.monotonic()
        runner.start()
        wait_until(lambda: processes_running(needle), 10, what="the command to start")
        os.kill(bash, signal.SIGKILL)
        runner.join(timeout=20)
        self.assertFalse(runner.is_alive(), "the running command never answered")
        self.assertLess(time.monotonic() - started, 15)
        exc = self.exception(answer["r"])
        self.assertIn("killed by signal 9", exc["message"])
        self.assertIn(needle, exc["message"])
        # Later commands say what happened and what to do.
        exc = self.exception(s.run("echo again", session="victim"))
        self.assertIn("close the session and create a new one", exc["message"])
        self.assertEqual(s.close_session("victim"), {"session_type": "bash"})
        s.create_session("victim")
        self.assertEqual(s.run("echo back", session="victim").json()["output"], "back\n")
        s.close_session("victim")
        # No zombie is left among the server's children.
        wait_until(lambda: not [p for p in children_of(s.pid) if process_state(p) == "Z"], 5,
                   what="the server to reap its children")

    def test_daemons_started_by_commands_do_not_block_and_die_with_the_session(self):
        s = self.server
        s.create_session("d")
        tag = random.randint(100, 999)  # sleep takes digits only
        commands = [
            f"setsid sleep 7{tag}1 & echo started",  # keeps the terminal open
            f"nohup setsid sleep 7{tag}2 >/dev/null 2>&1 & echo started",
            f"(setsid bash -c 'sleep 7{tag}3' &); echo started",  # double fork
            f"sleep 7{tag}4 & echo started",  # a background job
        ]
        for command in commands:
            started = time.monotonic()
            reply = s.run(command, session="d", timeout=10)
            self.assertEqual(reply.status, 200, reply)
            self.assertIn("started", reply.json()["output"])
            self.assertLess(time.monotonic() - started, 5, command)
        self.assertEqual(s.run("echo still usable", session="d").json()["output"],
                         "still usable\n")
        needles = [f"sleep 7{tag}{i}" for i in (1, 2, 3, 4)]
        for needle in needles:
            wait_until(lambda n=needle: processes_running(n), 5, what=needle)
        s.close_session("d")
        for needle in needles:
            wait_until(lambda n=needle: not processes_running(n), 5,
                       what=f"'{needle}' to be killed with its session")

    def test_daemons_die_when_the_server_exits(self):
        s = self.server
        s.create_session("d")
        needle = f"sleep 8{random.randint(1000, 9999)}"
        s.run(f"setsid {needle} & echo started", session="d", timeout=10)
        wait_until(lambda: processes_running(needle), 5, what=needle)
        self.assertEqual(s.terminate(), 0)
        wait_until(lambda: not processes_running(needle), 5,
                   what="the daemon to die with the server")
        self.server = RexServer(SERVER, token=TOKEN)  # for tearDown


def low_fd_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))


# UBSan's vptr check probes memory through a pipe: in a process with no descriptor left it
# reports a valid object as invalid and aborts. The release build runs this test.
@unittest.skipIf(os.environ.get("REX_UBSAN") == "1",
                 "UBSan's vptr check needs a free descriptor (it probes memory through a pipe)")
class TestFdLimit(FaultTestCase):
    server_kwargs = {"preexec_fn": low_fd_limit}

    def test_fd_limit_gives_a_clear_error_and_recovers_once_sessions_close(self):
        s = self.server
        baseline = fd_count(s.pid)
        made, failure = [], None
        for i in range(48):
            reply = s.post("/create_session", {"session": f"s{i}"})
            if reply.status != 200:
                failure = reply
                break
            made.append(f"s{i}")
        self.assertIsNotNone(failure, "48 sessions fit under a limit of 48 descriptors")
        self.assertGreater(len(made), 3)
        exc = self.exception(failure)
        self.assertEqual(exc["class_path"], "builtins.OSError")
        self.assertIn("Too many open files", exc["message"])
        self.assertIn("ulimit -n", exc["message"])
        # The server still answers, and the sessions it has still work.
        self.assertEqual(s.get("/is_alive").json(), {"is_alive": True, "message": ""})
        self.assertEqual(s.run("echo fine", session=made[0]).json()["output"], "fine\n")
        for name in made:
            s.close_session(name)
        # Every descriptor of the failed attempt and of the closed sessions is back.
        wait_until(lambda: fd_count(s.pid) <= baseline, 5,
                   what=f"the server's descriptors to return to {baseline}")
        s.create_session("after")
        self.assertEqual(s.run("echo recovered", session="after").json()["output"],
                         "recovered\n")
        s.close_session("after")


class TestFullDisk(FaultTestCase):
    """write_file and upload onto a 256 KiB tmpfs: a clear error, and no file left behind
    that looks complete."""

    @classmethod
    def setUpClass(cls):
        cls.disk = tempfile.mkdtemp(prefix="rex-full-disk-")
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", cls.disk],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            os.rmdir(cls.disk)
            raise unittest.SkipTest("mounting a small tmpfs needs root (CAP_SYS_ADMIN): "
                                    + mounted.stderr.strip())

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", "-l", cls.disk], check=False)
        shutil.rmtree(cls.disk, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.disk, name)

    def assertDiskFull(self, reply, name):
        exc = self.exception(reply)
        self.assertEqual(exc["class_path"], "builtins.OSError")
        self.assertIn("[Errno 28] No space left on device", exc["message"])
        self.assertIn(name, exc["message"])

    def test_write_file_that_does_not_fit_leaves_nothing(self):
        reply = self.server.post("/write_file", {"path": self.path("big.txt"),
                                                 "content": "x" * 1_000_000})
        self.assertDiskFull(reply, "big.txt")
        self.assertFalse(os.path.exists(self.path("big.txt")))

    def test_write_file_over_an_existing_file_keeps_the_old_content(self):
        with open(self.path("old.txt"), "w") as f:
            f.write("old\n")
        reply = self.server.post("/write_file", {"path": self.path("old.txt"),
                                                 "content": "y" * 1_000_000})
        self.assertDiskFull(reply, "old.txt")
        with open(self.path("old.txt")) as f:
            self.assertEqual(f.read(), "old\n")
        os.unlink(self.path("old.txt"))

    def test_upload_that_does_not_fit_leaves_nothing(self):
        reply = self.server.upload(os.urandom(1_000_000), self.path("up.bin"), False)
        self.assertDiskFull(reply, "up.bin")
        self.assertFalse(os.path.exists(self.path("up.bin")))

    def test_zip_that_does_not_fit_names_the_entry_and_leaves_no_part_of_it(self):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("small.txt", "fits\n")
            z.writestr("huge.bin", os.urandom(600_000))
        reply = self.server.upload(buf.getvalue(), self.path("tree"), True,
                                   "zipped_transfer.zip", "application/zip")
        self.assertDiskFull(reply, "huge.bin")
        self.assertFalse(os.path.exists(self.path("tree/huge.bin")))
        shutil.rmtree(self.path("tree"), ignore_errors=True)

    def test_the_server_works_once_space_is_back(self):
        reply = self.server.post("/write_file", {"path": self.path("big.txt"),
                                                 "content": "x" * 1_000_000})
        self.assertEqual(reply.status, 511)
        self.assertEqual(self.server.post("/write_file", {"path": self.path("small.txt"),
                                                          "content": "ok"}).status, 200)
        with open(self.path("small.txt")) as f:
            self.assertEqual(f.read(), "ok")
        os.unlink(self.path("small.txt"))


class TestSessionFaultsAmongManySessions(TestSessionFaults):
    """The session faults again, while many other sessions are open on the same server: a
    close must find the closing session's processes among theirs and leave theirs alone."""

    def setUp(self):
        super().setUp()
        try:
            open_sessions(self.server, OTHER_SESSIONS, "other")
        except BaseException:
            self.server.terminate()  # tearDown does not run after a failed setUp
            raise
        self.crowded = self.server

    def tearDown(self):
        s = self.server
        if s is self.crowded and OTHER_SESSIONS:
            for name in ("other0", f"other{OTHER_SESSIONS - 1}"):
                reply = s.run("echo still here", session=name)
                self.assertEqual(reply.status, 200, reply)
                self.assertEqual(reply.json()["output"], "still here\n")
        super().tearDown()


class TestServerCrash(FaultTestCase):

    def test_daemons_of_a_killed_server_end_when_the_next_one_starts(self):
        s = self.server
        if "sessions end by cgroup per session" not in s.output():
            self.skipTest("the server finds sessions by scanning /proc here: a server that is "
                          "killed leaves no record of its sessions' daemons")
        s.create_session("d")
        needle = f"sleep 9{random.randint(1000, 9999)}"
        s.run(f"setsid {needle} & echo started", session="d", timeout=10)
        # `sleep` itself, in its own session: the `setsid` before it (whose command line holds
        # the needle too) would still die of the terminal's hangup.
        # (That `setsid` may be gone between the listing and the look at its session.)
        wait_until(lambda: [p for p in processes_running(needle) if session_leader(p)], 5,
                   what=needle)
        s.kill()  # SIGKILL: the server gets no chance to close anything
        time.sleep(0.3)
        # The daemon outlives the killed server, unless a rex-server of another test running
        # beside this one started first: any rex-server that starts ends a dead one's daemons.
        self.server = RexServer(SERVER, token=TOKEN)
        wait_until(lambda: not processes_running(needle), 5,
                   what="the next server to end the killed server's daemon")


class TestServerKilledMidRequest(FaultTestCase):

    def test_client_reports_a_server_killed_under_a_request(self):
        s = self.server
        url = f"http://127.0.0.1:{s.port}"
        needle = f"sleep 3{int(time.time() * 1000) % 100000}"
        client = subprocess.Popen(
            [CLI, "run", "--deployment", "remote", "--url", url, "--token", TOKEN, "-q",
             needle],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: processes_running(needle), 10, what="the command to start")
        s.kill()
        started = time.monotonic()
        try:
            out, err = client.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            client.kill()
            self.fail("the client hung after its server was killed")
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(client.returncode, 1, (out, err))
        self.assertIn(url, err)
        # The server's session died with it: no bash or command of it is left.
        wait_until(lambda: not processes_running(needle), 5,
                   what="the killed server's command to go")
        self.server = RexServer(SERVER, token=TOKEN)  # for tearDown


def main():
    global SERVER, CLI
    args = [a for a in sys.argv[1:] if not a.startswith("-")][:2]
    if len(args) != 2:
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex-server PATH/TO/rex [unittest args]")
    SERVER, CLI = (os.path.abspath(a) for a in args)
    for a in args:
        sys.argv.remove(a)
    faulthandler.dump_traceback_later(280, exit=True)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
