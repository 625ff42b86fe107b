#!/usr/bin/env python3
"""A stateful stand-in for Daytona's cloud, on loopback, for the tests of rex's `daytona` deployment.

usage: daytona_fake.py --port PORT --api-key KEY [--state-dir DIR] [--start-delay SECONDS]
                       [--toolbox-url URL]

It answers the part of Daytona's API that a client needs to run a server in a sandbox, with the
paths, fields, status codes and error bodies of Daytona's OpenAPI documents (the main API's and the
toolbox's, see /work/research/daytona-api.md):

  GET    /config                                      (no auth)
  POST   /sandbox                                     -> 200 Sandbox (state creating|pending_build)
  GET    /sandbox                                     -> 200 {items, nextCursor}
  GET    /sandbox/{idOrName}                          -> 200 Sandbox | 404 (also once destroyed)
  DELETE /sandbox/{idOrName}                          -> 200 Sandbox (desiredState destroyed) | 409
  POST   /sandbox/{idOrName}/start|stop               -> 200 Sandbox
  GET    /sandbox/{idOrName}/ports/{port}/preview-url -> 200 {sandboxId, url, token}
  GET    /sandbox/{id}/toolbox-proxy-url              -> 200 {url}
  and, under the toolbox URL `{toolboxProxyUrl}/{sandboxId}` (by default http://HOST:PORT/toolbox):
  POST /process/session (201), GET /process/session, GET|DELETE /process/session/{id} (200|204),
  POST /process/session/{id}/exec (200 sync, 202 runAsync), GET .../command/{cmdId}[/logs],
  POST /process/execute, POST /files/bulk-upload, POST /files/upload-v2, GET /files/download,
  POST /files/bulk-download,
  GET /work-dir, GET /user-home-dir.
Paths are also accepted under a leading /api (Daytona Cloud's https://app.daytona.io/api).

Every call but /config needs `Authorization: Bearer KEY`; a wrong key gets 401 and the API's error
body {path, timestamp, statusCode, error, message}. Toolbox errors have the daemon's ErrorResponse
shape {message, path, statusCode, timestamp, method, code}.

A sandbox goes creating -> starting -> started (a snapshot) or pending_build -> building_snapshot ->
starting -> started (an image, i.e. buildInfo) over --start-delay seconds (default 1), so a client has
to wait. A snapshot or Dockerfile that contains "fake-fail" ends in build_failed (or error) instead.
Deleting makes it destroying, then destroyed (GET answers 404 from then on); the API refuses (409)
while a state change is in progress, as Daytona does.

A sandbox is a directory of its own (DIR/<id>, also its HOME and working directory) and a loopback
address of its own, 127.R.x.y (R random for each fake, so that fakes side by side keep apart), which
its commands find in the environment variable DAYTONA_FAKE_HOST. A session command runs as `bash -c
COMMAND` there, in a process group of its own, with the sandbox's env vars; in the command, the
literal text 0.0.0.0 is replaced by that address (a server that binds every address in a real sandbox
binds the sandbox's own here). Deleting or stopping the sandbox kills its process groups, and any
process that left them but still has the sandbox's DAYTONA_SANDBOX_ID in its environment. Sessions
do not keep a shell: each command is its own bash. Files: relative paths are taken from the
sandbox's directory; absolute paths must lie inside it.

Preview links: for each (sandbox, port) the fake listens on a free loopback port of its own and
forwards HTTP (keep-alive, chunked bodies, upgrades) to 127.0.0.N:port. Each request must carry the
sandbox's token in `X-Daytona-Preview-Token` (or `Authorization: Bearer KEY`, or the query parameter
DAYTONA_SANDBOX_AUTH_KEY), as Daytona's proxy wants, unless the sandbox is public; without it the
answer is Daytona's 307 to a login page (here /_fake/preview-auth on the API port, which answers 401).
Nothing listening on the port: 502.

Not Daytona: GET /_fake/sandboxes lists what remains (every sandbox not destroyed, or with live
process groups or open previews; ?all=1: every sandbox), with its state, address, directory,
previews, live process groups ("processes") and processes outside them ("strays"), so that tests
can check that nothing leaked; POST /_fake/throttle?count=N makes the next N calls of the API or
the toolbox answer 429, as Daytona's rate limiter does, so that clients' retries can be tested. The fake prints `READY <port>` on stdout when it listens, logs each
request on stderr, and on SIGTERM or SIGINT kills every process it started and exits 0.
Python 3.11 standard library only.
"""
import argparse
import datetime
import email.parser
import email.policy
import http.server
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

ORG_ID = "00000000-0000-4000-8000-00000000fa4e"
DEFAULT_SNAPSHOT = "daytonaio/sandbox:fake"
TRANSITIONAL = {"creating", "pending_build", "building_snapshot", "pulling_snapshot", "starting",
                "stopping", "destroying", "restoring"}
REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 500: "Internal Server Error",
           502: "Bad Gateway"}
DAEMON_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
                409: "CONFLICT", 500: "INTERNAL_SERVER_ERROR"}


def log(message):
    sys.stderr.write(f"[daytona-fake {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class ApiError(Exception):
    def __init__(self, status, message, code=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


# --- Sandboxes ----------------------------------------------------------------------------------

class Sandbox:
    def __init__(self, fake, request):
        self.id = str(uuid.uuid4())
        self.name = request.get("name") or self.id
        self.user = request.get("user") or "daytona"
        self.env = dict(request.get("env") or {})
        self.labels = dict(request.get("labels") or {})
        self.public = bool(request.get("public", False))
        self.target = request.get("target") or "us"
        self.cpu = request.get("cpu") or 1
        self.gpu = request.get("gpu") or 0
        self.memory = request.get("memory") or 1
        self.disk = request.get("disk") or 3
        self.auto_stop = request.get("autoStopInterval", 15)
        self.auto_archive = request.get("autoArchiveInterval", 10080)
        self.auto_delete = request.get("autoDeleteInterval", -1)
        self.network_block_all = bool(request.get("networkBlockAll", False))
        build = request.get("buildInfo")
        self.snapshot = request.get("snapshot")
        self.build_info = None
        if build:
            ref = "fake-build-" + secrets.token_hex(6)
            self.build_info = {"dockerfileContent": build.get("dockerfileContent", ""),
                               "contextHashes": list(build.get("contextHashes") or []),
                               "createdAt": now_iso(), "updatedAt": now_iso(), "snapshotRef": ref}
            self.snapshot = ref
        elif not self.snapshot:
            self.snapshot = DEFAULT_SNAPSHOT
        self.token = secrets.token_urlsafe(24)
        self.created_at = now_iso()
        self.updated_at = self.created_at
        self.address = fake.next_address()
        self.dir = os.path.join(fake.state_dir, self.id)
        os.makedirs(self.dir)
        self.error_reason = None
        self.desired = "started"
        self.state = None
        self.timeline = []  # (monotonic time, state, error reason) still to come
        self.sessions = {}  # session id -> {"commands": [Command...]}
        self.commands = {}  # command id -> Command
        self.processes = []  # Popen of every command, in its own process group
        self.previews = {}  # port -> PreviewProxy
        fails = "fake-fail" in (self.snapshot or "") or (
            self.build_info is not None and "fake-fail" in self.build_info["dockerfileContent"])
        d = fake.start_delay
        if self.build_info is not None:
            steps = [(0, "pending_build"), (d / 3, "building_snapshot")]
            steps += [(d, "build_failed")] if fails else [(2 * d / 3, "starting"), (d, "started")]
        else:
            steps = [(0, "creating")]
            steps += [(d, "error")] if fails else [(d / 2, "starting"), (d, "started")]
        self.schedule(steps, "fake-fail in the image: the build failed" if fails else None)

    def schedule(self, steps, reason=None):
        t0 = time.monotonic()
        self.timeline = [(t0 + dt, state, reason) for dt, state in steps]
        self.advance()

    def advance(self):
        now = time.monotonic()
        while self.timeline and self.timeline[0][0] <= now:
            _, state, reason = self.timeline.pop(0)
            if state != self.state:
                self.state = state
                self.updated_at = now_iso()
                if state in ("error", "build_failed"):
                    self.error_reason = reason
                    self.desired = "started"

    def pending(self):
        return bool(self.timeline) or self.state in TRANSITIONAL

    def dto(self, fake, full=True):
        out = {
            "id": self.id, "organizationId": ORG_ID, "name": self.name, "snapshot": self.snapshot,
            "user": self.user, "labels": self.labels, "public": self.public,
            "networkBlockAll": self.network_block_all, "target": self.target, "cpu": self.cpu,
            "gpu": self.gpu, "memory": self.memory, "disk": self.disk, "state": self.state,
            "desiredState": self.desired, "backupState": "None",
            "autoStopInterval": self.auto_stop, "autoArchiveInterval": self.auto_archive,
            "autoDeleteInterval": self.auto_delete, "createdAt": self.created_at,
            "updatedAt": self.updated_at, "lastActivityAt": self.updated_at,
            "sandboxClass": "container", "daemonVersion": "fake", "runnerId": "fake-runner",
            "toolboxProxyUrl": fake.toolbox_url,
        }
        if self.error_reason:
            out["errorReason"] = self.error_reason
            out["recoverable"] = False
        if full:
            out["env"] = self.env
            out["volumes"] = []
            if self.build_info is not None:
                out["buildInfo"] = self.build_info
        return out

    def live_groups(self):
        live = []
        for proc in self.processes:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)
                live.append(proc.pid)
            except (ProcessLookupError, PermissionError):
                pass
        return live

    def strays(self):
        """Processes of the sandbox that left its process groups (setsid, daemons): those whose
        environment still names the sandbox."""
        marker = f"DAYTONA_SANDBOX_ID={self.id}".encode()
        groups = set(self.live_groups())
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker not in f.read().split(b"\0"):
                        continue
                if os.getpgid(int(entry)) not in groups:
                    found.append(int(entry))
            except OSError:
                pass
        return found

    def kill_all(self):
        for proc in self.processes:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while self.live_groups() and time.monotonic() < deadline:
            time.sleep(0.05)
        for pgid in self.live_groups():
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self.strays():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.processes:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        for preview in self.previews.values():
            preview.close()
        self.previews.clear()


class Fake:
    def __init__(self, args):
        self.api_key = args.api_key
        self.start_delay = args.start_delay
        self.own_state_dir = args.state_dir is None
        self.state_dir = args.state_dir or tempfile.mkdtemp(prefix="daytona-fake-")
        os.makedirs(self.state_dir, exist_ok=True)
        self.port = None
        self.toolbox_url_arg = args.toolbox_url
        self.toolbox_url = None
        self.lock = threading.RLock()
        self.sandboxes = {}  # id -> Sandbox (destroyed ones stay, for /_fake/sandboxes)
        self.addresses = 0
        self.address_octet = random.randrange(16, 240)
        self.throttle = 0  # calls still to answer 429 (POST /_fake/throttle)

    def next_address(self):
        # 127.R.x.y, R random for each fake: fakes running side by side (tests run in parallel)
        # give their sandboxes different addresses, and so the same ports.
        n = self.addresses
        self.addresses += 1
        return f"127.{self.address_octet}.{n // 250}.{2 + n % 250}"

    def find(self, id_or_name, destroyed_too=False):
        for sb in self.sandboxes.values():
            sb.advance()
        for sb in self.sandboxes.values():
            if sb.id == id_or_name and (destroyed_too or sb.state != "destroyed"):
                return sb
        for sb in self.sandboxes.values():
            if sb.name == id_or_name and sb.state != "destroyed":
                return sb
        raise ApiError(404, f"Sandbox with ID or name {id_or_name} not found")

    def shutdown(self):
        with self.lock:
            for sb in self.sandboxes.values():
                sb.kill_all()
        if self.own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)


FAKE = None


# --- Preview proxy ------------------------------------------------------------------------------

class PreviewProxy:
    """Listens on a free loopback port and forwards HTTP/1.1 to the sandbox's address and port,
    checking Daytona's preview token on every request."""

    def __init__(self, sandbox, port):
        self.sandbox = sandbox
        self.target = (sandbox.address, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        self.conns = set()
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def close(self):
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for c in list(self.conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def accept_loop(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.add(conn)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def authorized(self, headers, query):
        sb = self.sandbox
        if sb.public:
            return True
        token = headers.get("x-daytona-preview-token")
        if token is not None:
            return secrets.compare_digest(token, sb.token)
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer ") and secrets.compare_digest(auth[7:].strip(), FAKE.api_key):
            return True
        for value in query.get("DAYTONA_SANDBOX_AUTH_KEY", []):
            if secrets.compare_digest(value, sb.token):
                return True
        return False

    def serve(self, client):
        reader = client.makefile("rb")
        upstream = None
        upreader = None
        try:
            while True:
                head = read_head(reader)
                if head is None:
                    return
                request_line, headers, raw_headers = head
                parts = request_line.split(" ")
                if len(parts) != 3:
                    return
                method, target, version = parts
                split = urllib.parse.urlsplit(target)
                query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
                if not self.authorized(headers, query):
                    drain_body(reader, headers, request=True)
                    location = (f"http://127.0.0.1:{FAKE.port}/_fake/preview-auth?sandbox="
                                f"{self.sandbox.id}&port={self.target[1]}")
                    log(f"preview {self.sandbox.id}:{self.target[1]} {method} {split.path}: "
                        f"no valid preview token -> 307")
                    client.sendall((f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\n"
                                    "Content-Length: 0\r\n\r\n").encode())
                    if headers.get("connection", "").lower() == "close":
                        return
                    continue
                # Daytona's proxy drops what authenticated the request before it forwards it.
                if "DAYTONA_SANDBOX_AUTH_KEY" in query:
                    query.pop("DAYTONA_SANDBOX_AUTH_KEY")
                    target = urllib.parse.urlunsplit(
                        ("", "", split.path, urllib.parse.urlencode(query, doseq=True), ""))
                kept = []
                for name, value in raw_headers:
                    low = name.lower()
                    if low == "x-daytona-preview-token":
                        continue
                    if low == "authorization" and value.startswith("Bearer ") and \
                            value[7:].strip() == FAKE.api_key:
                        continue
                    kept.append((name, value))
                if upstream is None:
                    try:
                        upstream = socket.create_connection(self.target, timeout=10)
                        upstream.settimeout(None)
                    except OSError as e:
                        drain_body(reader, headers, request=True)
                        body = json.dumps({"statusCode": 502, "error": "Bad Gateway",
                                           "message": f"no service on port {self.target[1]}: {e}"})
                        client.sendall((f"HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json"
                                        f"\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
                        if headers.get("connection", "").lower() == "close":
                            return
                        continue
                    upreader = upstream.makefile("rb")
                out = [f"{method} {target} {version}\r\n".encode()]
                out += [f"{n}: {v}\r\n".encode() for n, v in kept]
                upstream.sendall(b"".join(out) + b"\r\n")
                copy_body(reader, upstream, headers, request=True)
                while True:
                    rhead = read_head(upreader)
                    if rhead is None:
                        return
                    status_line, rheaders, rraw = rhead
                    status = int(status_line.split(" ")[1])
                    client.sendall(status_line.encode() + b"\r\n" + b"".join(
                        f"{n}: {v}\r\n".encode() for n, v in rraw) + b"\r\n")
                    if status == 101:
                        splice(client, reader, upstream, upreader)
                        return
                    if 100 <= status < 200:
                        continue
                    break
                if method == "HEAD" or status in (204, 304):
                    pass
                elif not copy_body(upreader, client, rheaders, request=False):
                    return  # the body ran until the upstream closed
                if rheaders.get("connection", "").lower() == "close" or \
                        headers.get("connection", "").lower() == "close":
                    return
        except (OSError, ValueError):
            return
        finally:
            self.conns.discard(client)
            for s in (client, upstream):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass


def read_head(reader):
    """The start line and headers of an HTTP message, or None at the end of the stream."""
    line = reader.readline(65537)
    while line in (b"\r\n", b"\n"):
        line = reader.readline(65537)
    if not line:
        return None
    start = line.decode("latin-1").rstrip("\r\n")
    headers, raw = {}, []
    while True:
        h = reader.readline(65537)
        if not h or h in (b"\r\n", b"\n"):
            break
        name, _, value = h.decode("latin-1").rstrip("\r\n").partition(":")
        value = value.strip()
        raw.append((name, value))
        headers[name.strip().lower()] = value
    return start, headers, raw


def copy_body(reader, sink, headers, request):
    """Copies one message body; False when it was delimited by the end of the stream."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = reader.readline(65537)
            if not size_line:
                raise ValueError("truncated chunked body")
            sink.sendall(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    t = reader.readline(65537)
                    sink.sendall(t)
                    if t in (b"\r\n", b"\n", b""):
                        return True
            copy_exact(reader, sink, size + 2)
    if "content-length" in headers:
        copy_exact(reader, sink, int(headers["content-length"]))
        return True
    if request:
        return True
    while True:
        data = reader.read1(65536)
        if not data:
            return False
        sink.sendall(data)


def copy_exact(reader, sink, n):
    while n > 0:
        data = reader.read(min(n, 65536))
        if not data:
            raise ValueError("truncated body")
        sink.sendall(data)
        n -= len(data)


def read_chunked(reader):
    parts = []
    while True:
        size = int(reader.readline(65537).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while reader.readline(65537) not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        parts.append(reader.read(size))
        reader.readline(65537)


class _Null:
    def sendall(self, data):
        pass


def drain_body(reader, headers, request):
    copy_body(reader, _Null(), headers, request)


def splice(a, areader, b, breader):
    """Both directions of an upgraded connection until either side closes."""
    def pump(src_reader, dst):
        try:
            while True:
                data = src_reader.read1(65536)
                if not data:
                    break
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    t = threading.Thread(target=pump, args=(breader, a), daemon=True)
    t.start()
    pump(areader, b)
    t.join()


# --- Session commands ---------------------------------------------------------------------------

def sandbox_env(sb):
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "TZ")}
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env.update(HOME=sb.dir, USER=sb.user, DAYTONA_SANDBOX_ID=sb.id,
               DAYTONA_SANDBOX_SNAPSHOT=sb.snapshot or "", DAYTONA_SANDBOX_USER=sb.user,
               DAYTONA_FAKE_HOST=sb.address)
    env.update(sb.env)
    return env


def start_command(sb, command):
    """Starts `bash -c COMMAND` in the sandbox; returns (command record, Popen)."""
    cmd_id = str(uuid.uuid4())
    logs = os.path.join(sb.dir, ".daytona-fake", cmd_id)
    os.makedirs(logs)
    run = command.replace("0.0.0.0", sb.address)
    out = open(os.path.join(logs, "stdout"), "wb")
    err = open(os.path.join(logs, "stderr"), "wb")
    proc = subprocess.Popen(["bash", "-c", run], cwd=sb.dir, env=sandbox_env(sb),
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            start_new_session=True)
    out.close()
    err.close()
    record = {"id": cmd_id, "command": command, "proc": proc, "logs": logs}
    sb.processes.append(proc)
    sb.commands[cmd_id] = record
    log(f"sandbox {sb.id}: started pgid {proc.pid}: {run}")
    return record


def command_logs(record):
    def read(name):
        with open(os.path.join(record["logs"], name), "rb") as f:
            return f.read().decode("utf-8", "replace")
    stdout, stderr = read("stdout"), read("stderr")
    return {"output": stdout + stderr, "stdout": stdout, "stderr": stderr}


def command_dto(record):
    out = {"id": record["id"], "command": record["command"]}
    code = record["proc"].poll()
    if code is not None:
        out["exitCode"] = code if code >= 0 else 128 - code
    return out


def resolve_path(sb, path):
    if not path:
        raise ApiError(400, "path is required", "BAD_REQUEST")
    full = os.path.normpath(path if os.path.isabs(path) else os.path.join(sb.dir, path))
    if full != sb.dir and not full.startswith(sb.dir + os.sep):
        raise ApiError(403, f"the fake sandbox only has files under {sb.dir}: {path}",
                       "FILE_ACCESS_DENIED")
    return full


def parse_multipart(content_type, body):
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode() + body)
    if not message.is_multipart():
        raise ApiError(400, "expected multipart/form-data", "BAD_REQUEST")
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name is not None:
            fields[name] = part.get_payload(decode=True) or b""
    return fields


# --- HTTP ---------------------------------------------------------------------------------------

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "daytona-fake"

    def log_message(self, fmt, *args):
        log(f"{self.address_string()} {fmt % args}")

    def end_headers(self):
        # An answer after which this server closes the connection (the request asked for it, as
        # Prism's fetch does) says so: a client's keep-alive pool (Node's, in Prism) would
        # otherwise put the connection back and send its next request into a closed socket.
        if self.close_connection:
            self.send_header("Connection", "close")
        super().end_headers()

    # Each method: route, and turn ApiError into Daytona's error bodies.
    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def dispatch(self, method):
        self.body = b""
        length = self.headers.get("Content-Length")
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.body = read_chunked(self.rfile)  # the SDK streams its uploads
        elif length:
            self.body = self.rfile.read(int(length))
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        self.query = urllib.parse.parse_qs(split.query)
        if path == "/api" or path.startswith("/api/"):
            path = path[4:] or "/"
        toolbox = path.startswith("/toolbox/")
        try:
            if path.startswith("/_fake/"):
                return self.fake_routes(method, path)
            if path == "/config" and method == "GET":
                return self.send_json(200, config_dto())
            with FAKE.lock:
                throttled = FAKE.throttle > 0
                FAKE.throttle -= 1 if throttled else 0
            if throttled:
                raise ApiError(429, "ThrottlerException: Too Many Requests", "TOO_MANY_REQUESTS")
            self.check_auth()
            if toolbox:
                return self.toolbox_routes(method, path)
            return self.api_routes(method, path)
        except ApiError as e:
            if toolbox:
                body = {"message": e.message, "path": split.path, "statusCode": e.status,
                        "timestamp": now_iso(), "method": method,
                        "code": e.code or DAEMON_CODES.get(e.status, "BAD_REQUEST")}
            else:
                body = {"path": self.path, "timestamp": now_iso(), "statusCode": e.status,
                        "error": REASONS.get(e.status, "Error"), "message": e.message}
            self.send_json(e.status, body)
        except Exception as e:  # a bug of the fake: say so
            log(f"internal error: {e!r}")
            self.send_json(500, {"path": self.path, "timestamp": now_iso(), "statusCode": 500,
                                 "error": "Internal Server Error", "message": repr(e)})

    def check_auth(self):
        auth = self.headers.get("Authorization", "")
        if not (auth.startswith("Bearer ") and
                secrets.compare_digest(auth[7:].strip(), FAKE.api_key)):
            raise ApiError(401, "Invalid credentials", "UNAUTHORIZED")

    def json_body(self):
        try:
            value = json.loads(self.body or b"null")
        except ValueError:
            raise ApiError(400, "the body is not JSON", "INVALID_REQUEST_BODY")
        if not isinstance(value, dict):
            raise ApiError(400, "the body must be a JSON object", "INVALID_REQUEST_BODY")
        return value

    def send_json(self, status, value):
        self.send_bytes(status, json.dumps(value).encode(), "application/json; charset=utf-8")

    def send_bytes(self, status, data, content_type=None):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    # --- The main API ---

    def api_routes(self, method, path):
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if parts[0] != "sandbox":
            raise ApiError(404, f"Cannot {method} {path}")
        with FAKE.lock:
            if len(parts) == 1:
                if method == "POST":
                    return self.create_sandbox()
                if method == "GET":
                    return self.list_sandboxes()
            elif len(parts) == 2:
                if method == "GET":
                    return self.send_json(200, FAKE.find(parts[1]).dto(FAKE))
                if method == "DELETE":
                    return self.delete_sandbox(FAKE.find(parts[1]))
            elif len(parts) == 3 and method == "POST" and parts[2] in ("start", "stop"):
                sb = FAKE.find(parts[1])
                return self.start_sandbox(sb) if parts[2] == "start" else self.stop_sandbox(sb)
            elif len(parts) == 3 and method == "GET" and parts[2] == "toolbox-proxy-url":
                FAKE.find(parts[1])
                return self.send_json(200, {"url": FAKE.toolbox_url})
            elif len(parts) == 5 and parts[2] == "ports" and parts[4] == "preview-url" and \
                    method == "GET":
                return self.preview_url(FAKE.find(parts[1]), parts[3])
        raise ApiError(404, f"Cannot {method} {path}")

    def create_sandbox(self):
        request = self.json_body()
        for field in ("cpu", "gpu", "memory", "disk"):
            if field in request and not isinstance(request[field], int):
                raise ApiError(400, f"{field} must be an integer number")
        if request.get("env") is not None and not all(
                isinstance(v, str) for v in dict(request["env"]).values()):
            raise ApiError(400, "env values must be strings")
        build = request.get("buildInfo")
        if build is not None and not isinstance(build.get("dockerfileContent"), str):
            raise ApiError(400, "buildInfo.dockerfileContent must be a string")
        name = request.get("name")
        if name and any(s.name == name and s.state != "destroyed"
                        for s in FAKE.sandboxes.values()):
            raise ApiError(409, f"Sandbox with name {name} already exists")
        sb = Sandbox(FAKE, request)
        FAKE.sandboxes[sb.id] = sb
        log(f"sandbox {sb.id} ({sb.name}) created from {sb.snapshot} at {sb.address}")
        self.send_json(200, sb.dto(FAKE))

    def list_sandboxes(self):
        for sb in FAKE.sandboxes.values():
            sb.advance()
        items = [sb.dto(FAKE, full=False) for sb in FAKE.sandboxes.values()
                 if sb.state != "destroyed"]
        labels = self.query.get("labels")
        if labels:
            want = json.loads(labels[0])
            items = [i for i in items if all(i["labels"].get(k) == v for k, v in want.items())]
        for key, field in (("id", "id"), ("name", "name")):
            if key in self.query:
                items = [i for i in items if i[field] == self.query[key][0]]
        if "states" in self.query:
            items = [i for i in items if i["state"] in self.query["states"]]
        self.send_json(200, {"items": items, "nextCursor": None})

    def delete_sandbox(self, sb):
        if sb.pending() and sb.state != "pending_build":
            raise ApiError(409, "Sandbox state change in progress")
        sb.kill_all()
        sb.desired = "destroyed"
        sb.updated_at = now_iso()
        answer = sb.dto(FAKE)
        sb.schedule([(0, "destroying"), (FAKE.start_delay / 2, "destroyed")])
        log(f"sandbox {sb.id} deleted")
        self.send_json(200, answer)

    def start_sandbox(self, sb):
        if sb.state == "started":
            return self.send_json(200, sb.dto(FAKE))
        if sb.pending():
            raise ApiError(409, "Sandbox state change in progress")
        if sb.state not in ("stopped", "archived", "error"):
            raise ApiError(400, f"Sandbox is not in a state that can be started: {sb.state}")
        sb.desired = "started"
        sb.error_reason = None
        sb.schedule([(0, "starting"), (FAKE.start_delay / 2, "started")])
        self.send_json(200, sb.dto(FAKE))

    def stop_sandbox(self, sb):
        if sb.state == "stopped":
            return self.send_json(200, sb.dto(FAKE))
        if sb.pending():
            raise ApiError(409, "Sandbox state change in progress")
        if sb.state != "started":
            raise ApiError(400, f"Sandbox is not started: {sb.state}")
        sb.kill_all()
        sb.sessions.clear()
        sb.desired = "stopped"
        sb.schedule([(0, "stopping"), (FAKE.start_delay / 2, "stopped")])
        self.send_json(200, sb.dto(FAKE))

    def preview_url(self, sb, port_text):
        try:
            port = int(port_text)
        except ValueError:
            raise ApiError(400, "Invalid port")
        if not 1 <= port <= 65535:
            raise ApiError(400, "Invalid port")
        preview = sb.previews.get(port)
        if preview is None:
            preview = sb.previews[port] = PreviewProxy(sb, port)
            log(f"sandbox {sb.id}: preview of port {port} at {preview.url}")
        self.send_json(200, {"sandboxId": sb.id, "url": preview.url, "token": sb.token})

    # --- The toolbox ---

    def toolbox_routes(self, method, path):
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        rest = parts[2:]
        with FAKE.lock:
            sb = FAKE.find(parts[1])
            if sb.state != "started":
                raise ApiError(400, f"sandbox {sb.id} is not started (state {sb.state})")
            if rest == ["work-dir"] or rest == ["user-home-dir"]:
                return self.send_json(200, {"dir": sb.dir})
            if rest[:2] == ["process", "session"]:
                waiting = self.session_routes(sb, method, rest[2:])
            elif rest == ["process", "execute"] and method == "POST":
                request = self.json_body()
                if not isinstance(request.get("command"), str):
                    raise ApiError(400, "command is required", "INVALID_REQUEST_BODY")
                waiting = (start_command(sb, request["command"]), request.get("timeout") or None)
            elif rest == ["files", "bulk-upload"] and method == "POST":
                return self.bulk_upload(sb)
            elif rest == ["files", "upload-v2"] and method == "POST":
                return self.upload_v2(sb)
            elif rest == ["files", "download"] and method == "GET":
                full = resolve_path(sb, (self.query.get("path") or [""])[0])
                if not os.path.isfile(full):
                    raise ApiError(404, f"file not found: {full}", "FILE_NOT_FOUND")
                with open(full, "rb") as f:
                    return self.send_bytes(200, f.read(), "application/octet-stream")
            elif rest == ["files", "bulk-download"] and method == "POST":
                return self.bulk_download(sb)
            else:
                raise ApiError(404, f"no route {method} {path}")
        if waiting is None:
            return
        # A synchronous command: waited for without the lock.
        record, timeout = waiting
        try:
            code = record["proc"].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(record["proc"].pid, signal.SIGKILL)
            record["proc"].wait()
            raise ApiError(408, "command timed out", "PROCESS_EXECUTION_TIMEOUT")
        code = code if code >= 0 else 128 - code
        logs = command_logs(record)
        if rest == ["process", "execute"]:
            return self.send_json(200, {"exitCode": code, "result": logs["output"]})
        return self.send_json(200, {"cmdId": record["id"], "exitCode": code, **logs})

    def session_routes(self, sb, method, rest):
        """Answers, or returns (command, timeout) of a synchronous command to wait for."""
        if not rest:
            if method == "POST":
                session_id = self.json_body().get("sessionId")
                if not isinstance(session_id, str) or not session_id:
                    raise ApiError(400, "sessionId is required", "INVALID_REQUEST_BODY")
                if session_id in sb.sessions:
                    raise ApiError(409, f"session {session_id} already exists")
                sb.sessions[session_id] = {"commands": []}
                return self.send_bytes(201, b"")
            if method == "GET":
                return self.send_json(200, [
                    {"sessionId": sid, "commands": [command_dto(sb.commands[c])
                                                    for c in s["commands"]]}
                    for sid, s in sb.sessions.items()])
            raise ApiError(404, f"no route {method} /process/session")
        session_id = rest[0]
        session = sb.sessions.get(session_id)
        if session is None:
            raise ApiError(404, f"session {session_id} not found")
        if len(rest) == 1 and method == "GET":
            return self.send_json(200, {"sessionId": session_id, "commands": [
                command_dto(sb.commands[c]) for c in session["commands"]]})
        if len(rest) == 1 and method == "DELETE":
            for c in session["commands"]:
                try:
                    os.killpg(sb.commands[c]["proc"].pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            del sb.sessions[session_id]
            return self.send_bytes(204, b"")
        if rest[1:] == ["exec"] and method == "POST":
            request = self.json_body()
            command = request.get("command")
            if not isinstance(command, str) or not command:
                raise ApiError(400, "command is required", "INVALID_REQUEST_BODY")
            record = start_command(sb, command)
            session["commands"].append(record["id"])
            if request.get("runAsync") or request.get("async"):
                return self.send_json(202, {"cmdId": record["id"]})
            return record, None
        if len(rest) >= 3 and rest[1] == "command":
            record = sb.commands.get(rest[2])
            if record is None or record["id"] not in session["commands"]:
                raise ApiError(404, f"command {rest[2]} not found")
            if len(rest) == 3 and method == "GET":
                return self.send_json(200, command_dto(record))
            if rest[3:] == ["logs"] and method == "GET":
                if self.query.get("follow", ["false"])[0] == "true":
                    raise ApiError(400, "the fake does not stream logs (follow=true)")
                return self.send_json(200, command_logs(record))
        raise ApiError(404, f"no route {method} /process/session/{'/'.join(rest)}")

    def bulk_upload(self, sb):
        fields = parse_multipart(self.headers.get("Content-Type", ""), self.body)
        index = 0
        while f"files[{index}].path" in fields:
            path = fields[f"files[{index}].path"].decode()
            data = fields.get(f"files[{index}].file")
            if data is None:
                raise ApiError(400, f"files[{index}].file is missing", "BAD_REQUEST")
            full = resolve_path(sb, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
            index += 1
        if index == 0:
            raise ApiError(400, "no files[0].path in the form", "BAD_REQUEST")
        self.send_bytes(200, b"")

    def upload_v2(self, sb):
        # One file at ?path=: multipart (field "file") or the raw body.
        path = (self.query.get("path") or [""])[0]
        if not path:
            raise ApiError(400, "path is required", "BAD_REQUEST")
        content_type = self.headers.get("Content-Type", "")
        if content_type.startswith("multipart/form-data"):
            data = parse_multipart(content_type, self.body).get("file")
            if data is None:
                raise ApiError(400, "the form has no field file", "BAD_REQUEST")
        else:
            data = self.body
        full = resolve_path(sb, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        self.send_json(200, {"name": os.path.basename(full), "path": full, "type": "file"})

    def bulk_download(self, sb):
        paths = self.json_body().get("paths") or []
        boundary = "fake" + secrets.token_hex(12)
        chunks = []
        for path in paths:
            try:
                full = resolve_path(sb, path)
                if not os.path.isfile(full):
                    raise ApiError(404, f"file not found: {path}", "FILE_NOT_FOUND")
                with open(full, "rb") as f:
                    data = f.read()
                head = (f'Content-Disposition: form-data; name="file"; filename="{path}"\r\n'
                        "Content-Type: application/octet-stream\r\n")
            except ApiError as e:
                data = json.dumps({"message": e.message, "statusCode": e.status,
                                   "code": e.code}).encode()
                head = (f'Content-Disposition: form-data; name="error"; filename="{path}"\r\n'
                        "Content-Type: application/json\r\n")
            chunks.append(f"--{boundary}\r\n{head}\r\n".encode() + data + b"\r\n")
        chunks.append(f"--{boundary}--\r\n".encode())
        self.send_bytes(200, b"".join(chunks), f"multipart/form-data; boundary={boundary}")

    # --- Not Daytona ---

    def fake_routes(self, method, path):
        if path == "/_fake/sandboxes" and method == "GET":
            with FAKE.lock:
                out = []
                every = self.query.get("all", ["0"])[0] not in ("0", "")
                for sb in FAKE.sandboxes.values():
                    sb.advance()
                    live, strays = sb.live_groups(), sb.strays()
                    if sb.state == "destroyed" and not live and not strays and not sb.previews \
                            and not every:
                        continue
                    out.append({"id": sb.id, "name": sb.name, "state": sb.state,
                                "desiredState": sb.desired, "address": sb.address, "dir": sb.dir,
                                "processes": live, "strays": strays,
                                "previews": {str(p): v.url for p, v in sb.previews.items()},
                                "sessions": sorted(sb.sessions)})
            return self.send_json(200, out)
        if path == "/_fake/throttle" and method == "POST":
            with FAKE.lock:
                FAKE.throttle = int((self.query.get("count") or ["1"])[0])
            return self.send_json(200, {"throttle": FAKE.throttle})
        if path == "/_fake/preview-auth":
            return self.send_json(401, {"statusCode": 401, "error": "Unauthorized",
                                        "message": "preview login (fake): no token"})
        raise ApiError(404, f"Cannot {method} {path}")


def config_dto():
    return {
        "version": "0.218.0-fake", "oidc": {"issuer": "http://127.0.0.1/fake-oidc",
                                            "clientId": "fake", "audience": "fake",
                                            "provider": "auth0"},
        "linkedAccountsEnabled": False, "announcements": {},
        "proxyTemplateUrl": "http://{{PORT}}-{{sandboxId}}.fake.invalid",
        "proxyToolboxUrl": FAKE.toolbox_url, "defaultSnapshot": DEFAULT_SNAPSHOT,
        "dashboardUrl": f"http://127.0.0.1:{FAKE.port}/dashboard", "maxAutoArchiveInterval": 43200,
        "maintananceMode": False, "environment": "fake",
    }


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global FAKE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True, help="0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--state-dir", help="where sandboxes get their directories "
                                            "(default: a temporary directory, removed at exit)")
    parser.add_argument("--start-delay", type=float, default=1.0,
                        help="seconds from create to started")
    parser.add_argument("--toolbox-url", help="the toolboxProxyUrl given out (default: "
                                              "http://HOST:PORT/toolbox)")
    args = parser.parse_args()
    FAKE = Fake(args)
    server = Server((args.host, args.port), Handler)
    FAKE.port = server.server_address[1]
    FAKE.toolbox_url = args.toolbox_url or f"http://{args.host}:{FAKE.port}/toolbox"
    stopping = threading.Event()

    def stop(signum, frame):
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"READY {FAKE.port}", flush=True)
    log(f"listening on {args.host}:{FAKE.port}, toolbox at {FAKE.toolbox_url}, "
        f"sandboxes in {FAKE.state_dir}")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        FAKE.shutdown()
        server.server_close()
        log("stopped")


if __name__ == "__main__":
    main()
