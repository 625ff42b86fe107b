"""Starts a rex-server executable and talks raw HTTP to it (Python standard library only).

Shared by the protocol and static-binary tests: nothing here goes through a rex client, so the
tests see exactly the bytes a foreign client (SWE-ReX's RemoteRuntime, curl) would see.
"""

import http.client
import io
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import uuid

# Every wait in these tests is bounded by one of these, so a hang fails instead of blocking.
START_TIMEOUT = 15.0
STOP_TIMEOUT = 15.0
HTTP_TIMEOUT = 30.0

LISTEN_RE = re.compile(r"listening on (http://[0-9.]+:(\d+)|http\+unix://\S+)")


class Reply:
    """One HTTP answer: status, headers (lower-case names) and the raw body."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise AssertionError(
                f"answer {self.status} is not JSON: {self.body[:500]!r}") from e

    def __repr__(self):
        return f"Reply({self.status}, {self.body[:300]!r})"


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix domain socket."""

    def __init__(self, path, timeout=HTTP_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


class RexServer:
    """A running rex-server process.

    `command_prefix` lets a caller run the executable through another program (unshare,
    chroot); `binary` is then the path as that program sees it. `preexec_fn` runs in the child
    before the executable starts (to set resource limits).
    """

    def __init__(self, binary, token="secret", args=(), unix_socket=None, command_prefix=(),
                 env=None, host="127.0.0.1", preexec_fn=None, token_in_env=False):
        self.token = token
        self.unix_socket = unix_socket
        self.host = host
        self.port = None
        self.lines = []  # everything the server printed (stdout and stderr), for diagnostics
        self._lines_lock = threading.Lock()
        self._listen = queue.Queue()
        command = [*command_prefix, binary, "--log-level", "info"]
        if token_in_env:  # REX_AUTH_TOKEN, as the deployments pass it
            env = {**(os.environ if env is None else env), "REX_AUTH_TOKEN": token}
        else:
            command += ["--auth-token", token]
        if unix_socket:
            command += ["--unix-socket", unix_socket]
        else:
            command += ["--host", host, "--port", "0"]
        command += list(args)
        self.command = command
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=env,
                                     preexec_fn=preexec_fn)
        self._readers = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, True), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, False), daemon=True),
        ]
        for t in self._readers:
            t.start()
        try:
            found = self._listen.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.kill()
            raise AssertionError(f"rex-server did not say where it listens within "
                                 f"{START_TIMEOUT} s; output: {self.output()!r}")
        if found is None:
            self.proc.wait(timeout=STOP_TIMEOUT)
            raise AssertionError(f"rex-server exited with status {self.proc.returncode} "
                                 f"before listening; output: {self.output()!r}")
        if not unix_socket:
            self.port = int(found)

    def _drain(self, stream, look_for_listen):
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            with self._lines_lock:
                self.lines.append(line)
            if look_for_listen:
                m = LISTEN_RE.search(line)
                if m:
                    self._listen.put(m.group(2) if m.group(2) else m.group(1))
        if look_for_listen:
            self._listen.put(None)

    def output(self):
        with self._lines_lock:
            return "".join(self.lines)

    @property
    def pid(self):
        return self.proc.pid

    # --- connections ------------------------------------------------------------------------

    def connection(self, timeout=HTTP_TIMEOUT):
        if self.unix_socket:
            return UnixHTTPConnection(self.unix_socket, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def raw_socket(self, timeout=HTTP_TIMEOUT):
        if self.unix_socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(self.unix_socket)
            return s
        return socket.create_connection((self.host, self.port), timeout=timeout)

    # --- requests ---------------------------------------------------------------------------

    def headers(self, extra=None, auth=True):
        h = {}
        if auth and self.token:
            h["X-API-Key"] = self.token
        if extra:
            h.update(extra)
        return h

    def request(self, method, path, body=None, headers=None, auth=True, timeout=HTTP_TIMEOUT):
        """One request on a fresh connection, as SWE-ReX's client does it."""
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=self.headers(headers, auth))
            resp = conn.getresponse()
            return Reply(resp.status, resp.getheaders(), resp.read())
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, payload=None, request_id=True, headers=None, **kw):
        """A JSON POST; like SWE-ReX's client it carries a fresh X-Request-ID by default."""
        h = {"Content-Type": "application/json"}
        if request_id is True:
            h["X-Request-ID"] = str(uuid.uuid4())
        elif request_id:
            h["X-Request-ID"] = request_id
        if headers:
            h.update(headers)
        body = None if payload is None else json.dumps(payload).encode()
        return self.request("POST", path, body=body, headers=h, **kw)

    def ok(self, path, payload=None, **kw):
        """A POST that must answer 200; returns the JSON body."""
        r = self.post(path, payload, **kw)
        if r.status != 200:
            raise AssertionError(f"POST {path} {payload!r} answered {r.status}: {r.body!r}")
        return r.json()

    # Bodies as SWE-ReX 1.4's client sends them (pydantic model_dump: every field present).
    def create_session(self, session="default", startup_source=(), startup_timeout=1.0):
        return self.ok("/create_session", {"startup_source": list(startup_source),
                                           "session": session, "session_type": "bash",
                                           "startup_timeout": startup_timeout})

    @staticmethod
    def bash_action(command, session="default", timeout=None, check="raise", error_msg="",
                    expect=(), is_interactive_command=False, is_interactive_quit=False):
        return {"command": command, "session": session, "timeout": timeout,
                "is_interactive_command": is_interactive_command,
                "is_interactive_quit": is_interactive_quit, "check": check,
                "error_msg": error_msg, "expect": list(expect), "action_type": "bash"}

    def run(self, command, **kw):
        """run_in_session; returns the Reply (any status)."""
        timeout = kw.pop("http_timeout", HTTP_TIMEOUT)
        request_id = kw.pop("request_id", True)
        return self.post("/run_in_session", self.bash_action(command, **kw),
                         request_id=request_id, timeout=timeout)

    def upload(self, data, target_path, unzip, filename="payload.bin",
               content_type="application/octet-stream"):
        """POST /upload with the form SWE-ReX's client sends: file, target_path, unzip."""
        body, form_type = multipart([("file", (filename, data, content_type)),
                                     ("target_path", target_path),
                                     ("unzip", "true" if unzip else "false")])
        return self.request("POST", "/upload", body=body, headers={"Content-Type": form_type})

    def close_session(self, session="default"):
        return self.ok("/close_session", {"session": session, "session_type": "bash"})

    # --- lifecycle --------------------------------------------------------------------------

    def terminate(self, timeout=STOP_TIMEOUT):
        """SIGTERM, then the exit status (killing the process if it does not stop in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=min(timeout, 5))
            except subprocess.TimeoutExpired:
                # ThreadSanitizer's runtime now and then loses a signal it has taken from the
                # kernel (a server built with it, started and stopped at once, never logs it; 1
                # in 4-6 tries here, 0 in 150 without it). A server that logged it is only slow
                # and must not get a second one (which means "stop now").
                if "SIGTERM" not in self.output():
                    self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout=STOP_TIMEOUT):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"rex-server did not exit within {timeout} s; "
                                 f"output: {self.output()!r}")
        self._finish()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self._finish()

    def _finish(self):
        for t in self._readers:
            t.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if not stream.closed:
                stream.close()


def wait_until(predicate, timeout, interval=0.02, what="a condition"):
    """Polls `predicate` until it is true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def process_stat(pid):
    """(state, parent pid) of a process from /proc, None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def process_state(pid):
    """The one-letter state of a process ('R', 'S', 'Z', ...), None when it does not exist."""
    stat = process_stat(pid)
    return stat[0] if stat else None


def parent_of(pid):
    stat = process_stat(pid)
    return stat[1] if stat else None


def children_of(pid):
    """{child pid: state} for every child of `pid`, zombies included."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = process_stat(int(name))
            if stat and stat[1] == pid:
                found[int(name)] = stat[0]
    return found


def is_gone(pid):
    """True when `pid` no longer runs (absent, or a zombie waiting for a reaper)."""
    return process_state(pid) in (None, "Z", "X")


def multipart(fields, boundary=None):
    """A multipart/form-data body as aiohttp's FormData writes it.

    `fields`: (name, value) for text (str, or bytes sent as they are), (name, (filename, bytes,
    content_type)) for files.
    """
    boundary = boundary or uuid.uuid4().hex
    out = io.BytesIO()
    for name, value in fields:
        out.write(f"--{boundary}\r\n".encode())
        if isinstance(value, tuple):
            filename, data, ctype = value
            out.write(f'Content-Type: {ctype}\r\nContent-Disposition: form-data; name="{name}"; '
                      f'filename="{filename}"\r\n\r\n'.encode())
            out.write(data)
        else:
            out.write(f'Content-Type: text/plain; charset=utf-8\r\nContent-Disposition: '
                      f'form-data; name="{name}"\r\n\r\n'.encode())
            out.write(value if isinstance(value, bytes) else value.encode())
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"
