#!/usr/bin/env python3
"""`rex gateway` from the outside: raw HTTP (and curl, and SWE-ReX's own client) against the real
executable, as GATEWAY.md specifies it.

Usage: test_gateway.py PATH/TO/rex [unittest arguments]
       (or REX_BINARY=PATH test_gateway.py ...)

Each test starts its own gateway on a free port with its own storage folder (a fresh temporary
directory) and, when it ends, destroys its sessions and stops the gateway with SIGTERM. Then
nothing of a sandbox the gateway has ended may be left: no process of it, no directory of it
under <storage>/sandboxes/, no file naming it in /tmp; a test that leaves one fails, naming it
(see GatewayTestCase.left_behind). Only as a last resort, so that a failed test does not spill
into the next, are the processes still left killed by pid. Every socket and process wait has a
timeout.
"""

import base64
import concurrent.futures
import datetime
import faulthandler
import hashlib
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest
import urllib.parse
import uuid

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_process import (EventStream, Gateway, cmdline, free_port,  # noqa: E402
                             is_gone, is_spare, multipart, processes_naming,
                             read_sandbox_json, wait_until)

BINARY = os.environ.get("REX_BINARY", "")
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWEREX_PYTHON = os.environ.get("REX_SWEREX_PYTHON") or os.path.join(
    SOURCE_ROOT, "build", "swerex-env", "bin", "python")

LOCAL = {"provider": "local", "environment": "local"}
RECORD_KEYS = {"session_id", "sandbox_id", "provider", "environment", "state", "url",
               "working_dir", "metadata", "created_at", "ready_at", "last_active_at", "timeout",
               "max_lifetime", "expires_at", "deadline", "calls"}
EXECUTE_KEYS = {"stdout", "stderr", "results", "artifacts", "exit_code", "error"}
ACTIVE_STATES = ("creating", "ready", "stopping")
NET_ERRORS = (OSError, http.client.HTTPException)


def ts(text):
    """An ISO-8601 time of the API as a unix time."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    t = datetime.datetime.fromisoformat(text)
    if t.tzinfo is None:
        raise AssertionError(f"time {text!r} has no zone (the API's times are UTC)")
    return t.timestamp()


def tmp_paths_naming(text):
    """Entries of the system's /tmp whose name contains `text`."""
    try:
        return sorted(os.path.join("/tmp", n) for n in os.listdir("/tmp") if text in n)
    except FileNotFoundError:
        return []


def environ_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def rid():
    return "rid-" + uuid.uuid4().hex[:12]


class GatewayTestCase(unittest.TestCase):
    """Starts one gateway per test on a fresh storage folder; cleans up everything after it."""

    gateway_args = ()   # extra command-line arguments
    config = None       # dict written to a YAML file passed with --config
    tenant_keys = {}    # tenant -> key: passed as --api-key T=K; requests use `default_key`
    gateway_env = None  # variables added to the gateway's environment
    default_key = None

    def setUp(self):
        # Short: the local sandboxes' unix sockets live under the storage folder, and a socket's
        # path has at most 107 bytes.
        self.tmp = tempfile.mkdtemp(prefix="gw-", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.storage = os.path.join(self.tmp, "s")
        self.gateways = []
        self.known_sids = set()  # every session id this test saw, for the cleanup's checks
        self.addCleanup(self._clean_up)
        self.gw = self.start_gateway()
        self.gateway_id = self.ready["gateway_id"]

    # --- gateway processes ------------------------------------------------------------------

    def base_args(self):
        args = list(self.gateway_args)
        if self.config is not None:
            path = os.path.join(self.tmp, "config.yaml")
            with open(path, "w") as f:
                for key, value in self.config.items():
                    f.write(f"{key}: {json.dumps(value)}\n")  # JSON values are YAML flow values
            args += ["--config", path]
        for tenant, key in self.tenant_keys.items():
            args += ["--api-key", f"{tenant}={key}"]
        return args

    def start_gateway(self, ready_timeout=20.0, extra_args=()):
        headers = self.auth(self.default_key) if self.default_key else {}
        env = None
        if self.gateway_env:
            env = {**os.environ, **self.gateway_env}
        gw = Gateway(BINARY, self.storage, [*self.base_args(), *extra_args], headers=headers,
                     env=env)
        self.gateways.append(gw)
        started = time.monotonic()
        self.ready = gw.wait_ready(ready_timeout)
        self.ready_after = time.monotonic() - started
        self.assertEqual(self.ready.get("status"), "ready", self.ready)
        self.assertIsInstance(self.ready.get("gateway_id"), str)
        return gw

    @staticmethod
    def auth(key):
        return {"Authorization": f"Bearer {key}"}

    def _clean_up(self):
        problems = []
        # How the test left its last gateway says what may outlive it (see left_behind).
        last = self.gateways[-1] if self.gateways else None
        stopped_here = last is not None and last.running()
        names = set(self.known_sids) | set(self.sandbox_dirs())
        # The sandboxes whose files are this machine's: the local provider's. (The other
        # providers' fakes run their sandboxes here too, but a real one's files go with it.)
        local = set(self.sandbox_dirs())
        for gw in self.gateways:
            if not gw.running():
                continue
            try:
                gw.wait_ready(30)  # a restarted gateway may still be reconciling
            except AssertionError as e:
                problems.append(str(e))
            header_sets = ([self.auth(k) for k in self.tenant_keys.values()]
                           if self.tenant_keys else [{}])
            try:
                ids = []
                for h in header_sets:
                    listed = self.list_sessions(gw, headers=h)
                    self.known_sids.update(s["session_id"] for s in listed)
                    names.update(s["session_id"] for s in listed)
                    names.update(s["sandbox_id"] for s in listed if s.get("sandbox_id"))
                    for s in listed:
                        if s.get("provider") == "local":
                            local.update(n for n in (s["session_id"], s.get("sandbox_id")) if n)
                    ids += [(s["session_id"], h) for s in listed if s["state"] in ACTIVE_STATES]

                def destroy(item):
                    try:
                        status, _, body = gw.request("DELETE", f"/api/sessions/{item[0]}",
                                                     headers=item[1])
                    except NET_ERRORS as e:
                        return f"DELETE of session {item[0]} failed: {e!r}"
                    if status != 200:
                        return f"DELETE of session {item[0]} answered {status}: {body[:300]!r}"
                    return None

                with concurrent.futures.ThreadPoolExecutor(8) as pool:
                    problems += [p for p in pool.map(destroy, ids) if p]
            except Exception as e:  # the test failed already; clean up what can be
                problems.append(f"could not destroy the sessions: {e!r}")
            try:
                rc = gw.terminate()
                if rc != 0:
                    problems.append(f"rex gateway exited with status {rc} after SIGTERM; "
                                    f"output: {gw.output_tail()}")
            except AssertionError as e:
                problems.append(str(e))
        names.update(self.sandbox_dirs())  # spares' REX_SANDBOX is their directory's
        local.update(self.sandbox_dirs())
        leaks = self.left_behind(last, stopped_here, names, local)
        # The last resort, for what a failed test left (and what a crash test leaves by design).
        self.kill_sandbox_servers()
        self.kill_sandbox_leftovers(names)
        if os.environ.get("REX_GATEWAY_TEST_LOGS"):  # for debugging: what each gateway printed
            for gw in self.gateways:
                sys.stderr.write(f"\n--- {self.id()}: {' '.join(gw.command)}\n"
                                 f"{gw.output_tail(20000)}\n")
        shutil.rmtree(self.tmp, ignore_errors=True)
        if leaks:
            problems.append("left behind by sandboxes the gateway ended (killed now): "
                            + "; ".join(leaks))
        if problems:
            raise AssertionError("; ".join(problems))

    def left_behind(self, last, stopped_here, names, local, settle=5.0):
        """What is left of the sandboxes the gateway has ended, once its last gateway is gone:
        ["pid N of sandbox S: COMMAND LINE", "directory PATH ...", "file PATH"], empty when
        nothing is (processes get `settle` seconds to finish exiting). `names` are the session
        ids and sandbox directories the test saw; files in /tmp count for those in `local` (the
        local provider's) only.

        What may stay depends on how the test left its last gateway (`last`):
        - running (`stopped_here`): the cleanup destroyed every session and stopped it with
          SIGTERM, so nothing of any sandbox may stay;
        - stopped by the test with SIGTERM: the sessions' sandboxes stay (the next start adopts
          them), the spares may not (SIGTERM removes them), nor anything of a sandbox whose
          directory is gone;
        - killed (kill -9), or ended with an error: all of it stays for a restarted gateway to
          adopt or remove, so nothing is judged.
        Sandboxes of other gateways (their sandbox.json names another gateway_id) are never
        judged."""
        gateway_id = getattr(self, "gateway_id", None)
        if last is None or last.proc.returncode != 0 or not gateway_id:
            return []

        def kept():
            out = set() if stopped_here else set(self.known_sids)
            for d in self.sandbox_dirs():
                info = self.sandbox_json(d)
                if info and info.get("gateway_id") != gateway_id:
                    out.add(d)
                elif not stopped_here and info and info.get("session_id") \
                        and not self.is_spare(d):
                    out.update((d, info["session_id"]))
            return out

        def leftovers():
            keep = kept()
            found = [f"directory {os.path.join(self.sandboxes, d)} (sandbox.json: "
                     f"{self.sandbox_json(d)})" for d in self.sandbox_dirs() if d not in keep]
            found += [f"pid {pid} of sandbox {sandbox}: {line}" for pid, (sandbox, line)
                      in sorted(self.sandbox_processes(names).items()) if sandbox not in keep]
            for name in sorted((names & local) - keep):
                found += [f"file {path}" for path in tmp_paths_naming(name)]
            return found

        deadline = time.monotonic() + settle
        found = leftovers()
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = leftovers()
        return found

    def sandbox_processes(self, names):
        """{pid: (sandbox, command line)} of the live processes of this test's sandboxes: those
        whose command line names a path under <storage>/sandboxes/ (the servers), whose
        REX_SANDBOX is one of `names`, or that run in the storage folder. `sandbox` is the
        directory's name under sandboxes/ (None for a process in the storage folder but in no
        sandbox's)."""
        found = {}
        prefix = self.sandboxes + "/"
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            pid = int(entry)
            line = cmdline(pid)
            sandbox, ours = None, False
            if prefix in line:
                sandbox, ours = line.split(prefix, 1)[1].split("/", 1)[0].split(" ", 1)[0], True
            else:
                tag = next((v[len(b"REX_SANDBOX="):].decode("utf-8", "replace")
                            for v in environ_of(pid) if v.startswith(b"REX_SANDBOX=")), None)
                if tag is not None and tag in names:
                    sandbox, ours = tag, True
                else:
                    try:
                        cwd = os.readlink(f"/proc/{pid}/cwd")
                    except OSError:
                        continue
                    if cwd.startswith(prefix):
                        sandbox, ours = cwd[len(prefix):].split("/", 1)[0], True
                    elif cwd == self.storage or cwd.startswith(self.storage + "/"):
                        ours = True
            if ours and not is_gone(pid):
                found[pid] = (sandbox, line)
        return found

    def kill_sandbox_servers(self):
        """Last resort: SIGTERM (then SIGKILL) every sandbox server named in a sandbox.json,
        and every server whose command line names a socket under this test's sandboxes/ (one
        whose sandbox.json is gone already)."""
        victims = set()
        for name in self.sandbox_dirs():
            info = self.sandbox_json(name)
            pid = info.get("pid") if info else None
            if isinstance(pid, int) and pid > 0 and not is_gone(pid):
                # Only the server of that very sandbox: its command line names its socket.
                if os.path.join(self.sandboxes, name) in cmdline(pid):
                    victims.add(pid)
        marker = " " + self.sandboxes + "/"
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                line = cmdline(int(entry))
                is_server = " server " in line or line.split(" ", 1)[0].endswith("rex-server")
                if marker in line and is_server and not is_gone(int(entry)):
                    victims.add(int(entry))
        for pid in victims:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        for pid in victims:
            while not is_gone(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not is_gone(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def kill_sandbox_leftovers(self, names):
        """Last resort: SIGKILL processes a sandbox of this test started that outlived it
        (sandbox_processes), and remove the sandboxes' notebook folders in /tmp."""
        for pid in self.sandbox_processes(names):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in names:
            for path in tmp_paths_naming(name):
                shutil.rmtree(path, ignore_errors=True)

    def kill_later(self, pid):
        """Kills `pid` (a process the sandbox started) at cleanup if it is still the same one."""
        line = cmdline(pid)

        def kill():
            if not is_gone(pid) and cmdline(pid) == line:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.addCleanup(kill)

    # --- storage ----------------------------------------------------------------------------

    @property
    def sandboxes(self):
        return os.path.join(self.storage, "sandboxes")

    def sandbox_dirs(self):
        try:
            return sorted(d for d in os.listdir(self.sandboxes)
                          if os.path.isdir(os.path.join(self.sandboxes, d)))
        except FileNotFoundError:
            return []

    def sandbox_json(self, name):
        return read_sandbox_json(self.sandboxes, name)

    def is_spare(self, name):
        return is_spare(self.sandbox_json(name))

    def spare_dirs(self):
        """The sandboxes started ahead of time that no session has taken."""
        return [d for d in self.sandbox_dirs() if self.is_spare(d)]

    def session_sandboxes(self):
        """The sessions that have a sandbox directory, by the session named in its sandbox.json
        (a spare handed out keeps its own directory name); a directory whose sandbox.json is
        missing for ten seconds counts under its own name (one just made gets its file within
        milliseconds, a spare starting beside the test; over a second on a loaded machine)."""
        deadline = time.monotonic() + 10
        while (time.monotonic() < deadline
               and any(self.sandbox_json(d) is None for d in self.sandbox_dirs())):
            time.sleep(0.02)
        out = []
        for d in self.sandbox_dirs():
            info = self.sandbox_json(d)
            if info is None:
                out.append(d)
            elif not self.is_spare(d):
                out.append(info.get("session_id"))
        return sorted(out)

    def session_sandbox(self, sid):
        """The sandbox.json of session `sid`'s sandbox, with its directory under "dir"."""
        for d in self.sandbox_dirs():
            info = self.sandbox_json(d)
            if info and info.get("session_id") == sid:
                return {**info, "dir": os.path.join(self.sandboxes, d)}
        raise AssertionError(f"no sandbox directory names session {sid}: {self.sandbox_dirs()}")

    # --- API helpers ------------------------------------------------------------------------

    def create(self, body=None, gw=None, headers=None, expect=201, timeout=None):
        gw = gw or self.gw
        kw = {} if timeout is None else {"timeout": timeout}
        status, data = gw.json("POST", "/api/sessions", {**LOCAL, **(body or {})}, headers, **kw)
        if expect is not None:
            self.assertEqual(status, expect, f"POST /api/sessions {body!r}: {data!r}")
        if status == 201:
            self.known_sids.add(data["session_id"])
            self.assertRecord(data)
            self.assertEqual(data["state"], "ready", data)
        return data

    def get(self, sid, gw=None, headers=None):
        status, data = (gw or self.gw).json("GET", f"/api/sessions/{sid}", headers=headers)
        self.assertEqual(status, 200, f"GET /api/sessions/{sid}: {data!r}")
        return data

    def execute(self, sid, code, language=None, gw=None, headers=None, expect=200):
        body = {"code": code}
        if language:
            body["language"] = language
        status, data = (gw or self.gw).json("POST", f"/api/sessions/{sid}/execute", body,
                                            headers)
        if expect is not None:
            self.assertEqual(status, expect, f"execute {code!r} in {sid}: {data!r}")
        if status == 200:
            self.assertEqual(set(data), EXECUTE_KEYS, data)
        return data

    def list_sessions(self, gw=None, query="", headers=None):
        gw = gw or self.gw
        out, cursor = [], None
        for _ in range(1000):
            q = (query + "&" if query else "") + "limit=50"
            if cursor:
                q += "&cursor=" + urllib.parse.quote(str(cursor))
            status, data = gw.json("GET", "/api/sessions?" + q, headers=headers)
            if status != 200:
                raise AssertionError(f"GET /api/sessions?{q} answered {status}: {data!r}")
            out += data["sessions"]
            cursor = data.get("next_cursor")
            if not cursor:
                return out
        raise AssertionError("GET /api/sessions: more than 1000 pages")

    def log_lines(self, sid, gw=None, headers=None):
        status, _, body = (gw or self.gw).request("GET", f"/api/sessions/{sid}/log",
                                                  headers=headers)
        self.assertEqual(status, 200, f"GET /api/sessions/{sid}/log: {body[:500]!r}")
        lines = []
        for n, line in enumerate(body.decode("utf-8").splitlines()):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise AssertionError(f"transcript of {sid}, line {n + 1} is not JSON: "
                                     f"{line[:300]!r}") from None
            self.assertIsInstance(entry, dict, line)
            self.assertIn("call", entry, line)
            self.assertIn("time", entry, line)
            lines.append(entry)
        return lines

    def replay_events(self, after=0, until=None, timeout=10, headers=None, gw=None,
                      what="an event"):
        """Events with an id above `after`: until one matches `until` (`what` names it in the
        failure when none does within `timeout`), or until quiet."""
        stream = EventStream(gw or self.gw, headers={"Last-Event-ID": str(after),
                                                     **(headers or {})})
        try:
            self.assertEqual(stream.status, 200, getattr(stream, "body", b""))
            if until is None:
                return stream.drain(1.0)
            return stream.collect_until(until, timeout, what)
        finally:
            stream.close()

    # --- assertions -------------------------------------------------------------------------

    def assertRecord(self, data):
        self.assertIsInstance(data, dict, data)
        missing = RECORD_KEYS - set(data)
        self.assertFalse(missing, f"record lacks {sorted(missing)}: {data!r}")
        for key in ("created_at", "deadline"):
            ts(data[key])
        self.assertIsInstance(data["metadata"], dict, data)

    def assertError(self, status, data, expect_status, code, request_id=None):
        """The one error shape: {"error": {"code", "message", "retryable", "request_id"}}."""
        self.assertEqual(status, expect_status, data)
        if isinstance(data, (bytes, bytearray)):
            try:
                data = json.loads(data)
            except ValueError:
                raise AssertionError(f"error answer {status} is not JSON: {data[:300]!r}") \
                    from None
        self.assertIsInstance(data, dict, data)
        self.assertEqual(set(data), {"error"}, data)
        err = data["error"]
        self.assertLessEqual({"code", "message", "retryable", "request_id"}, set(err), err)
        self.assertEqual(err["code"], code, err)
        self.assertIsInstance(err["message"], str, err)
        self.assertTrue(err["message"], err)
        self.assertIsInstance(err["retryable"], bool, err)
        self.assertIsInstance(err["request_id"], str, err)
        if request_id is not None:
            self.assertEqual(err["request_id"], request_id, err)
        return err


# --- 0. probes, metrics and the request errors --------------------------------------------------

class TestBasics(GatewayTestCase):

    def test_probes_and_environments(self):
        status, data = self.gw.json("GET", "/healthz")
        self.assertEqual((status, data), (200, {"status": "ok"}))
        status, data = self.gw.json("GET", "/readyz")
        self.assertEqual(status, 200, data)
        self.assertEqual(data["status"], "ready")
        self.assertEqual(data["gateway_id"], self.gateway_id)
        status, _, body = self.gw.request("GET", "/api/environments")
        self.assertEqual(status, 200, body)
        json.loads(body)
        self.assertIn(b'"local"', body)
        self.assertIn(b'"Python3"', body)

    def test_request_errors(self):
        r = rid()
        status, data = self.gw.json("POST", "/api/sessions", {**LOCAL, "colour": "blue"},
                                    {"X-Request-ID": r})
        self.assertError(status, data, 422, "request.unknown_field", request_id=r)
        status, _, body = self.gw.request("POST", "/api/sessions", b'{"provider": "local",',
                                          {"Content-Type": "application/json"})
        self.assertError(status, body, 400, "request.invalid_json")
        status, data = self.gw.json("POST", "/api/sessions", {"environment": "no-such-env"})
        self.assertError(status, data, 422, "environment.unknown")
        status, data = self.gw.json("POST", "/api/sessions",
                                    {"provider": "no-such-provider", "environment": "local"})
        self.assertError(status, data, 422, "provider.unknown")
        status, data = self.gw.json("GET", "/api/sessions/no-such-session")
        self.assertError(status, data, 404, "session.not_found")
        status, data = self.gw.json("POST", "/api/sessions/no-such-session/execute",
                                    {"code": "1"})
        self.assertError(status, data, 404, "session.not_found")
        self.assertEqual(self.list_sessions(), [], "a refused create left a session")
        self.assertEqual(self.session_sandboxes(), [], "a refused create left a sandbox")

    def test_records_list_patch_files_and_metrics(self):
        a = self.create({"metadata": {"team": "red", "run": "1"}})
        b = self.create({"metadata": {"team": "blue"}})
        self.assertEqual(a["provider"], "local")
        self.assertEqual(a["environment"], "local")
        self.assertEqual(a["metadata"], {"team": "red", "run": "1"})
        self.assertTrue(os.path.isdir(a["working_dir"]), a)
        got = self.get(a["session_id"])
        self.assertEqual(got["session_id"], a["session_id"])
        self.assertEqual(got["deadline"], a["deadline"])

        ids = lambda q: sorted(s["session_id"] for s in self.list_sessions(query=q))  # noqa
        self.assertEqual(ids(""), sorted([a["session_id"], b["session_id"]]))
        self.assertEqual(ids("label=" + urllib.parse.quote("team=red")), [a["session_id"]])
        self.assertEqual(ids("state=ready&provider=local"),
                         sorted([a["session_id"], b["session_id"]]))
        self.assertEqual(ids("state=destroyed"), [])
        # Paging: one per page still finds both, each once.
        status, page = self.gw.json("GET", "/api/sessions?limit=1")
        self.assertEqual(status, 200, page)
        self.assertEqual(len(page["sessions"]), 1, page)
        self.assertTrue(page["next_cursor"], page)
        status, page2 = self.gw.json(
            "GET", "/api/sessions?limit=1&cursor=" + urllib.parse.quote(str(page["next_cursor"])))
        self.assertEqual(status, 200, page2)
        self.assertEqual(len(page2["sessions"]), 1, page2)
        self.assertNotEqual(page["sessions"][0]["session_id"], page2["sessions"][0]["session_id"])

        status, data = self.gw.json("PATCH", f"/api/sessions/{a['session_id']}",
                                    {"metadata": {"run": None, "stage": "two"}})
        self.assertEqual(status, 200, data)
        self.assertEqual(data["metadata"], {"team": "red", "stage": "two"})
        self.assertEqual(self.get(a["session_id"])["metadata"], {"team": "red", "stage": "two"})

        sid = a["session_id"]
        # Files: missing, outside the working directory, written and read on both paths.
        status, data = self.gw.json("GET", f"/api/sessions/{sid}/files?path=nope.txt")
        self.assertError(status, data, 404, "files.not_found")
        status, data = self.gw.json("GET", f"/api/sessions/{sid}/files?path=/etc/passwd")
        self.assertError(status, data, 403, "files.outside_workdir")
        status, data = self.gw.json("GET", f"/api/sessions/{sid}/files?path=../../x")
        self.assertError(status, data, 403, "files.outside_workdir")
        status, data = self.gw.json("POST", f"/api/sessions/{sid}/files",
                                    {"path": "../escape.txt", "content": "x"})
        self.assertError(status, data, 403, "files.outside_workdir")
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(a["working_dir"]),
                                                     "escape.txt")))
        payload = bytes(range(256)) * 3
        status, data = self.gw.json("POST", f"/api/sessions/{sid}/files",
                                    {"path": "bin.dat", "encoding": "base64",
                                     "content": base64.b64encode(payload).decode()})
        self.assertIn(status, (200, 201), data)
        self.assertEqual(data["size"], len(payload), data)
        status, headers, body = self.gw.request("GET", f"/api/sessions/{sid}/files?path=bin.dat")
        self.assertEqual(status, 200, body[:200])
        self.assertEqual(body, payload)
        self.assertTrue(headers.get("content-type", "").startswith("application/octet-stream"),
                        headers)
        with open(os.path.join(a["working_dir"], "bin.dat"), "rb") as f:
            self.assertEqual(f.read(), payload)
        # Multipart on the session's own path (no session_id field).
        body, ctype = multipart([("path", "sub.bin"),
                                 ("file", ("x.bin", payload[::-1], "application/octet-stream"))])
        status, _, answer = self.gw.request("POST", f"/api/sessions/{sid}/files", body,
                                            {"Content-Type": ctype})
        self.assertIn(status, (200, 201), answer)
        self.assertEqual(json.loads(answer)["size"], len(payload))
        status, _, got = self.gw.request("GET", f"/api/sessions/{sid}/files?path=sub.bin")
        self.assertEqual((status, got), (200, payload[::-1]))

        # Python errors and the Python3 environment on the local provider.
        out = self.execute(sid, "1/0")
        self.assertIsNotNone(out["error"], out)
        self.assertEqual(out["error"]["name"], "ZeroDivisionError", out)
        self.assertLessEqual({"name", "value", "traceback"}, set(out["error"]))
        py = self.create({"provider": "local", "environment": "Python3"})
        self.assertEqual((py["provider"], py["environment"]), ("local", "Python3"))
        out = self.execute(py["session_id"], "import sys\nsys.version_info[0]")
        self.assertEqual(out["results"], [{"type": "text", "text": "3"}], out)

        # DELETE checks a given sandbox_id.
        status, data = self.gw.json("DELETE", f"/api/sessions/{b['session_id']}?sandbox_id=other")
        self.assertError(status, data, 409, "session.sandbox_mismatch")
        self.assertEqual(self.get(b["session_id"])["state"], "ready")
        status, data = self.gw.json(
            "DELETE", f"/api/sessions/{b['session_id']}?sandbox_id="
            + urllib.parse.quote(b["sandbox_id"]))
        self.assertEqual((status, data.get("state"), data.get("reason")),
                         (200, "destroyed", "deleted"), data)
        c = self.create()

        status, headers, body = self.gw.request("GET", "/metrics")
        self.assertEqual(status, 200, body)
        self.assertTrue(headers.get("content-type", "").startswith("text/plain"), headers)
        text = body.decode()
        sessions = {}
        for m in re.finditer(r"^rex_gateway_sessions\{([^}]*)\}\s+(\S+)$", text, re.M):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            sessions[(labels.get("state"), labels.get("provider"))] = float(m.group(2))
        self.assertEqual(sessions.get(("ready", "local")), 3.0, text)  # a, py and c
        self.assertEqual(sessions.get(("destroyed", "local")), 1.0, text)  # b
        self.assertNotIn(c["session_id"], (a["session_id"], b["session_id"]))
        for name in ("rex_gateway_create_seconds_", "rex_gateway_requests_total",
                     "rex_gateway_errors_total"):
            self.assertRegex(text, rf"(?m)^{name}\w*(\{{[^}}]*\}})?\s+\S+$")


# --- 1. the seed's flow with curl ---------------------------------------------------------------

class CurlMixin:
    """curl as GATEWAY.md's examples run it."""

    def curl(self, *args):
        """curl as a user types it, plus the status on the last line: (status, body)."""
        done = subprocess.run(["curl", "-s", "-S", "--max-time", "30", "-w", "\n%{http_code}",
                               *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=45)
        self.assertEqual(done.returncode, 0, f"curl {args!r}: {done.stderr!r}")
        body, _, code = done.stdout.rpartition(b"\n")
        return int(code), body

    def curl_json(self, *args):
        status, body = self.curl(*args)
        try:
            return status, json.loads(body)
        except ValueError:
            raise AssertionError(f"curl {args!r} answered {status}: {body[:300]!r}") from None


@unittest.skipUnless(shutil.which("curl"), "curl is not installed")
class TestSeedFlowWithCurl(CurlMixin, GatewayTestCase):

    def test_seed_flow(self):
        url = self.gw.url
        status, rec = self.curl_json("-X", "POST", f"{url}/api/sessions",
                                     "-d", '{"provider": "local", "environment": "local"}')
        self.assertEqual(status, 201, rec)
        self.known_sids.add(rec["session_id"])
        self.assertRecord(rec)
        self.assertEqual(rec["state"], "ready")
        self.assertEqual(rec["provider"], "local")
        sid = rec["session_id"]
        work = rec["working_dir"]
        self.assertTrue(os.path.isdir(work), rec)

        status, got = self.curl_json(f"{url}/api/sessions/{sid}")
        self.assertEqual(status, 200, got)
        self.assertEqual((got["session_id"], got["state"]), (sid, "ready"))

        def run(code, language=None):
            body = {"session_id": sid, "code": code}
            if language:
                body["language"] = language
            status, out = self.curl_json("-X", "POST", f"{url}/api/e2b/execute",
                                         "-d", json.dumps(body))
            self.assertEqual(status, 200, out)
            self.assertEqual(set(out), EXECUTE_KEYS, out)
            self.assertIsNone(out["error"], out)
            self.assertEqual(out["artifacts"], [], out)
            return out

        out = run("print('hello')\nx = 41")
        self.assertEqual(out["stdout"], "hello\n", out)
        self.assertEqual(out["results"], [], out)
        out = run("x + 1")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        out = run("import os\nos.getcwd()")
        self.assertEqual(out["results"], [{"type": "text", "text": repr(work)}], out)
        out = run("cd /tmp && export A=1", "bash")
        self.assertEqual(out["exit_code"], 0, out)
        out = run("pwd; echo $A", "bash")
        self.assertEqual(out["stdout"], "/tmp\n1\n", out)
        self.assertEqual(out["exit_code"], 0, out)

        # A file written with JSON, read back, on disk in the working directory.
        text = "hello world\nsecond line\n"
        status, wrote = self.curl_json("-X", "POST", f"{url}/api/e2b/files", "-d",
                                       json.dumps({"session_id": sid, "path": "hello.txt",
                                                   "content": text}))
        self.assertIn(status, (200, 201), wrote)
        self.assertEqual(wrote["size"], len(text.encode()), wrote)
        self.assertTrue(wrote["path"].endswith("hello.txt"), wrote)
        status, body = self.curl(f"{url}/api/e2b/files/{sid}?path=hello.txt")
        self.assertEqual((status, body), (200, text.encode()))
        with open(os.path.join(work, "hello.txt"), "rb") as f:
            self.assertEqual(f.read(), text.encode())

        # Multipart upload of binary data and its download, byte for byte.
        data = os.urandom(200_000) + b"\r\n--boundary\r\n\0\0"
        src = os.path.join(self.tmp, "data.bin")
        with open(src, "wb") as f:
            f.write(data)
        status, wrote = self.curl_json("-F", f"session_id={sid}", "-F", "path=data.bin",
                                       "-F", f"file=@{src}", f"{url}/api/e2b/files")
        self.assertIn(status, (200, 201), wrote)
        self.assertEqual(wrote["size"], len(data), wrote)
        dst = os.path.join(self.tmp, "downloaded.bin")
        status, _ = self.curl("-o", dst, f"{url}/api/e2b/files/{sid}?path=data.bin")
        self.assertEqual(status, 200)
        with open(dst, "rb") as f:
            self.assertTrue(f.read() == data, "the downloaded file differs from the upload")

        # The working directory's listing, on both paths.
        for path in (f"{url}/api/e2b/files/{sid}?path=.",
                     f"{url}/api/sessions/{sid}/files?path=" + urllib.parse.quote(work)):
            status, listing = self.curl_json(path)
            self.assertEqual(status, 200, listing)
            self.assertEqual(listing["type"], "dir", listing)
            entries = {e["name"]: e for e in listing["entries"]}
            self.assertLessEqual({"hello.txt", "data.bin"}, set(entries), listing)
            self.assertEqual(entries["hello.txt"]["type"], "file")
            self.assertEqual(entries["hello.txt"]["size"], len(text.encode()))
            self.assertEqual(entries["data.bin"]["size"], len(data))
            for e in listing["entries"]:
                self.assertLessEqual({"name", "path", "type", "size", "modified_at"}, set(e), e)

        before = self.log_lines(sid)
        calls = [e["call"] for e in before]
        self.assertEqual(calls[0], "create", calls)
        self.assertEqual(calls.count("execute"), 5, calls)
        self.assertEqual(calls.count("files.write"), 2, calls)
        self.assertGreaterEqual(calls.count("files.read"), 2, calls)

        sandbox = self.session_sandbox(sid)
        pid = sandbox["pid"]
        status, gone = self.curl_json("-X", "DELETE", f"{url}/api/sessions/{sid}")
        self.assertEqual(status, 200, gone)
        self.assertEqual((gone["state"], gone.get("reason")), ("destroyed", "deleted"), gone)
        wait_until(lambda: is_gone(pid), 10, what="the sandbox's server to end")
        self.assertNotIn(sid, self.session_sandboxes())
        # Nothing of the sandbox is left: no process (the shell, the python kernel) and no file
        # outside the storage folder names the session.
        self.assertEqual(processes_naming(sid), {}, "processes left after DELETE")
        self.assertEqual(processes_naming(sandbox["dir"]), {}, "processes left after DELETE")
        self.assertFalse(os.path.exists(sandbox["dir"]), "the sandbox's directory is left")
        self.assertEqual(tmp_paths_naming(sid), [], "files left in /tmp after DELETE")

        status, err = self.curl_json("-X", "POST", f"{url}/api/e2b/execute",
                                     "-d", json.dumps({"session_id": sid, "code": "1"}))
        self.assertError(status, err, 410, "session.destroyed")
        status, err = self.curl_json(f"{url}/api/e2b/files/{sid}?path=hello.txt")
        self.assertError(status, err, 410, "session.destroyed")
        status, got = self.curl_json(f"{url}/api/sessions/{sid}")
        self.assertEqual((status, got["state"]), (200, "destroyed"), got)
        after = self.log_lines(sid)  # kept after destroy
        self.assertEqual(after[:len(before)], before)


# --- 2. kill -9 under load ----------------------------------------------------------------------

class TestCrashRecovery(GatewayTestCase):
    config = {"orphan_grace": 1, "drift_interval": 1, "sweep_interval": 0.1}

    def test_kill9_under_load_loses_no_acknowledged_session(self):
        gw = self.gw
        body = {**LOCAL, "timeout": 900, "max_lifetime": 3600}

        def create_one(i):
            return gw.json("POST", "/api/sessions", {**body, "metadata": {"n": str(i)}})

        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(create_one, range(50)))
        acked = {}
        for status, data in answers:
            self.assertEqual(status, 201, data)
            acked[data["session_id"]] = data
            self.known_sids.add(data["session_id"])
        self.assertEqual(len(acked), 50)
        pids = {sid: self.session_sandbox(sid)["pid"] for sid in acked}

        sids = sorted(acked)
        to_delete, to_execute = sids[:15], sids[15:]
        lock = threading.Lock()
        stop = threading.Event()
        delete_tried, delete_acked = set(), set()
        delete_sent = threading.Event()  # set while a DELETE is on its way
        extra_acked = {}
        unexpected = []  # answers that are neither right nor the connection failing
        executed = [0]

        def executor(k):
            i = k
            while not stop.is_set():
                sid = to_execute[i % len(to_execute)]
                i += 3
                try:
                    status, data = gw.json("POST", f"/api/sessions/{sid}/execute",
                                           {"code": "1+1"}, timeout=20)
                except NET_ERRORS:
                    continue
                with lock:
                    if status == 200 and data.get("results") == [{"type": "text",
                                                                  "text": "2"}]:
                        executed[0] += 1
                    else:
                        unexpected.append(("execute", sid, status, data))

        def deleter():
            for sid in to_delete:
                if stop.is_set():
                    return
                with lock:
                    delete_tried.add(sid)
                delete_sent.set()
                try:
                    status, data = gw.json("DELETE", f"/api/sessions/{sid}", timeout=20)
                except NET_ERRORS:
                    continue
                finally:
                    delete_sent.clear()
                with lock:
                    if status == 200 and data.get("state") == "destroyed":
                        delete_acked.add(sid)
                    else:
                        unexpected.append(("delete", sid, status, data))
                time.sleep(0.1)

        def creator():
            while not stop.is_set():
                try:
                    status, data = gw.json("POST", "/api/sessions", body, timeout=20)
                except NET_ERRORS:
                    continue
                with lock:
                    if status == 201:
                        extra_acked[data["session_id"]] = data
                        self.known_sids.add(data["session_id"])
                    else:
                        unexpected.append(("create", None, status, data))
                time.sleep(0.05)

        threads = [threading.Thread(target=executor, args=(k,), daemon=True) for k in range(3)]
        threads += [threading.Thread(target=deleter, daemon=True),
                    threading.Thread(target=creator, daemon=True),
                    threading.Thread(target=creator, daemon=True)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        # The first cell of a session starts its kernel; under the sanitizers that can take
        # longer than the 1.5 s above. The crash must come after some executes are answered.
        wait_until(lambda: executed[0] > 0, 60, what="an execute answered under load")
        # Kill while a delete is under way (and creates and executes are).
        wait_until(delete_sent.is_set, 5, interval=0.001, what="a DELETE on its way")
        time.sleep(0.015)
        gw.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=30)
            self.assertFalse(t.is_alive(), "a load thread hangs after the gateway was killed")
        self.assertEqual(unexpected, [], "answers under load before the crash")
        self.assertGreater(executed[0], 0, "no execute finished before the crash")

        survivors = {sid: rec for sid, rec in {**acked, **extra_acked}.items()
                     if sid not in delete_tried}
        if os.environ.get("REX_GATEWAY_TEST_LOGS"):
            sys.stderr.write(f"\ncrash: {executed[0]} executes, {len(extra_acked)} more creates "
                             f"acknowledged, deletes acknowledged {len(delete_acked)}, in flight "
                             f"or not sent {len(delete_tried - delete_acked)}\n")
        for sid in survivors:
            if sid in pids:
                self.assertFalse(is_gone(pids[sid]),
                                 f"the sandbox of {sid} ended with the gateway's crash")

        # Restart on the same storage: ready within 5 s.
        gw2 = self.start_gateway(ready_timeout=5.0)
        self.assertEqual(self.ready["gateway_id"], self.gateway_id,
                         "the gateway's id changed across a restart")

        # Reconcile records its decisions before readiness; the ends it decided on (a DELETE
        # cut off while `stopping`) finish beside the requests, within moments.
        def settled():
            listed = {s["session_id"]: s for s in self.list_sessions(gw2)}
            unsettled = {sid: r["state"] for sid, r in listed.items()
                         if r["state"] in ("creating", "stopping")}
            return listed, unsettled

        wait_until(lambda: not settled()[1], 10, interval=0.05,
                   what="the ends cut off by the crash to finish")
        records, _ = settled()
        states = {sid: r["state"] for sid, r in records.items()}
        for sid in survivors:
            self.assertIn(sid, records, f"acknowledged session {sid} lost by the crash")
            self.assertEqual(states[sid], "ready", records[sid])
            self.assertEqual(records[sid]["deadline"], survivors[sid]["deadline"],
                             f"deadline of {sid} changed across the restart")
            if sid in pids:
                self.assertEqual(self.session_sandbox(sid)["pid"], pids[sid],
                                 f"{sid} was not adopted (its sandbox server changed)")
        for sid in delete_acked:
            self.assertEqual(states.get(sid), "destroyed", records.get(sid))
        for sid in delete_tried - delete_acked:
            self.assertIn(states.get(sid), ("ready", "destroyed"), records.get(sid))
        if os.environ.get("REX_GATEWAY_TEST_LOGS"):
            unacked = {sid: r["state"] + "/" + r.get("reason", "") for sid, r in records.items()
                       if sid not in acked and sid not in extra_acked}
            sys.stderr.write(f"crash: sessions whose create was cut off: {unacked}; states of "
                             f"deletes in flight: "
                             f"{[states.get(s) for s in delete_tried - delete_acked]}\n")
        for sid, rec in records.items():
            if sid in acked or sid in extra_acked:
                continue
            # A create whose answer the crash cut off: adopted, or failed as interrupted.
            self.assertIn(rec["state"], ("ready", "failed"), rec)
            if rec["state"] == "failed":
                self.assertEqual(rec.get("reason"), "interrupted", rec)

        def works(sid):
            return sid, gw2.json("POST", f"/api/sessions/{sid}/execute", {"code": "1+1"})

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for sid, (status, data) in pool.map(works, sorted(survivors)):
                self.assertEqual(status, 200, f"execute in {sid} after the restart: {data!r}")
                self.assertEqual(data["results"], [{"type": "text", "text": "2"}], data)

        ready = {sid for sid, s in states.items() if s == "ready"}

        def sandboxes_match():
            dirs = set(self.session_sandboxes())
            return dirs == ready

        try:
            wait_until(sandboxes_match, 10, interval=0.2,
                       what="one sandbox per ready session and no other")
        except AssertionError:
            dirs = set(self.session_sandboxes())
            raise AssertionError(f"sandbox dirs without a ready session: "
                                 f"{sorted(dirs - ready)} "
                                 f"({[records.get(d, {}).get('state') for d in dirs - ready]}); "
                                 f"ready sessions without a sandbox: {sorted(ready - dirs)}")
        owners = self.session_sandboxes()
        self.assertEqual(len(owners), len(set(owners)), "two sandboxes for one session")
        for sid in ready:
            pid = self.session_sandbox(sid)["pid"]
            self.assertFalse(is_gone(pid), f"the server of ready session {sid} is not running")

        for sid in records:
            lines = self.log_lines(sid, gw2)
            if sid in acked or sid in extra_acked:
                self.assertTrue(lines, f"empty transcript for {sid}")

    def test_kill9_keeps_the_line_of_a_proxied_call_answered_before_its_last_20_ms(self):
        """A proxied call's transcript line is written at the latest 20 ms after its answer,
        with nothing else of the session to make it written: a kill -9 half a second later
        loses none of it, and the restarted gateway's transcript has the call's line."""
        sid = self.create()["session_id"]
        pid = self.session_sandbox(sid)["pid"]
        base = f"/api/sessions/{sid}/swerex"
        status, data = self.gw.json("POST", base + "/create_session", {"session": "t"})
        self.assertEqual(status, 200, data)
        request = {"command": "echo written before the crash", "session": "t"}
        status, data = self.gw.json("POST", base + "/run_in_session", request)
        self.assertEqual((status, data.get("output")), (200, "written before the crash\n"), data)
        # Nothing goes to the gateway until the kill: a read of the transcript, another proxied
        # call or any other line of the session would write the pending line itself.
        time.sleep(0.5)
        self.gw.kill9()
        self.assertFalse(is_gone(pid), "the sandbox ended with the gateway's crash")

        gw2 = self.start_gateway()
        self.assertEqual(self.get(sid, gw2)["state"], "ready")
        lines = self.log_lines(sid, gw2)
        calls = [x["call"] for x in lines]
        runs = [x for x in lines if x["call"] == "swerex/run_in_session"]
        self.assertEqual(len(runs), 1, f"the line of the call answered 0.5 s before the kill "
                                       f"-9 is lost: {lines!r}")
        self.assertEqual((runs[0]["request"], runs[0]["status"], runs[0]["response"]["output"]),
                         (request, 200, "written before the crash\n"), runs[0])
        self.assertEqual([c for c in calls if c.startswith("swerex/")],
                         ["swerex/create_session", "swerex/run_in_session"], calls)


class TestReadinessDoesNotWaitForEnds(GatewayTestCase):
    """Reconcile decides and records; the ends it decides on run beside the requests. Sandboxes
    whose servers ignore SIGTERM (each costs the provider's 5 s grace before its SIGKILL) left
    by crashes at chosen points: one cut off while `stopping`, one cut off after its sandbox
    answered but before its record said `ready`. The next start is ready at once, and both
    ends still finish, leaving no process."""
    config = {"orphan_grace": 1, "drift_interval": 1, "sweep_interval": 0.1}

    @classmethod
    def setUpClass(cls):
        cls.wrapper_dir = tempfile.mkdtemp(prefix="gw-wrap-")
        here = os.path.dirname(os.path.abspath(BINARY))
        server = os.path.join(here, "rex-server")
        real = f'"{server}"' if os.access(server, os.X_OK) else f'"{BINARY}" server'
        wrapper = os.path.join(cls.wrapper_dir, "stubborn-server")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n# A sandbox server that ignores SIGTERM: only SIGKILL ends it.\n"
                    f"trap '' TERM\n{real} \"$@\" &\nwait $!\n")
        os.chmod(wrapper, 0o755)
        cls.gateway_env = {"REX_SERVER_PATH": wrapper}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.wrapper_dir, ignore_errors=True)

    def crash_at(self, point, action):
        """Starts a gateway armed to kill itself at `point`, runs `action` on it, and waits
        for the kill."""
        self.gw.kill9()
        self.gateway_env = {**type(self).gateway_env, "REX_CRASH_AT": point}
        try:
            self.gw = self.start_gateway()
        finally:
            self.gateway_env = type(self).gateway_env
        try:
            action(self.gw)
        except NET_ERRORS:
            pass  # the gateway died while answering
        self.gw.proc.wait(timeout=20)
        self.gw.kill9()  # reaped already: closes its log
        self.assertEqual(self.gw.proc.returncode, -signal.SIGKILL, self.gw.output_tail())
        self.assertIn(f"crash point {point} reached", self.gw.output())

    def test_sandboxes_that_ignore_sigterm_do_not_hold_up_readiness(self):
        kept = self.create()["session_id"]
        stopped = self.create()["session_id"]
        stopped_pid = self.session_sandbox(stopped)["pid"]
        self.crash_at("destroy.stopping",
                      lambda gw: gw.json("DELETE", f"/api/sessions/{stopped}", timeout=20))
        cut = []

        def create(gw):
            cut.append(None)
            gw.json("POST", "/api/sessions", {**LOCAL, "environment": "local",
                                              "metadata": {"cut": "off"}}, timeout=20)

        # The create that follows takes a spare (the built-in `local` keeps two): the spare's
        # server was started by this gateway with the same stubborn wrapper.
        self.crash_at("create.sandbox_up", create)
        began = time.monotonic()
        gw = self.start_gateway()
        ready_after = time.monotonic() - began
        # Each stubborn sandbox costs 5 s of grace: waiting for either would take 5 s or more.
        # (Readiness within 1 s is the soak's figure: benchmarks/gateway_crash_soak.sh.)
        self.assertLess(ready_after, 3.0, "readiness waited for sandboxes to end")

        records = {s["session_id"]: s for s in self.list_sessions(gw)}
        interrupted = [sid for sid, r in records.items()
                       if r.get("metadata", {}).get("cut") == "off"]
        self.assertEqual(len(interrupted), 1, records)
        self.known_sids.update(records)
        self.assertEqual(records[interrupted[0]]["state"], "failed", records[interrupted[0]])
        self.assertEqual(records[kept]["state"], "ready")
        status, data = gw.json("POST", f"/api/sessions/{kept}/execute",
                               {"code": "echo ok", "language": "bash"})
        self.assertEqual((status, data.get("stdout")), (200, "ok\n"), data)
        # The ends finish on their own: the grace, then SIGKILL.
        wait_until(lambda: self.get(stopped, gw)["state"] == "destroyed", 20,
                   what="the end cut off by the crash to finish")
        self.assertTrue(is_gone(stopped_pid), "the stopped session's server is still running")
        wait_until(lambda: interrupted[0] not in self.session_sandboxes(), 20,
                   what="the interrupted create's sandbox to go")
        self.assertEqual(processes_naming(os.path.join(self.sandboxes, stopped)), {})


# --- 3. idempotent create -----------------------------------------------------------------------

class TestIdempotentCreate(GatewayTestCase):

    def test_32_concurrent_creates_with_one_key(self):
        key = "idem-" + uuid.uuid4().hex
        body = {**LOCAL, "metadata": {"job": "42"}}
        barrier = threading.Barrier(32, timeout=30)

        def send(_):
            barrier.wait()
            return self.gw.json("POST", "/api/sessions", body, {"Idempotency-Key": key})

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(send, range(32)))
        statuses = [s for s, _ in answers]
        self.assertEqual(statuses, [201] * 32, [a for a in answers if a[0] != 201][:3])
        ids = {data["session_id"] for _, data in answers}
        self.assertEqual(len(ids), 1, ids)
        sid = ids.pop()
        for _, data in answers:
            self.assertEqual(data["state"], "ready", data)
        self.assertEqual(self.session_sandboxes(), [sid])
        self.assertEqual([s["session_id"] for s in self.list_sessions()], [sid])

        status, data = self.gw.json("POST", "/api/sessions", body, {"Idempotency-Key": key})
        self.assertEqual((status, data["session_id"]), (201, sid), data)
        status, data = self.gw.json("POST", "/api/sessions", {**LOCAL, "metadata": {"job": "43"}},
                                    {"Idempotency-Key": key})
        self.assertError(status, data, 422, "idempotency.mismatch")
        self.assertEqual(self.session_sandboxes(), [sid])
        other = self.create({"metadata": {"job": "42"}}, headers={"Idempotency-Key": key + "x"})
        self.assertNotEqual(other["session_id"], sid)
        self.assertEqual(len(self.session_sandboxes()), 2)

    def test_a_key_keeps_its_body_across_restarts(self):
        key = "idem-" + uuid.uuid4().hex
        body = {**LOCAL, "metadata": {"job": "42"}}
        status, first = self.gw.json("POST", "/api/sessions", body, {"Idempotency-Key": key})
        self.assertEqual(status, 201, first)
        sid = first["session_id"]
        self.known_sids.add(sid)

        def answers_as_before(gw, restart):
            status, data = gw.json("POST", "/api/sessions", body, {"Idempotency-Key": key})
            self.assertEqual((status, data.get("session_id")), (201, sid),
                             f"after a {restart} restart: {data!r}")
            status, data = gw.json("POST", "/api/sessions",
                                   {**LOCAL, "metadata": {"job": "43"}}, {"Idempotency-Key": key})
            self.assertError(status, data, 422, "idempotency.mismatch")

        self.assertEqual(self.gw.terminate(), 0, self.gw.output_tail())
        gw = self.start_gateway()
        answers_as_before(gw, "SIGTERM")
        gw.kill9()
        answers_as_before(self.start_gateway(), "kill -9")
        self.assertEqual(self.session_sandboxes(), [sid])


# --- 4. idle timeout, keepalive, max lifetime ---------------------------------------------------

class TestLifetimes(GatewayTestCase):
    """The sweep and the routes wired to the lifecycle's rules, on timeouts of a few seconds and
    a sweep every tenth of a second (the rules themselves, on times of their choosing, are
    tests/unit/test_lifecycle.cpp's). A session expires no earlier than its record says; how
    late depends on the machine's load, so only an order and a reason are asserted, and the
    waits poll with generous limits."""
    config = {"sweep_interval": 0.1}

    @staticmethod
    def at(unix_time):
        """Waits until the clock the gateway reads too (this machine's) is at `unix_time`."""
        time.sleep(max(0.0, unix_time - time.time()))

    def events_until_destroyed(self, sids, gw=None, timeout=20):
        """{sid: [event data, in order]} of `sids`' events, once each has its `destroyed`."""
        pending = set(sids)

        def last(ev):
            if ev["data"].get("type") == "destroyed":
                pending.discard(ev["data"].get("session_id"))
            return not pending

        events = self.replay_events(0, last, timeout, gw=gw,
                                    what=f"the end of sessions {sorted(pending)}")
        out = {sid: [] for sid in sids}
        for ev in events:
            if ev["data"].get("session_id") in out:
                out[ev["data"]["session_id"]].append(ev["data"])
        return out

    def assertExpired(self, events, sid, reason, not_before, gw=None):
        """The sweeper ended `sid` for `reason` (`expired`, then `destroyed`), at `not_before`
        (unix seconds) or later."""
        types = [e["type"] for e in events[sid]]
        self.assertIn("expired", types, f"{sid}: {events[sid]}")
        self.assertIn("destroyed", types, f"{sid}: {events[sid]}")
        self.assertLess(types.index("expired"), types.index("destroyed"), types)
        expired = events[sid][types.index("expired")]
        self.assertEqual((expired["actor"], expired["data"].get("reason")), ("sweeper", reason),
                         expired)
        self.assertGreaterEqual(ts(expired["time"]), not_before - 0.0005,
                                f"{sid} expired before unix time {not_before:.3f}: {expired}")
        rec = self.get(sid, gw)
        self.assertEqual((rec["state"], rec.get("reason")), ("destroyed", reason), rec)

    def keepalive(self, sid, body, gw=None):
        status, rec = (gw or self.gw).json("POST", f"/api/sessions/{sid}/keepalive", body)
        self.assertEqual(status, 200, f"keepalive of {sid}: {rec!r}")
        self.assertRecord(rec)
        return rec

    def test_idle_calls_keepalive_and_the_deadline_through_the_sweep(self):
        idle = self.create({"timeout": 1})
        capped = self.create({"timeout": 2, "max_lifetime": 2.5})
        sid_idle, sid_capped = idle["session_id"], capped["session_id"]
        # A keepalive asking for more than the session has left gets its deadline.
        rec = self.keepalive(sid_capped, {"timeout": 100})
        self.assertEqual(rec["timeout"], 100, rec)
        self.assertEqual(rec["expires_at"], rec["deadline"],
                         f"keepalive extended past the deadline: {rec!r}")
        self.assertAlmostEqual(ts(rec["deadline"]) - ts(rec["created_at"]), 2.5, delta=0.002)
        kept = self.create({"timeout": 2})
        busy = self.create({"timeout": 2})
        sid_kept, sid_busy = kept["session_id"], busy["session_id"]
        for rec in (kept, busy):  # idle since they were ready
            self.assertEqual(rec["last_active_at"], rec["ready_at"], rec)
            self.assertAlmostEqual(ts(rec["expires_at"]), ts(rec["ready_at"]) + 2, delta=0.002)

        # Half a second into their 2 s timeouts (1.5 s to spare on a slow machine): a keepalive
        # with no timeout (the session's own is renewed) and a call.
        self.at(ts(kept["ready_at"]) + 0.5)
        renewed = self.keepalive(sid_kept, {})
        self.assertEqual(renewed["timeout"], 2, renewed)
        self.assertGreaterEqual(ts(renewed["last_active_at"]), ts(kept["ready_at"]) + 0.5,
                                renewed)
        self.assertAlmostEqual(ts(renewed["expires_at"]), ts(renewed["last_active_at"]) + 2,
                               delta=0.002)
        self.at(ts(busy["ready_at"]) + 0.5)
        call_sent = time.time()
        self.execute(sid_busy, "echo tick", "bash")

        events = self.events_until_destroyed([sid_idle, sid_capped, sid_kept, sid_busy])
        self.assertExpired(events, sid_idle, "ttl_idle", ts(idle["expires_at"]))
        # Not at their first idle deadlines: a keepalive and a call are activity.
        self.assertExpired(events, sid_kept, "ttl_idle", ts(renewed["expires_at"]))
        called = self.get(sid_busy)
        self.assertEqual(called["calls"], 1, called)
        self.assertGreaterEqual(ts(called["last_active_at"]), call_sent - 0.001, called)
        self.assertExpired(events, sid_busy, "ttl_idle", ts(called["last_active_at"]) + 2)
        # Kept past its idle deadline by the keepalive, and ended at its deadline all the same.
        self.assertExpired(events, sid_capped, "ttl_max", ts(capped["deadline"]))
        for sid in (sid_capped, sid_kept):
            kinds = [e["type"] for e in events[sid]]
            self.assertIn("keepalive", kinds, kinds)
            self.assertLess(kinds.index("keepalive"), kinds.index("expired"), kinds)
        keepalive = next(e for e in events[sid_kept] if e["type"] == "keepalive")
        self.assertEqual(keepalive["data"].get("expires_at"), renewed["expires_at"], keepalive)

    def test_a_renewal_and_an_idle_deadline_survive_a_restart(self):
        renewed = self.create({"timeout": 1.5})
        sid = renewed["session_id"]
        rec = self.keepalive(sid, {"timeout": 30})
        renewed_expiry = rec["expires_at"]
        self.assertAlmostEqual(ts(renewed_expiry), ts(rec["last_active_at"]) + 30, delta=0.002)
        plain = self.create({"timeout": 1.5})
        sid_plain = plain["session_id"]
        pid = self.session_sandbox(sid)["pid"]

        self.assertEqual(self.gw.terminate(), 0, self.gw.output_tail())
        self.assertFalse(is_gone(pid), "SIGTERM of the gateway ended a session's sandbox")
        gw2 = self.start_gateway()
        # The plain session's last activity is the stored one, not the restart's time: its
        # idle deadline stays where it was (unless the restart took so long that it has passed
        # and the session is ending already).
        rec = self.get(sid_plain, gw2)
        self.assertEqual(rec["last_active_at"], plain["last_active_at"], rec)
        if rec["state"] == "ready":
            self.assertEqual(rec["expires_at"], plain["expires_at"], rec)
        else:
            self.assertIn(rec["state"], ("stopping", "destroyed"), rec)
            self.assertEqual(rec.get("reason"), "ttl_idle", rec)
        events = self.events_until_destroyed([sid_plain], gw2)
        self.assertExpired(events, sid_plain, "ttl_idle", ts(plain["expires_at"]), gw2)

        # The sweep that ended the plain session was past the renewed one's first idle deadline
        # (ready before the plain one, with the same timeout): the renewal holds.
        self.assertLessEqual(ts(renewed["expires_at"]), ts(plain["expires_at"]))
        self.assertIn(sid, {s["session_id"] for s in self.list_sessions(gw2, "state=ready")})
        rec = self.get(sid, gw2)
        self.assertEqual(rec["expires_at"], renewed_expiry, f"the renewal changed: {rec!r}")
        out = self.execute(sid, "21 * 2", gw=gw2)
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)


# --- 5. the sandbox's own hard deadline ---------------------------------------------------------

class TestSandboxHardDeadline(GatewayTestCase):

    def test_sandbox_ends_itself_when_the_gateway_never_returns(self):
        t0 = time.monotonic()
        rec = self.create({"max_lifetime": 3, "timeout": 100})
        sid = rec["session_id"]
        server = self.session_sandbox(sid)["pid"]
        server_command = cmdline(server)
        shell = int(self.execute(sid, "echo $$", "bash")["stdout"].strip())
        kernel = int(self.execute(sid, "import os\nos.getpid()")["results"][0]["text"])
        for pid in (shell, kernel):
            self.kill_later(pid)
        self.gw.kill9()
        if time.monotonic() - t0 < 3:  # (a slow machine may be past the deadline already)
            time.sleep(0.2)
            self.assertFalse(is_gone(server), "the sandbox ended with the gateway")
        # max_lifetime 3 + min(60, max(2, 0.3)) = 5 s; 10 s is generous.
        for pid, what in ((server, "server"), (shell, "shell"), (kernel, "python kernel")):
            left = max(0.5, 10 - (time.monotonic() - t0))
            wait_until(lambda: is_gone(pid), left, interval=0.1,
                       what=f"the sandbox's {what} (pid {pid}) to end by itself (the "
                            f"server: {server_command})")


# --- spares: sandboxes started ahead of time -----------------------------------------------------

class TestSpares(GatewayTestCase):
    """The built-in local environment keeps two sandboxes started ahead of time."""

    def wait_spares(self, n=2, timeout=15):
        def ready():
            spares = self.spare_dirs()
            return len(spares) == n and all(
                not is_gone(self.sandbox_json(d)["pid"]) for d in spares)
        wait_until(ready, timeout, interval=0.05, what=f"{n} spare sandboxes")
        return self.spare_dirs()

    def shells_of(self, name):
        """The bash processes whose environment names sandbox directory `name`."""
        tag = b"REX_SANDBOX=" + name.encode()
        return [int(e) for e in os.listdir("/proc") if e.isdigit()
                and tag in environ_of(int(e))
                and os.path.basename(cmdline(int(e)).split(" ", 1)[0]) == "bash"]

    def test_a_create_takes_a_spare_and_another_replaces_it(self):
        spares = self.wait_spares()
        for d in spares:
            info = self.sandbox_json(d)
            self.assertEqual((info["session_id"], info["spare"]), ("", True), info)
            self.assertIn(os.path.join(self.sandboxes, d), cmdline(info["pid"]))
            # Its notebook shell is up already.
            wait_until(lambda: self.shells_of(d), 5, what=f"the shell of spare {d}")
        self.assertEqual(self.list_sessions(), [], "a spare is listed as a session")

        rec = self.create({"max_lifetime": 600})
        sid = rec["session_id"]
        self.assertIn(rec["sandbox_id"], spares, rec)
        info = self.session_sandbox(sid)
        self.assertEqual((info["session_id"], info["spare"]), (sid, False), info)
        out = self.execute(sid, "pwd; echo $REX_SANDBOX", "bash")
        self.assertEqual(out["stdout"].split(), [rec["working_dir"], rec["sandbox_id"]], out)
        out = self.execute(sid, "x = 6\nx * 7")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        out = self.execute(sid, "x + 1")
        self.assertEqual(out["results"], [{"type": "text", "text": "7"}], out)
        replaced = self.wait_spares()
        self.assertNotIn(rec["sandbox_id"], replaced)

        # A create with variables of its own starts a sandbox of its own.
        own = self.create({"env": {"REX_TEST_VALUE": "v1"}})
        self.assertEqual(own["sandbox_id"], own["session_id"], own)
        out = self.execute(own["session_id"], "echo $REX_TEST_VALUE", "bash")
        self.assertEqual(out["stdout"].strip(), "v1", out)
        self.assertEqual(sorted(self.spare_dirs()), sorted(replaced), "a spare was used")

        # Destroyed like any other sandbox.
        pid = info["pid"]
        status, gone = self.gw.json("DELETE", f"/api/sessions/{sid}")
        self.assertEqual(status, 200, gone)
        wait_until(lambda: is_gone(pid), 10, what="the spare's server to end")
        self.assertFalse(os.path.exists(info["dir"]))

    def test_a_cell_that_ends_the_shell_is_answered_and_the_next_gets_a_new_one(self):
        self.wait_spares()
        sid = self.create()["session_id"]
        out = self.execute(sid, "X=5; echo $X", "bash")
        self.assertEqual(out["stdout"], "5\n", out)
        out = self.execute(sid, "exit 3", "bash")
        self.assertEqual((out["exit_code"], out["error"]["name"]), (-1, "ShellEnded"), out)
        self.assertIn("the next bash cell starts a new shell", out["error"]["value"])
        out = self.execute(sid, "echo [$X]; pwd", "bash")
        self.assertEqual(out["stdout"].split(), ["[]", self.get(sid)["working_dir"]], out)
        self.assertIsNone(out["error"], out)

    def test_a_taken_spare_gets_the_sessions_deadline(self):
        spares = self.wait_spares()
        t0 = time.monotonic()
        rec = self.create({"max_lifetime": 2, "timeout": 100})
        self.assertIn(rec["sandbox_id"], spares, rec)
        server = self.session_sandbox(rec["session_id"])["pid"]
        shell = int(self.execute(rec["session_id"], "echo $$", "bash")["stdout"].strip())
        self.kill_later(shell)
        self.gw.kill9()
        # A spare's own deadline is an hour; the session's is 2 + 2 s.
        for pid, what in ((server, "server"), (shell, "shell")):
            left = max(0.5, 10 - (time.monotonic() - t0))
            wait_until(lambda: is_gone(pid), left, interval=0.1,
                       what=f"the taken spare's {what} to end at the session's deadline")
        self.assertGreater(time.monotonic() - t0, 3.5, "it ended before the session's deadline")

    def test_spares_go_with_the_gateway_and_after_a_crash(self):
        spares = self.wait_spares()
        rec = self.create()
        sid = rec["session_id"]
        new_spares = self.wait_spares()
        pids = [self.sandbox_json(d)["pid"] for d in new_spares]

        # kill -9: the spares stay behind; the next start removes them at once and starts new
        # ones, and adopts the session.
        self.gw.kill9()
        self.assertTrue(all(not is_gone(p) for p in pids), "spares ended with the gateway")
        gw2 = self.start_gateway()
        for pid in pids:
            wait_until(lambda: is_gone(pid), 5, interval=0.05,
                       what="an earlier run's spare to be removed")
        third = self.wait_spares()
        self.assertFalse(set(third) & (set(spares) | set(new_spares)), third)
        self.assertEqual(self.get(sid, gw2)["state"], "ready")
        out = self.execute(sid, "echo alive", "bash", gw=gw2)
        self.assertEqual(out["stdout"].strip(), "alive", out)

        # SIGTERM: the spares are removed, the session's sandbox stays for the next start.
        third_pids = [self.sandbox_json(d)["pid"] for d in third]
        self.assertEqual(gw2.terminate(), 0, gw2.output_tail())
        self.assertEqual(self.spare_dirs(), [], "spares left after the gateway stopped")
        for pid in third_pids:
            self.assertTrue(is_gone(pid), "a spare's server outlived the gateway's stop")
        self.assertEqual(self.session_sandboxes(), [sid])
        self.assertFalse(is_gone(self.session_sandbox(sid)["pid"]))
        self.start_gateway()


# --- 6. quotas ----------------------------------------------------------------------------------

class TestMaxSessions(GatewayTestCase):
    gateway_args = ("--max-sessions", "4")

    def test_ten_concurrent_creates_under_a_quota_of_four(self):
        barrier = threading.Barrier(10, timeout=30)

        def send(_):
            barrier.wait()
            return self.gw.request("POST", "/api/sessions", LOCAL)

        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(send, range(10)))
        created = [json.loads(b) for s, _, b in answers if s == 201]
        refused = [(s, h, b) for s, h, b in answers if s != 201]
        self.assertEqual(len(created), 4, [(s, b[:200]) for s, _, b in answers])
        self.assertEqual(len(refused), 6)
        for status, headers, body in refused:
            self.assertError(status, body, 429, "quota.max_sessions")
            self.assertIn("retry-after", headers, headers)
            self.assertRegex(headers["retry-after"], r"^\d+$")
        self.assertEqual(len(self.session_sandboxes()), 4)
        status, _ = self.gw.json("DELETE", f"/api/sessions/{created[0]['session_id']}")
        self.assertEqual(status, 200)
        self.create()  # the quota is free again


class TestCreatesPerMinute(GatewayTestCase):
    config = {"creates_per_minute": 3}

    def test_fourth_create_in_a_minute_is_refused(self):
        for _ in range(3):
            rec = self.create()
            self.assertEqual(self.gw.json("DELETE", f"/api/sessions/{rec['session_id']}")[0],
                             200)
        status, headers, body = self.gw.request("POST", "/api/sessions", LOCAL)
        self.assertError(status, body, 429, "quota.creates_per_minute")
        self.assertRegex(headers.get("retry-after", ""), r"^\d+$", headers)


# --- 7. drift and orphans -----------------------------------------------------------------------

class TestDrift(GatewayTestCase):
    config = {"orphan_grace": 1, "drift_interval": 1, "sweep_interval": 0.1}
    gateway_args = ("--max-sessions", "1")

    def setUp(self):
        # Neither engine answers (a socket nobody listens on refuses, as a stopped dockerd's
        # does): the local provider's drift is checked all the same.
        engines = tempfile.mkdtemp(prefix="engines-")
        self.addCleanup(shutil.rmtree, engines, ignore_errors=True)
        self.gateway_env = {}
        for name, variable in (("docker", "DOCKER_HOST"), ("podman", "CONTAINER_HOST")):
            path = os.path.join(engines, f"{name}.sock")
            with socket.socket(socket.AF_UNIX) as s:
                s.bind(path)
            self.gateway_env[variable] = f"unix://{path}"
        super().setUp()

    def start_sandbox_server(self, sock):
        """A rex-server on `sock`, started by the test as the local provider starts one (a
        session of its own); stopped at the test's end if it still runs."""
        proc = subprocess.Popen([BINARY, "server", "--unix-socket", sock, "--auth-token",
                                 "t" + uuid.uuid4().hex, "--log-level", "warn"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

        def stop():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        self.addCleanup(stop)
        return proc

    def test_killed_sandbox_becomes_lost_and_frees_quota(self):
        rec = self.create()
        sid = rec["session_id"]
        status, data = self.gw.json("POST", "/api/sessions", LOCAL)
        self.assertError(status, data, 429, "quota.max_sessions")
        pid = self.session_sandbox(sid)["pid"]
        self.assertIn(self.session_sandbox(sid)["dir"], cmdline(pid))
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: self.get(sid)["state"] == "lost", 6, interval=0.1,
                   what=f"{sid} to be lost after its server was killed")
        events = self.replay_events(0, until=lambda e: e["data"]["type"] == "lost"
                                    and e["data"]["session_id"] == sid, timeout=5)
        self.assertEqual(events[-1]["data"]["data"]["state"], "lost", events[-1])
        new = self.create()  # quota freed
        out = self.execute(new["session_id"], "6 * 7")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)

    def test_orphans_of_this_gateway_go_and_others_stay(self):
        def fake_sandbox(name, gateway_id, wait_for_socket):
            d = os.path.join(self.sandboxes, name)
            os.makedirs(os.path.join(d, "work"))
            with open(os.path.join(d, "work", "keep.txt"), "w") as f:
                f.write("keep")
            sock = os.path.join(d, "server.sock")
            proc = self.start_sandbox_server(sock)
            # Its sandbox.json at once: a directory without one is a create cut off, which the
            # drift check (every second here) removes at once, socket and all.
            with open(os.path.join(d, "sandbox.json"), "w") as f:
                json.dump({"gateway_id": gateway_id, "session_id": name,
                           "created_at": time.time() - 30, "pid": proc.pid}, f)
            if wait_for_socket:
                wait_until(lambda: os.path.exists(sock), 10, what="the fake sandbox's socket")
            return d, proc

        # This gateway's may be removed before its server listens: nothing waits for it.
        mine, mine_proc = fake_sandbox("orphan" + uuid.uuid4().hex[:8], self.gateway_id, False)
        other, other_proc = fake_sandbox("foreign" + uuid.uuid4().hex[:8],
                                         "another-gateway-" + uuid.uuid4().hex[:8], True)
        t0 = time.monotonic()
        wait_until(lambda: not os.path.exists(mine), 10, interval=0.1,
                   what="the orphan sandbox of this gateway to be removed")
        wait_until(lambda: mine_proc.poll() is not None or is_gone(mine_proc.pid), 5,
                   what="the orphan's server to be ended")
        time.sleep(max(0.0, 3.5 - (time.monotonic() - t0)))  # several drift checks
        self.assertTrue(os.path.exists(os.path.join(other, "work", "keep.txt")),
                        "another gateway's sandbox was touched")
        self.assertTrue(os.path.exists(os.path.join(other, "sandbox.json")))
        self.assertIsNone(other_proc.poll(), "another gateway's sandbox server was ended")
        self.assertEqual(self.list_sessions(), [])

    def test_an_orphans_server_its_record_does_not_name_is_ended(self):
        """A gateway killed between starting a sandbox's server and recording its pid leaves a
        sandbox.json with pid 0 and a server that listens: the server goes with the orphan."""
        name = "unnamed" + uuid.uuid4().hex[:8]
        d = os.path.join(self.sandboxes, name)
        os.makedirs(os.path.join(d, "work"))
        # Written before the server starts, as the gateway does; created just now, so the drift
        # check leaves it for orphan_grace (1 s) and the server is listening when it goes.
        with open(os.path.join(d, "sandbox.json"), "w") as f:
            json.dump({"gateway_id": self.gateway_id, "session_id": name,
                       "created_at": time.time(), "pid": 0}, f)
        sock = os.path.join(d, "server.sock")
        proc = self.start_sandbox_server(sock)
        wait_until(lambda: os.path.exists(sock) or not os.path.exists(d), 10,
                   what="the unrecorded server's socket")
        self.assertTrue(os.path.exists(sock), "the orphan was removed before its server listened")
        wait_until(lambda: not os.path.exists(d), 10, interval=0.1,
                   what="the orphan sandbox to be removed")
        wait_until(lambda: proc.poll() is not None, 10,
                   what="the server its sandbox.json does not name to be ended")


# --- 8. events ----------------------------------------------------------------------------------

class TestEvents(GatewayTestCase):

    def test_one_sessions_events(self):
        s1 = self.create()["session_id"]
        s2 = self.create()["session_id"]
        stream = EventStream(self.gw, path=f"/api/events?after=0&session_id={s1}")
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200, getattr(stream, "body", b""))
        got = stream.collect_until(lambda e: e["data"]["type"] == "ready", 10,
                                   what=f"the ready event of {s1}")
        # Live ones too: the other session's change is not sent, this one's is.
        status, _ = self.gw.json("PATCH", f"/api/sessions/{s2}", {"metadata": {"k": "v"}})
        self.assertEqual(status, 200)
        status, _ = self.gw.json("PATCH", f"/api/sessions/{s1}", {"metadata": {"k": "v"}})
        self.assertEqual(status, 200)
        got += stream.collect_until(lambda e: e["data"]["type"] == "metadata_changed", 10,
                                    what=f"the metadata_changed event of {s1}")
        got += stream.drain(0.3)
        self.assertEqual([(e["data"]["type"], e["data"]["session_id"]) for e in got],
                         [("created", s1), ("ready", s1), ("metadata_changed", s1)])

    def test_resume_with_last_event_id(self):
        old = self.create()  # events before the stream opens are not sent to it
        stream = EventStream(self.gw)
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200, getattr(stream, "body", b""))
        self.assertTrue(stream.content_type.startswith("text/event-stream"),
                        stream.content_type)
        r1 = rid()
        s1 = self.create(headers={"X-Request-ID": r1})["session_id"]
        first = stream.collect_until(lambda e: e["data"]["type"] == "ready", 10,
                                     what=f"the ready event of {s1}")
        self.assertEqual([(e["data"]["type"], e["data"]["session_id"]) for e in first],
                         [("created", s1), ("ready", s1)])
        for e in first:
            self.assertEqual(e["data"]["request_id"], r1, e)
        self.assertNotIn(old["session_id"], [e["data"]["session_id"] for e in first])
        last = first[-1]["id"]
        stream.close()

        # Changes while disconnected.
        ids = {k: rid() for k in ("patch", "keepalive", "create", "delete")}
        status, _ = self.gw.json("PATCH", f"/api/sessions/{s1}", {"metadata": {"k": "v"}},
                                 {"X-Request-ID": ids["patch"]})
        self.assertEqual(status, 200)
        status, _ = self.gw.json("POST", f"/api/sessions/{s1}/keepalive", {"timeout": 120},
                                 {"X-Request-ID": ids["keepalive"]})
        self.assertEqual(status, 200)
        s2 = self.create(headers={"X-Request-ID": ids["create"]})["session_id"]
        status, _ = self.gw.json("DELETE", f"/api/sessions/{s1}", None,
                                 {"X-Request-ID": ids["delete"]})
        self.assertEqual(status, 200)
        expected = [("metadata_changed", s1, ids["patch"], "ready"),
                    ("keepalive", s1, ids["keepalive"], "ready"),
                    ("created", s2, ids["create"], "creating"),
                    ("ready", s2, ids["create"], "ready"),
                    ("stopping", s1, ids["delete"], "stopping"),
                    ("destroyed", s1, ids["delete"], "destroyed")]

        for how in ({"headers": {"Last-Event-ID": last}}, {"path": f"/api/events?after={last}"}):
            again = EventStream(self.gw, **how)
            try:
                self.assertEqual(again.status, 200, getattr(again, "body", b""))
                got = again.collect_until(lambda e: e["data"]["type"] == "destroyed", 10,
                                          what="the replayed destroyed event")
                got += again.drain(0.5)
            finally:
                again.close()
            self.assertEqual([(e["data"]["type"], e["data"]["session_id"],
                               e["data"]["request_id"], e["data"]["data"].get("state"))
                              for e in got], expected, f"resumed with {how}")
            previous = int(last)
            for e in got:
                d = e["data"]
                self.assertEqual(e["event"], d["type"], e)
                self.assertEqual(str(d["id"]), e["id"], e)
                self.assertGreater(int(e["id"]), previous, "event ids not increasing")
                previous = int(e["id"])
                self.assertEqual(d["tenant"], "default", e)
                self.assertIsInstance(d["actor"], str, e)
                self.assertTrue(d["actor"], e)
                ts(d["time"])

    def test_idle_stream_sends_comments(self):
        stream = EventStream(self.gw, timeout=40)
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200)
        deadline = time.monotonic() + 17
        while stream.comments == 0 and time.monotonic() < deadline and stream.thread.is_alive():
            time.sleep(0.2)
        self.assertGreater(stream.comments, 0, "no ':' comment within 17 s on an idle stream")


# --- 9. artifacts and tenants -------------------------------------------------------------------

class TestArtifactsAndTenants(GatewayTestCase):
    tenant_keys = {"A": "key-of-a-" + uuid.uuid4().hex, "B": "key-of-b-" + uuid.uuid4().hex}
    default_key = None  # every request names its tenant

    def a(self):
        return {"Authorization": f"Bearer {self.tenant_keys['A']}"}

    def b(self):
        return {"X-API-Key": self.tenant_keys["B"]}

    def test_keys(self):
        status, data = self.gw.json("GET", "/api/sessions")
        self.assertError(status, data, 401, "auth.missing_key")
        status, data = self.gw.json("GET", "/api/sessions", headers={"X-API-Key": "wrong"})
        self.assertError(status, data, 401, "auth.invalid_key")
        status, data = self.gw.json("GET", "/api/sessions", headers=self.auth("wrong"))
        self.assertError(status, data, 401, "auth.invalid_key")
        status, data = self.gw.json("POST", "/api/sessions", LOCAL)
        self.assertError(status, data, 401, "auth.missing_key")
        self.assertEqual(self.gw.json("GET", "/healthz")[0], 200)
        self.assertEqual(self.gw.json("GET", "/readyz")[0], 200)
        self.assertEqual(self.gw.json("GET", "/api/sessions", headers=self.a())[0], 200)
        self.assertEqual(self.gw.json("GET", "/api/sessions", headers=self.b())[0], 200)

    def test_artifacts_outlive_the_session_and_tenants_are_apart(self):
        A = self.a()
        sid = self.create(headers=A)["session_id"]
        content = os.urandom(50_000) + b"end\n"
        tree = {"top.txt": b"top\n", "sub/deep.txt": b"deep\n" * 100,
                "sub/more/bytes.bin": os.urandom(3000)}
        self.execute(sid, "mkdir -p tree/sub/more tree/empty", "bash", headers=A)
        for rel, data in [("result.bin", content)] + [(f"tree/{k}", v) for k, v in tree.items()]:
            status, out = self.gw.json("POST", f"/api/sessions/{sid}/files",
                                       {"path": rel, "encoding": "base64",
                                        "content": base64.b64encode(data).decode()}, A)
            self.assertIn(status, (200, 201), out)
        status, saved = self.gw.json("POST", f"/api/sessions/{sid}/artifacts",
                                     {"paths": ["result.bin", "tree"]}, A)
        self.assertEqual(status, 201, saved)
        by_name = {x["name"]: x for x in saved["artifacts"]}
        self.assertEqual(set(by_name), {"result.bin", "tree.tar"}, saved)
        for x in saved["artifacts"]:
            self.assertLessEqual({"name", "path", "size", "sha256", "created_at"}, set(x), x)
        self.assertEqual(by_name["result.bin"]["sha256"], hashlib.sha256(content).hexdigest())
        self.assertEqual(by_name["result.bin"]["size"], len(content))

        # Tenant B sees nothing of A's, before and after the delete.
        B = self.b()
        mine_b = self.create(headers=B)["session_id"]
        self.check_invisible_to_b(sid, B)

        status, gone = self.gw.json("DELETE", f"/api/sessions/{sid}", headers=A)
        self.assertEqual((status, gone["state"]), (200, "destroyed"), gone)
        status, listed = self.gw.json("GET", f"/api/sessions/{sid}/artifacts", headers=A)
        self.assertEqual(status, 200, listed)
        self.assertEqual({x["name"]: x["sha256"] for x in listed["artifacts"]},
                         {k: v["sha256"] for k, v in by_name.items()})
        for name, meta in by_name.items():
            status, headers, body = self.gw.request(
                "GET", f"/api/sessions/{sid}/artifacts/{urllib.parse.quote(name)}", headers=A)
            self.assertEqual(status, 200, body[:300])
            self.assertEqual(hashlib.sha256(body).hexdigest(), meta["sha256"], name)
            self.assertEqual(headers.get("x-rex-sha256"), meta["sha256"], headers)
            self.assertEqual(len(body), meta["size"], name)
            if name == "result.bin":
                self.assertTrue(body == content, "the artifact's bytes differ from the file")
            else:
                self.check_tar(body, tree)

        self.check_invisible_to_b(sid, B)
        listed_b = [s["session_id"] for s in self.list_sessions(headers=B)]
        self.assertEqual(listed_b, [mine_b])
        events_b = self.replay_events(0, headers=B, until=lambda e: e["data"]["type"] == "ready"
                                      and e["data"]["session_id"] == mine_b)
        for e in events_b:
            self.assertEqual(e["data"]["tenant"], "B", e)
            self.assertNotEqual(e["data"]["session_id"], sid, e)
        lines = self.log_lines(sid, headers=A)
        self.assertIn("artifacts.save", [x["call"] for x in lines])
        events_a = self.replay_events(0, headers=A, until=lambda e: e["data"]["type"] ==
                                      "destroyed" and e["data"]["session_id"] == sid)
        saved_events = [e for e in events_a if e["data"]["type"] == "artifact_saved"]
        self.assertTrue(saved_events, [e["data"]["type"] for e in events_a])
        for e in events_a:
            self.assertEqual(e["data"]["tenant"], "A", e)
            self.assertNotEqual(e["data"]["session_id"], mine_b, e)

    def check_invisible_to_b(self, sid, B):
        for method, path, body in (("GET", f"/api/sessions/{sid}", None),
                                   ("GET", f"/api/sessions/{sid}/log", None),
                                   ("GET", f"/api/sessions/{sid}/artifacts", None),
                                   ("GET", f"/api/sessions/{sid}/artifacts/result.bin", None),
                                   ("POST", f"/api/sessions/{sid}/execute", {"code": "1"}),
                                   ("PATCH", f"/api/sessions/{sid}", {"metadata": {"x": "y"}}),
                                   ("DELETE", f"/api/sessions/{sid}", None)):
            status, _, answer = self.gw.request(method, path, body, B)
            self.assertError(status, answer, 404, "session.not_found")
        self.assertNotIn(sid, [s["session_id"] for s in self.list_sessions(headers=B)])

    def check_tar(self, body, tree):
        out = os.path.join(self.tmp, "untar-" + uuid.uuid4().hex[:6])
        os.makedirs(out)
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            tar.extractall(out, filter="data")
        # The archive may hold the directory itself ("tree/...") or its contents.
        root = os.path.join(out, "tree") if os.listdir(out) == ["tree"] else out
        files, dirs = {}, set()
        for here, subdirs, names in os.walk(root):
            rel = os.path.relpath(here, root)
            for d in subdirs:
                dirs.add(os.path.normpath(os.path.join(rel, d)))
            for n in names:
                with open(os.path.join(here, n), "rb") as f:
                    files[os.path.normpath(os.path.join(rel, n))] = f.read()
        self.assertEqual(set(files), set(tree),
                         f"files in the tar of tree/ (layout {os.listdir(out)})")
        for k, v in tree.items():
            self.assertTrue(files[k] == v, f"{k} differs in the tar")
        self.assertEqual(dirs, {"sub", "sub/more", "empty"})


# --- 10. SWE-ReX's own client -------------------------------------------------------------------

SWEREX_SCRIPT = r"""
import asyncio, json, os, sys
from swerex.runtime.remote import RemoteRuntime
from swerex.runtime.abstract import (BashAction, CloseBashSessionRequest, Command,
                                     CreateBashSessionRequest, ReadFileRequest, UploadRequest,
                                     WriteFileRequest)

async def main(host, key, work, upload_source):
    rt = RemoteRuntime(host=host, auth_token=key, timeout=30)
    out = {}
    alive = await rt.is_alive()
    out["alive"] = alive.is_alive
    await rt.create_session(CreateBashSessionRequest(session="agent"))
    obs = await rt.run_in_session(BashAction(command="echo hi", session="agent", check="raise"))
    out["echo"] = obs.output
    out["echo_exit"] = obs.exit_code
    path = os.path.join(work, "swerex.txt")
    await rt.write_file(WriteFileRequest(path=path, content="written by swerex\n"))
    out["read"] = (await rt.read_file(ReadFileRequest(path=path))).content
    await rt.upload(UploadRequest(source_path=upload_source,
                                  target_path=os.path.join(work, "uploaded.txt")))
    r = await rt.execute(Command(command="cat uploaded.txt", shell=True, cwd=work))
    out["execute"] = r.stdout
    await rt.close_session(CloseBashSessionRequest(session="agent"))
    print("RESULT " + json.dumps(out))

asyncio.run(main(*sys.argv[1:]))
"""


class TestProcessesThroughTheProxy(GatewayTestCase):
    """rex's background processes of a session's sandbox, through the proxied protocol."""

    def start_beside(self, base, config):
        """POST processes/start on a thread of its own (its answer streams until the process
        ends); returns the thread and a dict that gets the answer, and waits until the process
        is listed."""
        started = {}

        def start():
            started["answer"] = self.gw.request("POST", base + "/processes/start", config)

        runner = threading.Thread(target=start)
        runner.start()
        wait_until(lambda: self.listed(base, config["tag"]), 10, interval=0.05,
                   what="the process to be listed")
        return runner, started

    def listed(self, base, tag):
        status, data = self.gw.json("GET", base + "/processes")
        self.assertEqual(status, 200, data)
        return [p for p in data["processes"] if p["tag"] == tag]

    def test_a_process_is_listed_fed_and_streamed(self):
        sid = self.create()["session_id"]
        base = f"/api/sessions/{sid}/swerex"
        runner, started = self.start_beside(
            base, {"argv": ["bash", "-c", "read x; echo got $x; echo warn >&2"],
                   "stdin_pipe": True, "tag": "reader"})

        def listed():
            return self.listed(base, "reader")

        self.assertEqual(listed()[0]["stdin_pipe"], True)
        status, data = self.gw.json("POST", base + "/processes/input",
                                    {"tag": "reader", "data": base64.b64encode(b"line\n").decode(),
                                     "close": True})
        self.assertEqual(status, 200, data)
        runner.join(20)
        self.assertFalse(runner.is_alive(), "the stream did not end with the process")
        status, headers, body = started["answer"]
        self.assertEqual((status, headers.get("content-type")), (200, "text/event-stream"))
        text = body.decode()
        self.assertTrue(text.startswith("event: start\n"), text)
        self.assertIn(base64.b64encode(b"got line\n").decode(), text)
        warn = base64.b64encode(b"warn\n").decode()
        self.assertIn(f'event: stderr\ndata: {{"data":"{warn}"}}', text)
        self.assertIn('event: end\ndata: {"exit_code":0', text)
        self.assertEqual(listed(), [])
        status, data = self.gw.json("POST", base + "/processes/signal",
                                    {"tag": "reader", "signal": "SIGTERM"})
        self.assertEqual(status, 511, data)
        self.assertEqual(data["swerexception"]["extra_info"]["rex_error"],
                         "ProcessDoesNotExistError", data)
        calls = [x["call"] for x in self.log_lines(sid)]
        for call in ("processes/start", "processes", "processes/input", "processes/signal"):
            self.assertIn(f"swerex/{call}", calls, calls)

    def test_a_terminal_is_fed_resized_and_recorded(self):
        sid = self.create()["session_id"]
        base = f"/api/sessions/{sid}/swerex"
        runner, started = self.start_beside(
            base, {"argv": ["bash", "--norc", "--noprofile", "-i"], "env": {"PS1": "tty$ "},
                   "tag": "tty", "pty": {"cols": 100, "rows": 30}})

        def feed(keys):
            status, data = self.gw.json("POST", base + "/processes/input",
                                        {"tag": "tty", "data": base64.b64encode(keys).decode()})
            self.assertEqual(status, 200, data)

        def listed():
            return self.listed(base, "tty")

        self.assertEqual(listed()[0]["pty"], {"cols": 100, "rows": 30})
        status, data = self.gw.json("POST", base + "/processes/resize",
                                    {"tag": "tty", "size": {"cols": 120, "rows": 40}})
        self.assertEqual(status, 200, data)
        self.assertEqual(listed()[0]["pty"], {"cols": 120, "rows": 40})
        feed(b"stty size; echo marker-$((6*7))\r")
        feed(b"exit 3\r")
        runner.join(20)
        self.assertFalse(runner.is_alive(), "the stream did not end with the terminal")
        status, _, body = started["answer"]
        self.assertEqual(status, 200)
        self.assertIn('event: end\ndata: {"exit_code":3', body.decode())
        lines = self.log_lines(sid)
        calls = [x["call"] for x in lines]
        self.assertIn("swerex/processes/resize", calls, calls)
        output = "".join(x.get("output", "") for x in lines
                         if x["call"] == "swerex/processes/start" and x.get("event") == "stdout")
        # "exit 3", typed ahead, may be echoed between the two.
        self.assertIn("40 120\r\n", output, lines)
        self.assertIn("marker-42\r\n", output, lines)
        ends = [x for x in lines if x["call"] == "swerex/processes/start" and
                x.get("event") == "end"]
        self.assertEqual([x["response"]["exit_code"] for x in ends], [3], lines)

    def test_proxied_calls_are_in_the_transcript_at_once_and_in_order(self):
        sid = self.create()["session_id"]
        base = f"/api/sessions/{sid}/swerex"
        status, data = self.gw.json("POST", base + "/create_session", {"session": "t"})
        self.assertEqual(status, 200, data)
        # A body as Python's json.dumps writes it, one spread over lines, one that is not JSON.
        bodies = [b'{"command": "echo one", "session": "t"}',
                  b'{\n  "command": "echo two",\n  "session": "t"\n}',
                  b'{"command": "echo three", "session": ',
                  b'{"command":"echo four > four.txt","session":"t","big":123456789012345678901}']
        statuses = [self.gw.request("POST", base + "/run_in_session", body,
                                    {"Content-Type": "application/json"})[0] for body in bodies]
        self.assertEqual(statuses, [200, 200, 422, 200])
        # The transcript read at once has them all.
        runs = [x for x in self.log_lines(sid) if x["call"] == "swerex/run_in_session"]
        self.assertEqual([x["status"] for x in runs], statuses, runs)
        # A line of another kind right after the last call comes after its line.
        status, _, body = self.gw.request("GET", f"/api/sessions/{sid}/files?path=four.txt")
        self.assertEqual(status, 200, body)
        lines = self.log_lines(sid)
        calls = [x["call"] for x in lines]
        runs = [x for x in lines if x["call"] == "swerex/run_in_session"]
        self.assertEqual([x["status"] for x in runs], statuses, lines)
        self.assertEqual(runs[0]["request"], {"command": "echo one", "session": "t"})
        self.assertEqual(runs[1]["request"], {"command": "echo two", "session": "t"})
        self.assertEqual(runs[2]["request"], bodies[2].decode())
        self.assertEqual(runs[3]["request"]["big"], 123456789012345678901)
        self.assertEqual([x["response"].get("output") for x in runs[:2]], ["one\n", "two\n"])
        self.assertEqual(runs[2]["response"]["detail"][0]["type"], "json_invalid", runs[2])
        last_run = max(i for i, c in enumerate(calls) if c == "swerex/run_in_session")
        self.assertEqual(calls[last_run + 1:], ["files.read"], calls)

        # A line still due when the gateway is stopped is written before it exits.
        status, data = self.gw.json("POST", base + "/run_in_session",
                                    {"command": "echo five", "session": "t"})
        self.assertEqual(status, 200, data)
        self.assertEqual(self.gw.terminate(), 0, self.gw.output_tail())
        with open(os.path.join(self.storage, "logs", sid + ".jsonl")) as f:
            last = json.loads(f.read().splitlines()[-1])
        self.assertEqual((last["call"], last["response"].get("output")),
                         ("swerex/run_in_session", "five\n"), last)

    def test_a_sessions_terminal_is_lent_through_the_proxy_and_recorded(self):
        sid = self.create()["session_id"]
        base = f"/api/sessions/{sid}/swerex"
        status, data = self.gw.json("POST", base + "/create_session", {"session": "agent"})
        self.assertEqual(status, 200, data)
        # The attachment streams on a connection of its own until the test closes it.
        conn = self.gw.connection()
        conn.request("POST", base + "/sessions/attach",
                     body=json.dumps({"session": "agent", "size": {"cols": 70, "rows": 12}}),
                     headers={**self.gw.headers, "Content-Type": "application/json"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        seen = b""
        deadline = time.monotonic() + 15

        def decoded():
            """The terminal's bytes in the stdout events read so far (whole lines only)."""
            out = b""
            for line in seen.split(b"\n")[:-1]:
                if line.startswith(b"data: ") and b'"data"' in line:
                    out += base64.b64decode(json.loads(line[6:])["data"])
            return out

        def read_until(text):
            nonlocal seen
            while text not in decoded():
                self.assertLess(time.monotonic(), deadline, f"no {text!r} in {seen!r}")
                seen += resp.read1(65536)

        read_until(b"(rex) ")
        self.assertIn(b"event: start", seen)
        status, data = self.gw.json("POST", base + "/session_input",
                                    {"session": "agent", "input": "stty size; P=$((6*7))\r"})
        self.assertEqual(status, 200, data)
        read_until(b"12 70")
        status, data = self.gw.json("POST", base + "/run_in_session",
                                    {"command": "echo no", "session": "agent", "check": "silent"})
        self.assertEqual(status, 511, data)
        conn.close()  # detaches
        ran = {}

        def agent_runs():
            status, data = self.gw.json("POST", base + "/run_in_session",
                                        {"command": "echo $P", "session": "agent"})
            ran["answer"] = (status, data)
            return status == 200

        wait_until(agent_runs, 5, interval=0.05, what="the session back with its commands")
        self.assertEqual(ran["answer"][1]["output"], "42\n")
        lines = self.log_lines(sid)
        output = "".join(x.get("output", "") for x in lines
                         if x["call"] == "swerex/sessions/attach" and x.get("event") == "stdout")
        self.assertIn("12 70", output, lines)
        calls = [x["call"] for x in lines]
        self.assertIn("swerex/session_input", calls, calls)

class TestSwerexClient(GatewayTestCase):
    tenant_keys = {"default": "gw-key-" + uuid.uuid4().hex}
    default_key = tenant_keys["default"]

    def setUp(self):
        if not os.access(SWEREX_PYTHON, os.X_OK):
            self.skipTest(f"no SWE-ReX virtual environment at {SWEREX_PYTHON}")
        probe = subprocess.run([SWEREX_PYTHON, "-c", "import swerex.runtime.remote"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if probe.returncode != 0:
            self.skipTest(f"swerex is not importable in {SWEREX_PYTHON}: "
                          f"{probe.stdout.decode()[-300:]}")
        super().setUp()

    def test_remote_runtime_through_the_gateway(self):
        rec = self.create()
        sid, work = rec["session_id"], rec["working_dir"]
        source = os.path.join(self.tmp, "upload-me.txt")
        with open(source, "w") as f:
            f.write("uploaded through the gateway\n")
        done = subprocess.run([SWEREX_PYTHON, "-c", SWEREX_SCRIPT,
                               f"{self.gw.url}/api/sessions/{sid}/swerex",
                               self.tenant_keys["default"], work, source],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        lines = [x for x in done.stdout.decode().splitlines() if x.startswith("RESULT ")]
        self.assertEqual(done.returncode, 0, f"stdout: {done.stdout.decode()[-2000:]}\n"
                                             f"stderr: {done.stderr.decode()[-3000:]}")
        self.assertEqual(len(lines), 1, done.stdout)
        out = json.loads(lines[0][len("RESULT "):])
        # SWE-ReX's own server keeps the command's output as printed, newline included.
        self.assertEqual(out, {"alive": True, "echo": "hi\n", "echo_exit": 0,
                               "read": "written by swerex\n",
                               "execute": "uploaded through the gateway\n"})
        with open(os.path.join(work, "swerex.txt")) as f:
            self.assertEqual(f.read(), "written by swerex\n")

        calls = [x["call"] for x in self.log_lines(sid)]
        for action in ("create_session", "run_in_session", "write_file", "read_file", "upload",
                       "execute", "close_session"):
            self.assertIn(f"swerex/{action}", calls, calls)

        # A streamed run (rex's run_in_session_stream): its observation ends up in the
        # transcript like any other answer.
        status, data = self.gw.json("POST", f"/api/sessions/{sid}/swerex/create_session",
                                    {"session": "streamed"})
        self.assertEqual(status, 200, data)
        status, _, body = self.gw.request(
            "POST", f"/api/sessions/{sid}/swerex/run_in_session_stream",
            {"session": "streamed", "command": "echo streamed out"})
        self.assertEqual(status, 200, body)
        self.assertIn(b"event: observation", body)
        ends = [x for x in self.log_lines(sid)
                if x["call"] == "swerex/run_in_session_stream" and "event" in x]
        self.assertEqual(len(ends), 1, ends)
        self.assertEqual(ends[0]["event"], "observation", ends)
        self.assertEqual(ends[0]["response"]["output"], "streamed out\n", ends)

        # The gateway's key, not the sandbox's token; a wrong key is refused.
        status, data = self.gw.json("GET", f"/api/sessions/{sid}/swerex/is_alive",
                                    headers={"Authorization": "Bearer wrong"})
        self.assertError(status, data, 401, "auth.invalid_key")


# --- E2B's port routing: E2b-Sandbox-Port (or a Host of P-<id>.<domain>) reaches a server in the
# sandbox ----------------------------------------------------------------------------------------

# A server of Server-Sent Events for the streamed tests: GET /NAME writes `data: 1`, then waits
# (at most 20 s) for the file NAME.go before it writes `data: 2` and ends; when its caller's
# connection closes meanwhile it leaves the file NAME.closed instead. POST and PUT answer what
# they received: {"method", "path", "headers", "body" (its sha256), "size"}.
SSE_SERVER = r"""
import hashlib, http.server, json, os, select, socket, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        name = self.path.strip("/")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.chunk(b"data: 1\n\n")
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(HERE, name + ".go")):
            if time.monotonic() > deadline:
                return
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                open(os.path.join(HERE, name + ".closed"), "w").close()
                return
        self.chunk(b"data: 2\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        seen = json.dumps({"method": self.command, "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": hashlib.sha256(body).hexdigest(), "size": len(body)}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Seen-By", "the sandbox")
        self.send_header("Content-Length", str(len(seen)))
        self.end_headers()
        self.wfile.write(seen)

    do_PUT = do_POST

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


class TestE2bPortRouting(GatewayTestCase):
    """A request with E2b-Sandbox-Port (not envd's 49983) goes to that port of the sandbox,
    whatever its path: here to python3's http.server started in a local sandbox."""

    def sandbox(self):
        """A local sandbox made through E2B's control API: (id, envdAccessToken, working dir)."""
        status, data = self.gw.json("POST", "/sandboxes", {})
        self.assertEqual(status, 201, data)
        sid = data["sandboxID"]
        self.known_sids.add(sid)
        return sid, data["envdAccessToken"], self.get(sid)["working_dir"]

    def serve_in_sandbox(self, sid, command, port):
        """Starts `command` in the background in the sandbox and waits (bounded) for `port`."""
        self.execute(sid, f"nohup {command} >/dev/null 2>&1 &", language="bash")

        def listening():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_until(listening, 15, interval=0.05, what=f"a server on port {port}")

    @staticmethod
    def port_headers(sid, token, port):
        h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": str(port)}
        if token is not None:
            h["X-Access-Token"] = token
        return h

    def assertE2bError(self, status, body, expect, *words):
        self.assertEqual(status, expect, body)
        data = json.loads(body)
        self.assertEqual(set(data), {"code", "message"}, data)
        self.assertEqual(data["code"], expect, data)
        for word in words:
            self.assertIn(word, data["message"], data)

    def file_server(self):
        """A sandbox running python3's http.server on www/ (www/hello.txt): (id, token, port)."""
        sid, token, work = self.sandbox()
        hello = {"path": "www/hello.txt", "content": "hello from the sandbox\n"}
        status, data = self.gw.json("POST", f"/api/sessions/{sid}/files", hello)
        self.assertEqual(status, 200, data)
        port = free_port()
        self.serve_in_sandbox(
            sid, f"python3 -m http.server {port} --bind 127.0.0.1 --directory {work}/www", port)
        return sid, token, port

    def keep_alive_server(self, sid, work, idle_timeout):
        """An HTTP/1.1 server in the sandbox that answers with its client's port and closes a
        connection idle for `idle_timeout` seconds (None: never): its port."""
        server = (
            "import http.server, sys\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    protocol_version = 'HTTP/1.1'\n"
            f"    timeout = {idle_timeout}\n"
            "    def do_GET(self):\n"
            "        body = str(self.client_address[1]).encode()\n"
            "        self.send_response(200)\n"
            "        self.send_header('Content-Length', str(len(body)))\n"
            "        self.end_headers()\n"
            "        self.wfile.write(body)\n"
            "    def log_message(self, *args):\n"
            "        pass\n"
            "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")
        status, data = self.gw.json("POST", f"/api/sessions/{sid}/files",
                                    {"path": "keep.py", "content": server})
        self.assertEqual(status, 200, data)
        port = free_port()
        self.serve_in_sandbox(sid, f"python3 {work}/keep.py {port}", port)
        return port

    def test_connections_to_a_port_are_kept_between_requests(self):
        # The gateway's second request comes on the first's connection, and a connection the
        # server closed meanwhile (idle for 0.5 s) is not used.
        sid, token, work = self.sandbox()
        port = self.keep_alive_server(sid, work, 0.5)
        h = self.port_headers(sid, token, port)
        first = self.gw.request("GET", "/", headers=h)
        second = self.gw.request("GET", "/", headers=h)
        self.assertEqual((first[0], second[0]), (200, 200))
        self.assertEqual(first[2], second[2], "the second request came on a new connection")
        time.sleep(1.0)  # the server closes the idle connection
        third = self.gw.request("GET", "/", headers=h)
        self.assertEqual(third[0], 200, third)
        self.assertNotEqual(third[2], first[2])

    def test_a_sessions_kept_connections_close_when_it_ends(self):
        # The gateway's end of a kept connection to a port (the remote address is the port):
        # once the session is destroyed its server is gone, and the sweeper closes that end
        # instead of holding it half-closed until some other relayed request.
        def gateway_ends(port):
            ends = []
            with open("/proc/net/tcp") as table:
                for line in table.readlines()[1:]:
                    fields = line.split()
                    # The state: 01 established, 08 close-wait (its peer gone).
                    if int(fields[2].split(":")[1], 16) == port and fields[3] in ("01", "08"):
                        ends.append(fields[3])
            return ends

        sid, token, work = self.sandbox()
        port = self.keep_alive_server(sid, work, None)
        status, _, _ = self.gw.request("GET", "/", headers=self.port_headers(sid, token, port))
        self.assertEqual(status, 200)
        self.assertEqual(gateway_ends(port), ["01"], "the connection to the port was not kept")
        status, _, body = self.gw.request("DELETE", f"/api/sessions/{sid}")
        self.assertIn(status, (200, 204), body)
        wait_until(lambda: not gateway_ends(port), 10, interval=0.05,
                   what=f"the gateway's connections to port {port} closed")

    def test_requests_and_answers_pass_through(self):
        sid, token, port = self.file_server()
        h = self.port_headers(sid, token, port)
        status, headers, body = self.gw.request("GET", "/hello.txt", headers=h)
        self.assertEqual((status, body), (200, b"hello from the sandbox\n"), headers)
        self.assertEqual(headers.get("content-length"), str(len(body)), headers)
        self.assertTrue(headers.get("content-type", "").startswith("text/plain"), headers)
        self.assertIn("SimpleHTTP", headers.get("server", ""), headers)  # the sandbox's answer

        # The other token header; HEAD: the headers of GET and no body; a query is kept.
        h2 = {**self.port_headers(sid, None, port), "e2b-traffic-access-token": token}
        status, headers, body = self.gw.request("GET", "/hello.txt?x=1", headers=h2)
        self.assertEqual((status, body), (200, b"hello from the sandbox\n"))
        status, headers, body = self.gw.request("HEAD", "/hello.txt", headers=h)
        self.assertEqual((status, body), (200, b""))
        self.assertEqual(headers.get("content-length"), "23", headers)

        # A POST with a body: http.server answers 501, passed on as it is.
        status, headers, body = self.gw.request("POST", "/hello.txt", b"a body", headers=h)
        self.assertEqual(status, 501, body)
        self.assertIn(b"Unsupported method", body)

        # The gateway's own paths, with the headers, are the sandbox's too.
        for path in ("/health", "/api/sessions", "/files?path=hello.txt"):
            status, _, body = self.gw.request("GET", path, headers=h)
            self.assertEqual(status, 404, (path, body))
            self.assertIn(b"File not found", body, path)

        # The host form: P-<id>.<domain>, the port in the host name.
        conn = self.gw.connection(10)
        try:
            conn.putrequest("GET", "/hello.txt", skip_host=True)
            conn.putheader("Host", f"{port}-{sid}.sandboxes.test:{self.gw.port}")
            conn.putheader("X-Access-Token", token)
            conn.endheaders()
            resp = conn.getresponse()
            self.assertEqual((resp.status, resp.read()), (200, b"hello from the sandbox\n"))
        finally:
            conn.close()

        # One transcript line per request, as it ended.
        lines = [x for x in self.log_lines(sid) if x["call"] == "e2b.port"]
        self.assertEqual(len(lines), 8, lines)
        self.assertEqual({k: lines[0][k] for k in ("method", "path", "port", "status")},
                         {"method": "GET", "path": "/hello.txt", "port": port, "status": 200})
        self.assertEqual(lines[0]["bytes"], 23, lines[0])
        self.assertEqual([x["status"] for x in lines], [200, 200, 200, 501, 404, 404, 404, 200])
        self.assertEqual(lines[3]["method"], "POST", lines[3])
        self.assertEqual(lines[1]["path"], "/hello.txt?x=1", lines[1])
        self.assertGreaterEqual(self.get(sid)["calls"], 8)

    def test_refusals(self):
        sid, token, port = self.file_server()
        status, _, body = self.gw.request("GET", "/hello.txt",
                                          headers=self.port_headers(sid, None, port))
        self.assertE2bError(status, body, 401, "X-Access-Token", sid)
        status, _, body = self.gw.request("GET", "/hello.txt",
                                          headers=self.port_headers(sid, "wrong", port))
        self.assertE2bError(status, body, 401, sid)
        status, _, body = self.gw.request("GET", "/hello.txt",
                                          headers=self.port_headers("s-no-such", token, port))
        self.assertE2bError(status, body, 404, "s-no-such")
        idle = free_port()
        status, _, body = self.gw.request("GET", "/", headers=self.port_headers(sid, token, idle))
        self.assertE2bError(status, body, 502, sid, str(idle), "connection refused")
        for bad in ("http", "0", "65536", "-1", "80 80"):
            status, _, body = self.gw.request("GET", "/",
                                              headers=self.port_headers(sid, token, bad))
            self.assertE2bError(status, body, 400, "E2b-Sandbox-Port", "1 to 65535")
        status, _, body = self.gw.request("GET", "/", headers={"E2b-Sandbox-Port": str(port),
                                                               "X-Access-Token": token})
        self.assertE2bError(status, body, 400, "E2b-Sandbox-Id")
        # Nothing was wedged: the server still answers through the gateway.
        status, _, body = self.gw.request("GET", "/hello.txt",
                                          headers=self.port_headers(sid, token, port))
        self.assertEqual((status, body), (200, b"hello from the sandbox\n"))
        status, data = self.gw.json("GET", "/readyz")
        self.assertEqual(status, 200, data)

    def test_envd_port_and_no_port_stay_with_the_gateway(self):
        sid, token, _ = self.sandbox()
        for extra in ({}, {"E2b-Sandbox-Port": "49983"}):
            status, _, body = self.gw.request("GET", "/health", headers={
                "E2b-Sandbox-Id": sid, "X-Access-Token": token, **extra})
            self.assertEqual((status, body), (204, b""), extra)
        # A Host that looks like the host form but names no session of this gateway.
        conn = self.gw.connection(10)
        try:
            conn.putrequest("GET", "/healthz", skip_host=True)
            conn.putheader("Host", f"8000-nosuch.sandboxes.test:{self.gw.port}")
            conn.endheaders()
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(json.loads(resp.read()), {"status": "ok"})
        finally:
            conn.close()

    def sse_server(self):
        """A sandbox running SSE_SERVER: (id, token, the server's folder, its port)."""
        sid, token, work = self.sandbox()
        status, data = self.gw.json("POST", f"/api/sessions/{sid}/files",
                                    {"path": "sse/server.py", "content": SSE_SERVER})
        self.assertEqual(status, 200, data)
        port = free_port()
        self.serve_in_sandbox(sid, f"python3 {work}/sse/server.py {port}", port)
        return sid, token, os.path.join(work, "sse"), port

    def open_stream(self, sid, token, port, name):
        """GET /NAME of the SSE server through the gateway, on a raw socket."""
        sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=10)
        sock.sendall(f"GET /{name} HTTP/1.1\r\nHost: {self.gw.address}\r\n"
                     f"E2b-Sandbox-Id: {sid}\r\nE2b-Sandbox-Port: {port}\r\n"
                     f"X-Access-Token: {token}\r\n\r\n".encode())
        return sock

    def read_until(self, sock, got, marker):
        deadline = time.monotonic() + 10
        while marker not in got:
            self.assertLess(time.monotonic(), deadline, f"no {marker!r} in {got!r}")
            piece = sock.recv(65536)
            self.assertTrue(piece, f"the connection ended before {marker!r}: {got!r}")
            got += piece
        return got

    def test_a_streamed_answer_arrives_as_it_is_written(self):
        sid, token, sse, port = self.sse_server()
        sock = self.open_stream(sid, token, port, "one")
        try:
            got = self.read_until(sock, b"", b"data: 1\n\n")
            # The first event is here while the server still waits to write the second.
            self.assertNotIn(b"data: 2", got)
            self.assertFalse(os.path.exists(os.path.join(sse, "one.go")))
            head = got.split(b"\r\n\r\n", 1)[0].decode().lower()
            self.assertTrue(head.startswith("http/1.1 200"), head)
            self.assertIn("content-type: text/event-stream", head)
            self.assertIn("transfer-encoding: chunked", head)
            open(os.path.join(sse, "one.go"), "w").close()
            got = self.read_until(sock, got, b"0\r\n\r\n")  # the answer's end
            self.assertIn(b"data: 2\n\n", got)
        finally:
            sock.close()

        # A caller that leaves closes the connection to the sandbox's server.
        sock = self.open_stream(sid, token, port, "two")
        try:
            self.read_until(sock, b"", b"data: 1\n\n")
        finally:
            sock.close()
        wait_until(lambda: os.path.exists(os.path.join(sse, "two.closed")), 10, interval=0.05,
                   what="the sandbox's server to see the relay's connection close")
        lines = [x for x in self.log_lines(sid) if x["call"] == "e2b.port"]
        self.assertEqual([(x["path"], x["status"], x.get("detached", False)) for x in lines],
                         [("/one", 200, False), ("/two", 200, True)], lines)

    def test_the_request_goes_on_as_sent(self):
        sid, token, _, port = self.sse_server()
        body = os.urandom(3 << 20)
        for method in ("POST", "PUT"):
            h = {**self.port_headers(sid, token, port), "X-Custom": "kept",
                 "Content-Type": "application/octet-stream", "Connection": "keep-alive, X-Hop",
                 "X-Hop": "dropped", "Keep-Alive": "timeout=5"}
            status, headers, answer = self.gw.request(method, "/upload?a=1&b=%20", body, h)
            self.assertEqual(status, 201, answer)
            self.assertEqual(headers.get("x-seen-by"), "the sandbox", headers)
            seen = json.loads(answer)
            self.assertEqual((seen["method"], seen["path"], seen["size"], seen["body"]),
                             (method, "/upload?a=1&b=%20", len(body),
                              hashlib.sha256(body).hexdigest()))
            sent = seen["headers"]
            self.assertEqual(sent.get("x-custom"), "kept", sent)
            self.assertEqual(sent.get("host"), f"127.0.0.1:{port}", sent)
            for gone in ("e2b-sandbox-id", "e2b-sandbox-port", "x-access-token", "x-hop",
                         "keep-alive"):
                self.assertNotIn(gone, sent)

    def test_a_connection_goes_on_after_relayed_answers(self):
        sid, token, sse, port = self.sse_server()
        open(os.path.join(sse, "four.go"), "w").close()  # both events at once
        h = self.port_headers(sid, token, port)
        conn = self.gw.connection(10)
        try:
            for _ in range(2):  # chunked, then with a length, then the gateway's own route
                conn.request("GET", "/four", headers=h)
                resp = conn.getresponse()
                self.assertEqual((resp.status, resp.read()), (200, b"data: 1\n\ndata: 2\n\n"))
                conn.request("POST", "/echo", body=b"x" * 10, headers=h)
                resp = conn.getresponse()
                self.assertEqual(resp.status, 201)
                self.assertEqual(json.loads(resp.read())["size"], 10)
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            self.assertEqual((resp.status, json.loads(resp.read())), (200, {"status": "ok"}))
        finally:
            conn.close()

    def test_a_relay_does_not_hold_up_the_gateways_stop(self):
        sid, token, sse, port = self.sse_server()
        sock = self.open_stream(sid, token, port, "three")
        try:
            got = self.read_until(sock, b"", b"data: 1\n\n")
            started = time.monotonic()
            self.assertEqual(self.gw.terminate(), 0, self.gw.output_tail())
            self.assertLess(time.monotonic() - started, 10, "the stop waited for the relay")
            while True:  # the caller's connection ends, its answer cut off
                piece = sock.recv(65536)
                if not piece:
                    break
                got += piece
            self.assertNotIn(b"0\r\n\r\n", got)
        finally:
            sock.close()
        wait_until(lambda: os.path.exists(os.path.join(sse, "three.closed")), 10, interval=0.05,
                   what="the sandbox's server to see the relay's connection close")

def main():
    global BINARY
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = sys.argv.pop(1)
    if not BINARY or not os.access(BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex [unittest args] "
                 f"(or set REX_BINARY); got {BINARY!r}")
    BINARY = os.path.abspath(BINARY)
    # A last resort against a hang the per-call timeouts miss: print every stack and exit.
    faulthandler.dump_traceback_later(560, exit=True)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
