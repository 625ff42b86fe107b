#!/usr/bin/env python3
"""A logging stand-in for E2B's control plane (REST API) and envd, for watching Harbor.

Point E2B's Python SDK at it with
    E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=http://127.0.0.1:PORT E2B_API_KEY=e2b_stub
and every request is written as one JSON line to --log (method, path, query, headers with
secrets masked, body: JSON decoded, Connect envelopes decoded, multipart parts and tar
uploads summarised), and answered plausibly so that the client goes on:

  GET  /templates/aliases/{alias}           404 until the alias was built, then 200
  POST /v3/templates                        202 {templateID, buildID, names, tags, aliases}
  GET  /templates/{id}/files/{hash}         201 {present: false, url: <this server>/upload/...}
  PUT  /upload/{id}/{hash}                  200 (the build context tar is listed in the log)
  POST /v2/templates/{id}/builds/{build}    202
  GET  /templates/{id}/builds/{build}/status  building (one log line), then ready
  POST /v2/sandboxes (and /sandboxes)       201 {sandboxID, envdVersion, envdAccessToken, ...}
  DELETE /sandboxes/{id}, POST .../timeout, .../refreshes  204
  envd: POST /process.Process/Start (Connect server stream, JSON codec),
        POST /filesystem.Filesystem/{Stat,ListDir,MakeDir,Remove} (Connect unary, JSON),
        POST /files (multipart upload), GET /files?path= (download), GET /health
  anything else                             404 {"code": 404, "message": "..."}

Commands are not run on the host. Without --root the sandbox is simulated: a command exits 0
with empty output, except that a small set of shapes Harbor uses is interpreted against an
in-memory file system (mkdir -p, rm -f, pwd, `... > FILE 2>&1` redirections create FILE).
With --root DIR (a root file system, e.g. a bookworm minbase made by mmdebstrap) each sandbox
gets a copy of DIR, the template's steps (COPY from the uploaded tar, RUN, ENV, WORKDIR, USER)
are applied to it with chroot, and envd commands and file calls run in it for real, so a
task's solution and verifier really run and the reward is real. Needs root (chroot).

Stdlib only. Binds to loopback only.
"""
from __future__ import annotations

import argparse
import base64
import email.parser
import email.policy
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_HEADERS = {"x-api-key", "x-access-token", "e2b-traffic-access-token",
                  "x-e2b-traffic-access-token", "authorization-token"}

STATE_LOCK = threading.Lock()
LOG_LOCK = threading.Lock()


class State:
    def __init__(self, args):
        self.args = args
        self.seq = 0
        self.aliases: dict[str, str] = {}        # alias -> templateID (built)
        self.templates: dict[str, dict] = {}     # templateID -> {name, builds: {buildID: {...}}}
        self.uploads: dict[str, bytes] = {}      # files hash -> tar(.gz) bytes
        self.sandboxes: dict[str, dict] = {}     # sandboxID -> {template, fs, root, ...}
        self.pid = 100
        self.made: list[str] = []                # --root copies, removed at exit unless --keep


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def envelope(flags: int, payload: bytes) -> bytes:
    return bytes([flags]) + len(payload).to_bytes(4, "big") + payload


def parse_envelopes(data: bytes) -> list:
    out, i = [], 0
    while i + 5 <= len(data):
        flags, n = data[i], int.from_bytes(data[i + 1:i + 5], "big")
        payload = data[i + 5:i + 5 + n]
        try:
            payload = json.loads(payload)
        except Exception:
            payload = payload[:200].decode("latin-1")
        out.append({"flags": flags, "message": payload})
        i += 5 + n
    return out


def b64(s: bytes) -> str:
    return base64.b64encode(s).decode()


def tar_listing(data: bytes) -> list:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as t:
            return [f"{m.name} {'dir' if m.isdir() else m.size} mode={oct(m.mode)}"
                    for m in t.getmembers()]
    except Exception as e:  # noqa: BLE001
        return [f"<not a tar: {e}>"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rex-harbor-log-stub/1"
    state: State = None  # set in main

    def log_message(self, fmt, *args):  # quiet default logging; we log ourselves
        pass

    # ---------------------------------------------------------------- plumbing
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                line = self.rfile.readline().strip()
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _headers_for_log(self) -> dict:
        out = {}
        for k, v in self.headers.items():
            lk = k.lower()
            if lk in SECRET_HEADERS:
                v = f"<masked, {len(v)} chars>"
            elif lk == "authorization" and v.startswith("Basic "):
                try:
                    v = f"Basic <{base64.b64decode(v[6:]).decode()}>"
                except Exception:  # noqa: BLE001
                    v = "Basic <?>"
            elif lk == "authorization":
                v = "<masked>"
            out[k] = v
        return out

    def _body_for_log(self, body: bytes):
        ctype = self.headers.get("Content-Type", "")
        if not body:
            return None
        if "connect+json" in ctype:
            return {"connect_envelopes": parse_envelopes(body)}
        if ctype.startswith("application/json"):
            try:
                return json.loads(body)
            except Exception:  # noqa: BLE001
                pass
        if ctype.startswith("multipart/form-data"):
            return {"multipart": [
                {"name": p["name"], "filename": p["filename"], "size": len(p["data"]),
                 "data": p["data"][:300].decode("utf-8", "replace")}
                for p in self._multipart(body)]}
        if self.path.startswith("/upload/"):
            return {"bytes": len(body), "gzip": body[:2] == b"\x1f\x8b", "tar": tar_listing(body)}
        return {"bytes": len(body), "head": body[:300].decode("utf-8", "replace")}

    def _multipart(self, body: bytes) -> list:
        ctype = self.headers.get("Content-Type", "")
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        parts = []
        for part in msg.iter_parts():
            parts.append({"name": part.get_param("name", header="content-disposition"),
                          "filename": part.get_filename(),
                          "data": part.get_payload(decode=True) or b""})
        return parts

    def _record(self, body: bytes, status: int, response):
        st = self.state
        with LOG_LOCK:
            st.seq += 1
            u = urllib.parse.urlsplit(self.path)
            rec = {"seq": st.seq, "t": round(time.time() - START, 3), "method": self.command,
                   "path": u.path, "query": dict(urllib.parse.parse_qsl(u.query)),
                   "headers": self._headers_for_log(), "body": self._body_for_log(body),
                   "status": status, "response": response}
            with open(st.args.log, "a") as f:
                f.write(json.dumps(rec, default=str) + "\n")
            q = f"?{u.query}" if u.query else ""
            print(f"[{rec['seq']:3}] {self.command} {u.path}{q} -> {status}", flush=True)

    def _send(self, status: int, payload=None, ctype="application/json", body_for_log=b"",
              log_response=True):
        if payload is None:
            data = b""
        elif isinstance(payload, (bytes, bytearray)):
            data = bytes(payload)
        else:
            data = json.dumps(payload).encode()
        self._record(body_for_log, status, payload if log_response and not isinstance(
            payload, (bytes, bytearray)) else (f"<{len(data)} bytes>" if data else None))
        self.send_response(status)
        if data or status not in (204, 304):
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _not_found(self, body: bytes, msg: str | None = None):
        self._send(404, {"code": 404, "message": msg or
                         f"rex log stub: no handler for {self.command} {self.path}"},
                   body_for_log=body)

    # ---------------------------------------------------------------- dispatch
    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()

    def do_PATCH(self):
        self._dispatch()

    def _dispatch(self):
        body = self._read_body()
        path = urllib.parse.urlsplit(self.path).path
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        try:
            if path.startswith("/process.Process/") or path.startswith("/filesystem.Filesystem/"):
                return self._envd_rpc(path, body)
            if path == "/files":
                return self._envd_files(body)
            if path in ("/health", "/init", "/envs", "/metrics"):
                if path == "/envs":
                    return self._send(200, {}, body_for_log=body)
                return self._send(204, None, body_for_log=body)
            return self._api(parts, body)
        except BrokenPipeError:
            pass
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            self._send(500, {"code": 500, "message": f"rex log stub error: {e}"}, body_for_log=body)

    # ---------------------------------------------------------------- control plane
    def _api(self, p: list, body: bytes):
        st, m = self.state, self.command
        if m == "GET" and len(p) == 3 and p[:2] == ["templates", "aliases"]:
            with STATE_LOCK:
                tid = st.aliases.get(p[2])
            if tid is None:
                return self._not_found(body, f"template '{p[2]}' not found")
            return self._send(200, {"templateID": tid, "public": False}, body_for_log=body)
        if m == "POST" and p == ["v3", "templates"]:
            req = json.loads(body or b"{}")
            name = req.get("name") or req.get("alias") or "unnamed"
            tid, bid = "tpl" + uuid.uuid4().hex[:16], str(uuid.uuid4())
            tags = req.get("tags") or ["default"]
            with STATE_LOCK:
                st.templates[tid] = {"name": name, "builds": {bid: {"polls": 0, "status": "waiting"}}}
            return self._send(202, {"templateID": tid, "buildID": bid, "public": False,
                                    "names": [f"{name}"], "tags": tags, "aliases": [name]},
                              body_for_log=body)
        if m == "GET" and len(p) == 4 and p[0] == "templates" and p[2] == "files":
            tid, h = p[1], p[3]
            with STATE_LOCK:
                present = h in st.uploads
            host = self.headers.get("Host", "127.0.0.1")
            resp = {"present": present}
            if not present:
                resp["url"] = f"http://{host}/upload/{tid}/{h}"
            return self._send(201, resp, body_for_log=body)
        if m == "PUT" and len(p) == 3 and p[0] == "upload":
            with STATE_LOCK:
                st.uploads[p[2]] = body
            return self._send(200, None, body_for_log=body)
        if m == "POST" and len(p) == 5 and p[:2] == ["v2", "templates"] and p[3] == "builds":
            tid, bid = p[2], p[4]
            with STATE_LOCK:
                t = st.templates.get(tid)
                if t is None or bid not in t["builds"]:
                    t = None
                else:
                    t["builds"][bid].update(status="building", spec=json.loads(body or b"{}"))
            if t is None:
                return self._not_found(body, f"build {bid} of template {tid} not found")
            if st.args.root:
                threading.Thread(target=self._build_rootfs, args=(tid, bid), daemon=True).start()
            return self._send(202, None, body_for_log=body)
        if m == "GET" and len(p) == 5 and p[0] == "templates" and p[2] == "builds" and p[4] == "status":
            return self._build_status(p[1], p[3], body)
        if m == "POST" and p in (["sandboxes"], ["v2", "sandboxes"]):
            return self._create_sandbox(body)
        if len(p) >= 3 and p[:2] == ["v2", "sandboxes"]:
            p = p[1:]
        if len(p) >= 2 and p[0] == "sandboxes":
            sid = p[1]
            with STATE_LOCK:
                sb = st.sandboxes.get(sid)
            if sb is None:
                return self._not_found(body, f"sandbox {sid} not found")
            if m == "DELETE" and len(p) == 2:
                with STATE_LOCK:
                    st.sandboxes.pop(sid, None)
                if sb.get("root") and not st.args.keep:
                    shutil.rmtree(sb["root"], ignore_errors=True)
                return self._send(204, None, body_for_log=body)
            if m == "POST" and len(p) == 3 and p[2] in ("timeout", "refreshes"):
                return self._send(204, None, body_for_log=body)
            if m == "PUT" and len(p) == 3 and p[2] == "network":
                return self._send(204, None, body_for_log=body)
            if m == "GET" and len(p) == 2:
                return self._send(200, self._sandbox_json(sid, sb) | {
                    "state": "running", "startedAt": sb["started"], "endAt": sb["started"],
                    "cpuCount": 2, "memoryMB": 1024, "diskSizeMB": 4096, "metadata": sb["metadata"]},
                    body_for_log=body)
        return self._not_found(body)

    def _build_status(self, tid: str, bid: str, body: bytes):
        st = self.state
        with STATE_LOCK:
            t = st.templates.get(tid)
            b = t["builds"].get(bid) if t else None
            if b is None:
                return self._not_found(body, f"build {bid} not found")
            b["polls"] += 1
            offset = int(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                         .get("logsOffset", ["0"])[0])
            logs = b.setdefault("logs", [])
            if not st.args.root and b["status"] == "building" and b["polls"] >= 2:
                logs.append("stub: build steps not executed (no --root); marking ready")
                b["status"] = "ready"
            status = b["status"]
            if status == "ready":
                st.aliases[t["name"]] = tid
            new = logs[offset:]
        resp = {"templateID": tid, "buildID": bid, "status": status,
                "logs": new,
                "logEntries": [{"timestamp": now_iso(), "level": "info", "message": x} for x in new]}
        if status == "error":
            resp["reason"] = {"message": b.get("error", "build failed")}
        return self._send(200, resp, body_for_log=body)

    def _sandbox_json(self, sid: str, sb: dict) -> dict:
        return {"templateID": sb["template"], "sandboxID": sid, "clientID": "rex-stub",
                "envdVersion": self.state.args.envd_version, "envdAccessToken": "stub-token",
                "alias": sb["alias"], "domain": None}

    def _create_sandbox(self, body: bytes):
        st = self.state
        req = json.loads(body or b"{}")
        alias = req.get("templateID", "")
        with STATE_LOCK:
            tid = st.aliases.get(alias) or (alias if alias in st.templates else None)
        if tid is None:
            return self._not_found(body, f"template '{alias}' not found")
        sid = "sbx" + uuid.uuid4().hex[:12]
        spec = {}
        with STATE_LOCK:
            t = st.templates[tid]
            for b in t["builds"].values():
                if b.get("status") == "ready":
                    spec = b
        sb = {"template": tid, "alias": alias, "started": now_iso(), "metadata": req.get("metadata", {}),
              "envs": dict(spec.get("envs", {})), "workdir": spec.get("workdir", "/home/user"),
              "user": spec.get("user", "user"), "fs": {}, "dirs": {"/", "/home/user", "/tmp"},
              "root": None}
        sb["envs"].update(req.get("envVars") or {})
        if st.args.root and spec.get("rootfs"):
            sb["root"] = os.path.join(st.args.work, sid)
            st.made.append(sb["root"])
            subprocess.run(["cp", "-a", spec["rootfs"], sb["root"]], check=True)
        with STATE_LOCK:
            st.sandboxes[sid] = sb
        return self._send(201, self._sandbox_json(sid, sb), body_for_log=body)

    # ---------------------------------------------------------------- --root: the build
    def _build_rootfs(self, tid: str, bid: str):
        st = self.state
        with STATE_LOCK:
            b = st.templates[tid]["builds"][bid]
            spec = b["spec"]
            logs = b.setdefault("logs", [])
        root = os.path.join(st.args.work, f"template-{tid}-{bid[:8]}")
        envs: dict = {}
        workdir, user = "/", "root"
        try:
            subprocess.run(["rm", "-rf", root], check=True)
            st.made.append(root)
            subprocess.run(["cp", "-a", st.args.root, root], check=True)
            logs.append(f"FROM {spec.get('fromImage') or spec.get('fromTemplate')} (stub: copy of {st.args.root})")
            for step in spec.get("steps", []):
                typ, args = step.get("type"), step.get("args", [])
                logs.append(f"{typ} {' '.join(args)}")
                if typ == "ENV":
                    for i in range(0, len(args) - 1, 2):
                        envs[args[i]] = args[i + 1]
                elif typ == "WORKDIR":
                    workdir = args[0]
                    os.makedirs(root + workdir, exist_ok=True)
                elif typ == "USER":
                    user = args[0]
                    if user != "root":
                        subprocess.run(["chroot", root, "sh", "-c",
                                        f"id {shlex.quote(user)} >/dev/null 2>&1 || useradd -m -s /bin/bash {shlex.quote(user)}"],
                                       check=True)
                elif typ == "COPY":
                    data = st.uploads[step["filesHash"]]
                    src, dest = args[0], args[1]
                    tmp = root + "/.rex-copy"
                    shutil.rmtree(tmp, ignore_errors=True)
                    os.makedirs(tmp)
                    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as t:
                        t.extractall(tmp, filter="tar")
                    s = os.path.join(tmp, src.rstrip("/"))
                    d = dest if dest.startswith("/") else os.path.join(workdir, dest)
                    if os.path.isdir(s):
                        subprocess.run(["mkdir", "-p", root + d], check=True)
                        subprocess.run(["cp", "-a", s + "/.", root + d], check=True)
                    else:
                        target = root + d + (os.path.basename(s) if d.endswith("/") else "")
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        shutil.copy2(s, target)
                    shutil.rmtree(tmp, ignore_errors=True)
                    if len(args) > 2 and args[2]:
                        subprocess.run(["chroot", root, "chown", "-R", args[2], d], check=True)
                elif typ == "RUN":
                    run_user = args[1] if len(args) > 1 and args[1] else user
                    r = run_in_root(root, args[0], run_user, workdir, envs, None)
                    for line in (r.stdout + r.stderr).decode("utf-8", "replace").splitlines():
                        logs.append(line)
                    if r.returncode != 0:
                        raise RuntimeError(f"RUN {args[0]!r} exited {r.returncode}")
                else:
                    logs.append(f"stub: step {typ} ignored")
            with STATE_LOCK:
                b.update(status="ready", rootfs=root, envs=envs, workdir=workdir, user=user)
        except Exception as e:  # noqa: BLE001
            with STATE_LOCK:
                logs.append(f"stub build error: {e}")
                b.update(status="error", error=str(e))

    # ---------------------------------------------------------------- envd
    def _sandbox_for_envd(self):
        st = self.state
        sid = self.headers.get("E2b-Sandbox-Id")
        with STATE_LOCK:
            if sid in st.sandboxes:
                return st.sandboxes[sid]
            # E2B_SANDBOX_URL carries no sandbox id: fall back to the newest sandbox
            return next(reversed(st.sandboxes.values()), None) if st.sandboxes else None

    def _user(self, default=None):
        a = self.headers.get("Authorization", "")
        if a.startswith("Basic "):
            try:
                return base64.b64decode(a[6:]).decode().split(":")[0] or default
            except Exception:  # noqa: BLE001
                pass
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        return q.get("username") or default

    def _envd_rpc(self, path: str, body: bytes):
        sb = self._sandbox_for_envd()
        method = path.rsplit("/", 1)[1]
        if sb is None:
            return self._send(404, {"code": "not_found", "message": "no sandbox"}, body_for_log=body)
        if path == "/process.Process/Start":
            msgs = parse_envelopes(body)
            req = msgs[0]["message"] if msgs else {}
            proc = req.get("process", {})
            user = self._user(sb["user"])
            stdout, stderr, code = self._run(sb, proc, user)
            with STATE_LOCK:
                self.state.pid += 1
                pid = self.state.pid
            events = [{"event": {"start": {"pid": pid}}}]
            if stdout:
                events.append({"event": {"data": {"stdout": b64(stdout)}}})
            if stderr:
                events.append({"event": {"data": {"stderr": b64(stderr)}}})
            events.append({"event": {"end": {"exitCode": code, "exited": True,
                                             "status": f"exit status {code}"}}})
            data = b"".join(envelope(0, json.dumps(e).encode()) for e in events)
            data += envelope(2, b"{}")
            self._record(body, 200, {"connect_stream": events})
            self.send_response(200)
            self.send_header("Content-Type", "application/connect+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        req = json.loads(body or b"{}")
        if method == "Stat":
            e = self._entry(sb, req.get("path", ""))
            if e is None:
                return self._send(404, {"code": "not_found", "message": f"path '{req.get('path')}' does not exist"},
                                  body_for_log=body)
            return self._send(200, {"entry": e}, body_for_log=body)
        if method == "ListDir":
            ents = self._list(sb, req.get("path", ""), int(req.get("depth") or 1))
            if ents is None:
                return self._send(404, {"code": "not_found", "message": f"directory '{req.get('path')}' does not exist"},
                                  body_for_log=body)
            return self._send(200, {"entries": ents}, body_for_log=body)
        if method == "MakeDir":
            p = req.get("path", "")
            if sb["root"]:
                os.makedirs(sb["root"] + p, exist_ok=True)
            else:
                self._mkdirs(sb, p)
            return self._send(200, {"entry": self._entry(sb, p)}, body_for_log=body)
        if method == "Remove":
            p = req.get("path", "")
            if sb["root"]:
                subprocess.run(["rm", "-rf", sb["root"] + p])
            else:
                sb["fs"].pop(p, None)
            return self._send(200, {}, body_for_log=body)
        return self._send(404, {"code": "unimplemented", "message": f"{path} not implemented by the stub"},
                          body_for_log=body)

    def _envd_files(self, body: bytes):
        sb = self._sandbox_for_envd()
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        if sb is None:
            return self._not_found(body, "no sandbox")
        if self.command == "GET":
            p = q.get("path", "")
            data = None
            if sb["root"]:
                if os.path.isfile(sb["root"] + p):
                    with open(sb["root"] + p, "rb") as f:
                        data = f.read()
            else:
                data = sb["fs"].get(p)
            if data is None:
                return self._not_found(body, f"path '{p}' does not exist")
            self._record(body, 200, f"<{len(data)} bytes: {data[:120]!r}>")
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.command == "POST":
            user = q.get("username") or self._user(sb["user"])
            ctype = self.headers.get("Content-Type", "")
            if ctype.startswith("multipart/form-data"):
                files = [(p["filename"] if not q.get("path") else q["path"], p["data"])
                         for p in self._multipart(body)]
            else:
                files = [(q.get("path", ""), body)]
            out = []
            for path, data in files:
                self._write(sb, path, data, user)
                out.append({"name": os.path.basename(path), "type": "file", "path": path})
            return self._send(200, out, body_for_log=body)
        return self._not_found(body)

    # ---------------------------------------------------------------- sandbox fs + exec
    def _mkdirs(self, sb, p: str):
        while p and p != "/":
            sb["dirs"].add(p)
            p = os.path.dirname(p)

    def _write(self, sb, path: str, data: bytes, user: str):
        if sb["root"]:
            full = sb["root"] + path
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
            if user and user != "root":
                subprocess.run(["chroot", sb["root"], "chown", f"{user}:", path])
        else:
            sb["fs"][path] = data
            self._mkdirs(sb, os.path.dirname(path))

    def _entry_from_host(self, sb, p: str):
        full = sb["root"] + p
        if not os.path.lexists(full):
            return None
        s = os.lstat(full)
        typ = "FILE_TYPE_DIRECTORY" if os.path.isdir(full) else "FILE_TYPE_FILE"
        return {"name": os.path.basename(p) or "/", "type": typ, "path": p, "size": str(s.st_size),
                "mode": s.st_mode & 0o7777, "permissions": "", "owner": "root", "group": "root",
                "modifiedTime": datetime.fromtimestamp(s.st_mtime, timezone.utc).isoformat().replace("+00:00", "Z")}

    def _entry(self, sb, p: str):
        if sb["root"]:
            return self._entry_from_host(sb, p)
        p = p.rstrip("/") or "/"
        if p in sb["fs"]:
            return {"name": os.path.basename(p), "type": "FILE_TYPE_FILE", "path": p,
                    "size": str(len(sb["fs"][p])), "mode": 0o644, "permissions": "-rw-r--r--",
                    "owner": "root", "group": "root", "modifiedTime": now_iso()}
        if p in sb["dirs"]:
            return {"name": os.path.basename(p) or "/", "type": "FILE_TYPE_DIRECTORY", "path": p,
                    "size": "4096", "mode": 0o755, "permissions": "drwxr-xr-x",
                    "owner": "root", "group": "root", "modifiedTime": now_iso()}
        return None

    def _list(self, sb, p: str, depth: int):
        p = p.rstrip("/") or "/"
        if sb["root"]:
            full = sb["root"] + p
            if not os.path.isdir(full):
                return None
            return [self._entry_from_host(sb, os.path.join(p, n)) for n in sorted(os.listdir(full))]
        if p not in sb["dirs"]:
            return None
        kids = sorted({x for x in list(sb["fs"]) + list(sb["dirs"])
                       if x != p and os.path.dirname(x) == p})
        return [self._entry(sb, k) for k in kids]

    def _run(self, sb, proc: dict, user: str):
        cmd = proc.get("cmd", "")
        args = proc.get("args", [])
        envs = {**sb["envs"], **(proc.get("envs") or {})}
        cwd = proc.get("cwd") or sb["workdir"]
        if sb["root"]:
            script = args[-1] if cmd.endswith("bash") and args and args[0] in ("-l", "-c") else shlex.join([cmd, *args])
            r = run_in_root(sb["root"], script, user, cwd, envs, None)
            return r.stdout, r.stderr, r.returncode
        # simulation: interpret the few shapes Harbor uses, exit 0 otherwise
        script = args[-1] if args else cmd
        out = b""
        for piece in script.replace("&&", ";").split(";"):
            try:
                words = shlex.split(piece)
            except ValueError:
                continue
            if not words:
                continue
            if words[0] == "mkdir":
                for w in words[1:]:
                    if not w.startswith("-"):
                        self._mkdirs(sb, w)
            elif words[0] == "pwd":
                out += (cwd + "\n").encode()
            elif words[0] == "rm":
                for w in words[1:]:
                    sb["fs"].pop(w, None)
            for i, w in enumerate(words):
                if w in (">", ">>") and i + 1 < len(words) and words[i + 1].startswith("/"):
                    sb["fs"].setdefault(words[i + 1], b"")
                    self._mkdirs(sb, os.path.dirname(words[i + 1]))
        return out, b"", 0


def run_in_root(root: str, script: str, user: str, cwd: str, envs: dict, timeout):
    """Runs `bash -l -c script` in root (chroot) as user, in cwd, with envs."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root" if user in ("root", "0") else f"/home/{user}", "USER": user, **envs}
    inner = f"mkdir -p {shlex.quote(cwd)} 2>/dev/null; cd {shlex.quote(cwd)} && exec /bin/bash -l -c {shlex.quote(script)}"
    argv = ["chroot"]
    if user not in ("root", "0"):
        argv.append(f"--userspec={user}:{user}")
    argv += [root, "/bin/bash", "-c", inner]
    return subprocess.run(argv, env=env, capture_output=True, timeout=timeout)


START = time.time()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    ap.add_argument("--log", default="/var/tmp/harbor_calls.jsonl", help="JSON lines log (appended)")
    ap.add_argument("--envd-version", default="0.5.2", help="envdVersion reported at sandbox creation")
    ap.add_argument("--root", help="root file system to copy per template build; runs commands for real (chroot)")
    ap.add_argument("--work", default="/var/tmp/harbor-stub", help="where --root copies go")
    ap.add_argument("--keep", action="store_true", help="keep sandbox roots after DELETE")
    ap.add_argument("--port-file", help="write the chosen port here once listening")
    args = ap.parse_args()
    if args.root:
        args.root = os.path.abspath(args.root)
        os.makedirs(args.work, exist_ok=True)
    Handler.state = State(args)
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    print(f"rex harbor log stub on http://127.0.0.1:{port} (log: {args.log})", flush=True)
    if args.port_file:
        with open(args.port_file, "w") as f:
            f.write(str(port))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if not args.keep:
            for d in Handler.state.made:
                shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
