#!/usr/bin/env python3
"""The static rex-server in a root that holds nothing but busybox and a static bash.

Usage: test_busybox_root.py PATH/TO/rex-server [unittest arguments]

Builds a root directory with Debian's busybox-static (/bin/busybox, /bin/sh, /bin/cat) and
bash-static (as /bin/bash) and a copy of rex-server, then runs the server chrooted there in new
mount and pid namespaces, the way a container runtime would: proc on /proc, a /dev with the
usual device nodes and a private devpts. The network namespace stays the host's, so the test
reaches the server on 127.0.0.1. Exits with status 77 (CTest's skip code) when it cannot run
here: not root, no unshare or chroot, namespaces refused, or the two packages missing.
"""

import io
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protocol"))
from rexserver import RexServer, children_of, parent_of, wait_until  # noqa: E402

SKIP = 77
BUSYBOX = "/bin/busybox"
BASH_STATIC = "/bin/bash-static"
BINARY = ""
TOKEN = "static-root-token"
# What Docker puts on PATH; only /bin exists in the root.
SANDBOX_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/"}

# Runs inside the new namespaces, before chroot: the container runtime's part. The mounts
# vanish with the mount namespace, so nothing needs undoing.
SETUP_SCRIPT = r"""
set -eu
root=$1
shift
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=755,size=64k tmpfs "$root/dev"
for node in null zero full random urandom tty; do
  touch "$root/dev/$node"
  mount --bind "/dev/$node" "$root/dev/$node"
done
mkdir "$root/dev/pts"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
ln -s /proc/self/fd "$root/dev/fd"
exec "$CHROOT" "$root" "$@"
"""


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


def elf_interpreter(path):
    """The PT_INTERP of a 64-bit ELF file (None for a static executable)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise AssertionError(f"{path} is not a 64-bit ELF file")
    endian = "<" if data[5] == 1 else ">"
    phoff, = struct.unpack_from(endian + "Q", data, 0x20)
    phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
    for i in range(phnum):
        off = phoff + i * phentsize
        p_type, = struct.unpack_from(endian + "I", data, off)
        if p_type == 3:  # PT_INTERP
            p_offset, = struct.unpack_from(endian + "Q", data, off + 8)
            p_filesz, = struct.unpack_from(endian + "Q", data, off + 32)
            return data[p_offset:p_offset + p_filesz].rstrip(b"\0").decode()
    return None


def processes_in(root):
    """Host pids of the live processes whose root directory is `root` (a zombie has none)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/root") == root:
                    found.append(int(name))
            except OSError:
                pass
    return found


def first_process_in(root):
    """The process rooted in `root` whose parent is not: the namespace's PID 1."""
    inside = set(processes_in(root))
    for pid in inside:
        if parent_of(pid) not in inside:
            return pid
    return None


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants_of(pid):
    """{pid: state} of every process below `pid`, zombies included."""
    found = {}
    todo = [pid]
    while todo:
        for child, state in children_of(todo.pop()).items():
            found[child] = state
            todo.append(child)
    return found


def files_under(root):
    files = set()
    for base, _, names in os.walk(root):
        for n in names:
            files.add(os.path.relpath(os.path.join(base, n), root))
    return files


class TestBusyboxRoot(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rex-static-")
        cls.root = root = os.path.join(cls.tmp, "root")
        for d in ["bin", "tmp", "proc", "dev"]:
            os.makedirs(os.path.join(root, d))
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        shutil.copy2(BUSYBOX, os.path.join(root, "bin", "busybox"))
        shutil.copy2(BASH_STATIC, os.path.join(root, "bin", "bash"))
        shutil.copy2(BINARY, os.path.join(root, "bin", "rex-server"))
        for applet in ["sh", "cat"]:
            os.symlink("busybox", os.path.join(root, "bin", applet))
        cls.initial_files = files_under(root)
        env = dict(SANDBOX_ENV, CHROOT=shutil.which("chroot"))
        prefix = [shutil.which("unshare"), "--fork", "--kill-child", "--pid", "--mount",
                  "--propagation", "private", "/bin/sh", "-c", SETUP_SCRIPT, "rex-root", root]
        cls.server = RexServer("/bin/rex-server", token=TOKEN, command_prefix=prefix, env=env)
        # rex-server is the namespace's first process (unshare's child, rooted in `root`), so
        # it is PID 1 there: it stays as the init and serves from a child of its own.
        # (tearDownClass does not run when this fails: end the namespace here.)
        try:
            cls.init_pid = wait_until(lambda: first_process_in(root), 5,
                                      what="rex-server inside the root")
            cls.server_pid = wait_until(lambda: next(iter(children_of(cls.init_pid)), None), 5,
                                        what="the serving child of rex-server's init")
        except BaseException:
            for pid in processes_in(root):
                try:
                    os.kill(pid, signal.SIGKILL)  # PID 1's death ends the whole namespace
                except OSError:
                    pass
            cls.server.kill()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.server.proc.poll() is None:
                os.kill(cls.init_pid, signal.SIGTERM)  # passed on to the server
            rc = cls.server.wait()
            if rc != 0:
                raise AssertionError(f"rex-server exited with status {rc} after SIGTERM; "
                                     f"output: {cls.server.output()!r}")
            try:
                wait_until(lambda: not processes_in(cls.root), 5,
                           what="every process in the root to end")
            except AssertionError:
                raise AssertionError(f"processes left in the root: {processes_in(cls.root)}")
        finally:
            cls.server.kill()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_command(self, command, session="default", **kw):
        return self.server.run(command, session=session, **kw)

    def assertOk(self, reply):
        self.assertEqual(reply.status, 200, reply)
        return reply.json()

    def assertException(self, reply, class_path):
        self.assertEqual(reply.status, 511, reply)
        exc = reply.json()["swerexception"]
        self.assertEqual(set(exc), {"message", "class_path", "traceback", "extra_info"})
        self.assertEqual(exc["class_path"], class_path, exc["message"])
        return exc

    # --- the binary -------------------------------------------------------------------------

    def test_binary_is_statically_linked(self):
        self.assertIsNone(elf_interpreter(BINARY), "rex-server asks for a dynamic loader")
        ldd = subprocess.run(["ldd", BINARY], capture_output=True, text=True, timeout=10)
        self.assertIn("not a dynamic executable", ldd.stdout + ldd.stderr)
        if shutil.which("file"):
            out = subprocess.run(["file", "-b", BINARY], capture_output=True, text=True,
                                 timeout=10).stdout
            self.assertIn("statically linked", out)

    def test_root_holds_only_busybox_bash_and_the_server(self):
        self.assertEqual(self.initial_files, {"bin/busybox", "bin/bash", "bin/rex-server",
                                              "bin/sh", "bin/cat"})
        for name in ["busybox", "bash", "rex-server"]:
            self.assertIsNone(elf_interpreter(os.path.join(self.root, "bin", name)), name)

    # --- the server inside it ---------------------------------------------------------------

    def test_is_alive(self):
        r = self.server.get("/is_alive")
        self.assertEqual((r.status, r.json()), (200, {"is_alive": True, "message": ""}))

    def test_session(self):
        self.assertEqual(self.server.create_session("box"), {"output": "",
                                                             "session_type": "bash"})
        data = self.assertOk(self.run_command("echo hi; cat /proc/version >/dev/null; "
                                              "busybox ls /", session="box"))
        self.assertEqual(data["exit_code"], 0)
        self.assertTrue(data["output"].startswith("hi\n"), data)
        self.assertEqual(set(data["output"].split()), {"hi", "bin", "dev", "proc", "tmp"})
        # bash here is the static one.
        data = self.assertOk(self.run_command("echo $BASH $BASH_VERSION", session="box"))
        self.assertTrue(data["output"].startswith("/bin/bash 5"), data)

        exc = self.assertException(self.run_command("cat /nowhere", session="box"),
                                   "swerex.exceptions.NonZeroExitCodeError")
        self.assertIn("/nowhere", exc["message"])
        data = self.assertOk(self.run_command("cat /nowhere", session="box", check="silent"))
        self.assertEqual(data["exit_code"], 1)

        exc = self.assertException(self.run_command("echo a; (", session="box"),
                                   "swerex.exceptions.BashIncorrectSyntaxError")
        self.assertIn("syntax error", exc["extra_info"]["bash_stderr"])

        self.assertException(self.run_command("busybox sleep 30", session="box", timeout=0.5),
                             "swerex.exceptions.CommandTimeoutError")
        r = self.server.post("/run_in_session", {"session": "box",
                                                 "action_type": "bash_interrupt"})
        self.assertEqual(self.assertOk(r)["exit_code"], 0)
        data = self.assertOk(self.run_command("cd /tmp && pwd", session="box"))
        self.assertEqual(data["output"], "/tmp\n")
        self.assertEqual(self.server.close_session("box"), {"session_type": "bash"})

    def test_execute(self):
        r = self.server.post("/execute", {"command": ["busybox", "true"]})
        self.assertEqual((r.status, r.json()), (200, {"stdout": "", "stderr": "",
                                                      "exit_code": 0}))
        r = self.server.post("/execute", {"command": ["busybox", "false"]})
        self.assertEqual((r.status, r.json()), (200, {"stdout": "", "stderr": "",
                                                      "exit_code": 1}))
        r = self.server.post("/execute", {"command": "echo $0; echo err >&2; exit 5",
                                          "shell": True})
        self.assertEqual((r.status, r.json()), (200, {"stdout": "/bin/sh\n", "stderr": "err\n",
                                                      "exit_code": 5}))
        r = self.server.post("/execute", {"command": ["/bin/busybox", "env"], "env": {"A": "b"}})
        self.assertEqual((r.status, r.json()), (200, {"stdout": "A=b\n", "stderr": "",
                                                      "exit_code": 0}))

    def test_files(self):
        r = self.server.post("/write_file", {"content": "in the box\n", "path": "/tmp/a/b.txt"})
        self.assertEqual((r.status, r.json()), (200, {}))
        with open(os.path.join(self.root, "tmp", "a", "b.txt")) as f:
            self.assertEqual(f.read(), "in the box\n")
        r = self.server.post("/read_file", {"path": "/tmp/a/b.txt"})
        self.assertEqual((r.status, r.json()), (200, {"content": "in the box\n"}))
        self.assertException(self.server.post("/read_file", {"path": "/tmp/none"}),
                             "builtins.FileNotFoundError")

    def test_upload(self):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("pkg/mod.py", "VALUE = 1\n")
            z.writestr("README", "hello\n")
        r = self.server.upload(buf.getvalue(), "/tmp/unpacked", unzip=True,
                               filename="zipped_transfer.zip", content_type="application/zip")
        self.assertEqual((r.status, r.json()), (200, {}))
        r = self.server.upload(b"\x00raw\xff", "/tmp/raw/file.bin", unzip=False)
        self.assertEqual((r.status, r.json()), (200, {}))
        data = self.assertOk(self.server.post("/execute", {
            "command": "cat /tmp/unpacked/pkg/mod.py /tmp/unpacked/README; "
                       "busybox wc -c < /tmp/raw/file.bin", "shell": True}))
        self.assertEqual(data, {"stdout": "VALUE = 1\nhello\n5\n", "stderr": "", "exit_code": 0})

    # PID 1 of the namespace is rex-server's init, as in a container that starts rex-server
    # directly. Closing a session kills its background jobs, which bash's end had reparented
    # to PID 1: the init reaps them, so nothing is left below it but the server.
    def test_killed_jobs_do_not_stay_zombies(self):
        def jobs_and_zombies():
            """{host pid: state} below the init: the session's sleeps, and any zombie."""
            return {pid: state for pid, state in descendants_of(self.init_pid).items()
                    if state == "Z" or "sleep 30" in command_line(pid)}

        self.server.create_session("jobs")
        self.assertOk(self.run_command("busybox sleep 300 & busybox sleep 301 &", session="jobs"))
        # The jobs are bash's forks until they have exec'd busybox: a moment on a busy machine.
        try:
            wait_until(lambda: len(jobs_and_zombies()) == 2, 3, what="the two jobs to start")
        except AssertionError:
            self.fail(f"not two jobs below rex-server's init: {descendants_of(self.init_pid)}")
        self.server.close_session("jobs")
        try:
            wait_until(lambda: not jobs_and_zombies(), 3,
                       what="the session's processes to be reaped")
        except AssertionError:
            self.fail(f"left below rex-server's init (host pid: state): {jobs_and_zombies()}")

    def test_the_init_passes_signals_on(self):
        # A signal rex-server ignores reaches the server and changes nothing (SIGWINCH's default
        # is to ignore); the server still answers.
        os.kill(self.init_pid, signal.SIGWINCH)
        self.assertOk(self.server.get("/is_alive"))
        self.assertEqual(parent_of(self.server_pid), self.init_pid)


def main():
    global BINARY
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = sys.argv.pop(1)
    BINARY = os.environ.get("REX_SERVER", BINARY)
    if not BINARY or not os.access(BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex-server [unittest args]; got {BINARY!r}")
    BINARY = os.path.abspath(BINARY)
    if os.geteuid() != 0:
        skip("needs root (mount, chroot and new namespaces)")
    for tool in ["unshare", "chroot", "mount"]:
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    for path, package in [(BUSYBOX, "busybox-static"), (BASH_STATIC, "bash-static")]:
        if not os.path.exists(path):
            skip(f"{path} is missing: install Debian's {package} (listed in scripts/common.sh)")
        if elf_interpreter(path) is not None:
            skip(f"{path} is not a static executable")
    probe = subprocess.run(["unshare", "--fork", "--pid", "--mount", "--propagation", "private",
                            "mount", "-t", "proc", "proc", "/proc"],
                           capture_output=True, text=True, timeout=20)
    if probe.returncode != 0:
        skip(f"cannot create mount and pid namespaces here: {probe.stderr.strip()}")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
