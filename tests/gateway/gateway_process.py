"""Starts a `rex gateway` process and talks raw HTTP to it (Python standard library only).

Nothing here goes through a rex client: the tests see exactly the bytes curl or an agent's HTTP
library would see. Every wait is bounded by a timeout, so a hang fails instead of blocking.
"""

import http.client
import json
import os
import re
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

# The process helpers the protocol tests use (tests/protocol/rexserver.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protocol"))
from rexserver import is_gone, multipart, wait_until  # noqa: E402,F401

START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0
HTTP_TIMEOUT = 30.0


def free_port(host="127.0.0.1"):
    """A TCP port nothing listens on right now (bound to port 0, read, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def process_stat(pid):
    """(state, parent pid, process group) of a process from /proc; None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def processes_naming(text):
    """{pid: command line} of every live process whose command line contains `text`."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            line = cmdline(int(entry))
            if text in line and not is_gone(int(entry)):
                found[int(entry)] = line
    return found


def read_sandbox_json(sandboxes, name):
    """The sandbox.json of the local provider's sandbox `name` under `sandboxes`; None while it
    is missing or half written."""
    try:
        with open(os.path.join(sandboxes, name, "sandbox.json")) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def is_spare(info):
    """Whether a sandbox.json (read_sandbox_json) is a spare's that no session has taken."""
    return bool(info and info.get("spare") and not info.get("session_id"))


class Gateway:
    """A running `rex gateway --listen 127.0.0.1:PORT --storage DIR [args]`.

    Its stdout and stderr go to a log file (`log_path`, next to the storage folder unless
    given); `output()` reads it. `headers` are sent with every request (an API key, say).
    """

    _count = 0
    _count_lock = threading.Lock()

    def __init__(self, binary, storage_dir, args=(), env=None, port=None, log_path=None,
                 headers=None):
        self.binary = binary
        self.storage = os.path.abspath(storage_dir)
        self.host = "127.0.0.1"
        # Without a port the gateway binds port 0 and its log line says which it got: a port
        # picked here and handed over could be taken by another test in between.
        self._port = port
        self.headers = dict(headers or {})
        with Gateway._count_lock:
            Gateway._count += 1
            n = Gateway._count
        self.log_path = log_path or os.path.join(os.path.dirname(self.storage),
                                                 f"gateway-{n}-{port or 'any'}.log")
        self.command = [binary, "gateway", "--listen", f"{self.host}:{port or 0}",
                        "--storage", self.storage, *args]
        self._log = open(self.log_path, "ab")
        self._log_start = self._log.tell()  # this run's output starts here
        self.proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)

    @property
    def port(self):
        """The port it listens on; waits for its log line when it bound port 0."""
        if self._port is None:
            self._port = self._bound_port(START_TIMEOUT)
        return self._port

    def _bound_port(self, timeout):
        pattern = re.compile(rf"listening on http://{re.escape(self.host)}:(\d+)")
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(self._log_start)
                    found = pattern.search(f.read().decode("utf-8", "replace"))
            except FileNotFoundError:
                found = None
            if found:
                return int(found.group(1))
            if not self.running():
                raise AssertionError(f"rex gateway exited with status {self.proc.returncode} "
                                     f"before it was ready; output: {self.output_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"rex gateway did not say where it listens within {timeout} "
                                     f"s; output: {self.output_tail()}")
            time.sleep(0.02)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def running(self):
        return self.proc.poll() is None

    def output(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def output_tail(self, n=4000):
        text = self.output()
        return text if len(text) <= n else "..." + text[-n:]

    # --- readiness --------------------------------------------------------------------------

    def wait_ready(self, timeout=START_TIMEOUT):
        """Polls GET /readyz until it answers 200; returns its JSON body."""
        deadline = time.monotonic() + timeout
        if self._port is None:
            self._port = self._bound_port(timeout)
        last = None
        while True:
            if not self.running():
                raise AssertionError(f"rex gateway exited with status {self.proc.returncode} "
                                     f"before it was ready; output: {self.output_tail()}")
            try:
                status, _, body = self.request("GET", "/readyz", timeout=2.0)
                last = (status, body[:300])
                if status == 200:
                    return json.loads(body)
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
            if time.monotonic() > deadline:
                raise AssertionError(f"rex gateway not ready within {timeout} s (last answer "
                                     f"{last!r}); output: {self.output_tail()}")
            time.sleep(0.05)

    # --- requests ---------------------------------------------------------------------------

    def connection(self, timeout=HTTP_TIMEOUT):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT):
        """One request on a fresh connection: (status, headers with lower-case names, body).

        `body`: None (no body), bytes (sent as they are), anything else is sent as JSON.
        """
        h = dict(self.headers)
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if headers:
            h.update(headers)
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None, timeout=HTTP_TIMEOUT):
        """request(), answer parsed as JSON: (status, data)."""
        status, _, data = self.request(method, path, body, headers, timeout)
        try:
            return status, json.loads(data)
        except ValueError:
            raise AssertionError(f"{method} {path} answered {status} with a body that is not "
                                 f"JSON: {data[:500]!r}") from None

    # --- stopping ---------------------------------------------------------------------------

    def kill9(self):
        """SIGKILL by pid, then reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT)
        self._close_log()

    def terminate(self, timeout=STOP_TIMEOUT):
        """SIGTERM, wait up to `timeout` s; the exit status. Kills it and fails when it hangs."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"rex gateway did not exit within {timeout} s of SIGTERM; "
                                 f"output: {self.output_tail()}") from None
        self._close_log()
        return rc

    def _close_log(self):
        if not self._log.closed:
            self._log.close()


class EventStream:
    """GET /api/events read on a thread of its own: parsed events arrive in a queue.

    Each event: {"id": str|None, "event": str|None, "data": parsed JSON (or the raw str)}.
    Comment lines (":...") are counted in `comments`.
    """

    def __init__(self, gateway, headers=None, path="/api/events", timeout=HTTP_TIMEOUT):
        self.events = queue.Queue()
        self.comments = 0
        self.error = None
        self.conn = gateway.connection(timeout)
        h = dict(gateway.headers)
        h.update(headers or {})
        self.conn.request("GET", path, headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.content_type = self.resp.getheader("Content-Type", "")
        if self.status != 200:
            self.body = self.resp.read()
            self.conn.close()
            self.thread = None
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        event = {"id": None, "event": None, "data": []}
        try:
            while True:
                raw = self.resp.readline()
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if event["data"] or event["event"] or event["id"]:
                        text = "\n".join(event["data"])
                        try:
                            event["data"] = json.loads(text)
                        except ValueError:
                            event["data"] = text
                        self.events.put(event)
                    event = {"id": None, "event": None, "data": []}
                    continue
                if line.startswith(":"):
                    self.comments += 1
                    continue
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "data":
                    event["data"].append(value)
                elif name in ("id", "event"):
                    event[name] = value
        except Exception as e:  # closed under us, or a timeout
            self.error = e
        finally:
            self.events.put(None)  # the end of the stream

    def next(self, timeout):
        """The next event, or None at the end of the stream; fails after `timeout` s."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout} s") from None

    def collect_until(self, predicate, timeout, what="an event"):
        """Events up to and including the first for which `predicate` is true."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                     f"got {got!r}")
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if ev is None:
                raise AssertionError(f"the event stream ended ({self.error!r}) before {what}; "
                                     f"got {got!r}")
            got.append(ev)
            if predicate(ev):
                return got

    def drain(self, quiet):
        """Every event that arrives until none has for `quiet` seconds."""
        got = []
        while True:
            try:
                ev = self.events.get(timeout=quiet)
            except queue.Empty:
                return got
            if ev is None:
                return got
            got.append(ev)

    def close(self):
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        if self.thread is not None:
            self.thread.join(timeout=5)
