#!/usr/bin/env python3
"""E2B's Python SDK (pinned in tests/swerex/requirements.txt), unchanged, against a real rex
gateway: its control plane (create, get_info, list with a metadata filter and paging,
set_timeout, connect, kill), API keys as tenants, and E2B's error answers.

Usage: PYTHON test_e2b_sdk.py PATH/TO/rex [unittest arguments]
(PYTHON: one with the `e2b` package; without it the test exits 77, skipped, saying why.)

The SDK is pointed at the gateway the way its users do it: E2B_API_URL and E2B_API_KEY.
"""

import datetime
import os
import sys
import time
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402

try:
    from e2b import (CommandExitException, NotFoundException, Sandbox, SandboxException,
                     SandboxQuery, TimeoutException)
except ImportError as e:  # pragma: no cover - the environment decides
    print(f"skipped: E2B's Python SDK is not installed in {sys.executable}: {e}")
    sys.exit(77)

KEY_A = "e2b-key-a-" + uuid.uuid4().hex[:8]
KEY_B = "e2b-key-b-" + uuid.uuid4().hex[:8]


class E2bTestCase(tg.GatewayTestCase):
    tenant_keys = {"team-a": KEY_A, "team-b": KEY_B}
    default_key = KEY_A

    def setUp(self):
        super().setUp()
        os.environ["E2B_API_URL"] = self.gw.url
        os.environ["E2B_API_KEY"] = KEY_A
        os.environ.pop("E2B_DOMAIN", None)
        os.environ.pop("E2B_DEBUG", None)

    def record(self, sid, key=KEY_A):
        return self.get(sid, headers=self.auth(key))

    def sandbox(self, **kwargs):
        sbx = Sandbox.create(**kwargs)
        self.known_sids.add(sbx.sandbox_id)
        return sbx


class TestControlPlane(E2bTestCase):

    def test_create_info_timeout_connect_kill(self):
        before = datetime.datetime.now(datetime.timezone.utc)
        sbx = self.sandbox(metadata={"run": "r1", "owner": "ci"}, envs={"GREETING": "hello"},
                           timeout=120)
        rec = self.record(sbx.sandbox_id)
        self.assertEqual(rec["state"], "ready", rec)
        self.assertEqual(rec["environment"], "local", rec)  # E2B's `base` template
        self.assertEqual(rec["metadata"], {"run": "r1", "owner": "ci"}, rec)
        self.assertEqual(rec["timeout"], 120, rec)
        out = self.execute(sbx.sandbox_id, "echo $GREETING", "bash", headers=self.auth(KEY_A))
        self.assertEqual(out["stdout"], "hello\n", out)

        info = sbx.get_info()
        self.assertEqual(info.sandbox_id, sbx.sandbox_id)
        self.assertEqual(info.template_id, "local")
        self.assertEqual(info.metadata, {"run": "r1", "owner": "ci"})
        self.assertEqual(str(info.state), "running")
        self.assertGreaterEqual(info.started_at, before - datetime.timedelta(seconds=2))
        left = (info.end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertTrue(100 < left <= 121, left)
        self.assertGreater(info.cpu_count, 0)
        self.assertGreater(info.memory_mb, 0)

        sbx.set_timeout(600)
        info = Sandbox.get_info(sbx.sandbox_id)
        left = (info.end_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertTrue(590 < left <= 601, left)
        self.assertEqual(self.record(sbx.sandbox_id)["timeout"], 600)

        again = Sandbox.connect(sbx.sandbox_id, timeout=300)
        self.assertEqual(again.sandbox_id, sbx.sandbox_id)
        self.assertEqual(self.record(sbx.sandbox_id)["timeout"], 300)

        self.assertTrue(Sandbox.kill(sbx.sandbox_id))
        self.assertFalse(Sandbox.kill(sbx.sandbox_id))  # a second kill: not found
        rec = self.record(sbx.sandbox_id)
        self.assertEqual((rec["state"], rec["reason"]), ("destroyed", "deleted"), rec)
        with self.assertRaises(NotFoundException):
            Sandbox.get_info(sbx.sandbox_id)
        with self.assertRaises(SandboxException):
            Sandbox.connect(sbx.sandbox_id)

        # What the SDK did is in the session's events, with the tenant's key as actor.
        events = self.replay_events(0, until=lambda e: e["data"]["type"] == "destroyed"
                                    and e["data"]["session_id"] == sbx.sandbox_id, timeout=5)
        kinds = [e["data"]["type"] for e in events if e["data"]["session_id"] == sbx.sandbox_id]
        self.assertEqual(kinds[0], "created", kinds)
        self.assertIn("keepalive", kinds)
        self.assertEqual(kinds[-1], "destroyed", kinds)

    def test_list_filters_pages_and_tenants(self):
        tag = uuid.uuid4().hex[:8]
        a1 = self.sandbox(metadata={"tag": tag, "n": "1"})
        a2 = self.sandbox(metadata={"tag": tag, "n": "2"})
        other = self.sandbox(metadata={"tag": "other", "n": "3"})
        b = Sandbox.create(metadata={"tag": tag}, api_key=KEY_B)
        self.known_sids.add(b.sandbox_id)

        def ids(paginator):
            found = []
            while paginator.has_next:
                found += [s.sandbox_id for s in paginator.next_items()]
            return found

        mine = ids(Sandbox.list(query=SandboxQuery(metadata={"tag": tag})))
        self.assertEqual(sorted(mine), sorted([a1.sandbox_id, a2.sandbox_id]))
        one = ids(Sandbox.list(query=SandboxQuery(metadata={"tag": tag, "n": "2"})))
        self.assertEqual(one, [a2.sandbox_id])
        paged = Sandbox.list(limit=1)
        first = paged.next_items()
        self.assertEqual(len(first), 1)
        self.assertTrue(paged.has_next)
        rest = ids(paged)
        self.assertEqual(sorted([s.sandbox_id for s in first] + rest),
                         sorted([a1.sandbox_id, a2.sandbox_id, other.sandbox_id]))

        # Tenant B sees its own sandbox only, and A's are not found for it.
        self.assertEqual(ids(Sandbox.list(api_key=KEY_B)), [b.sandbox_id])
        with self.assertRaises(NotFoundException):
            Sandbox.get_info(a1.sandbox_id, api_key=KEY_B)
        self.assertFalse(Sandbox.kill(a1.sandbox_id, api_key=KEY_B))
        self.assertEqual(self.record(a1.sandbox_id)["state"], "ready")
        self.assertTrue(Sandbox.kill(b.sandbox_id, api_key=KEY_B))

    def test_errors_in_e2b_shape(self):
        with self.assertRaises(SandboxException) as caught:
            self.sandbox(template="no-such-template")
        self.assertIn("no-such-template", str(caught.exception))
        for method, path, body, status in [
            ("POST", "/sandboxes", {"templateID": 7}, 400),
            ("POST", "/v2/sandboxes", {"timeout": "soon"}, 400),
            ("POST", "/sandboxes/nope/timeout", {"timeout": 10}, 404),
            ("POST", "/sandboxes/nope/timeout", {}, 400),
            ("GET", "/sandboxes/nope", None, 404),
            ("DELETE", "/sandboxes/nope", None, 404),
            ("POST", "/v2/sandboxes/nope/connect", {"timeout": 10}, 404),
            # What the gateway does not have under E2B's paths answers in E2B's shape too.
            ("GET", "/templates/aliases/no-such-alias", None, 404),
            ("GET", "/v2/templates/t1/builds/b1/status", None, 404),
            ("GET", "/sandboxes/nope/no-such-call", None, 404),
            ("PUT", "/sandboxes", None, 405),
        ]:
            got, data = self.gw.json(method, path, body, headers={"X-API-KEY": KEY_A})
            self.assertEqual(got, status, (method, path, data))
            self.assertEqual(set(data), {"code", "message"}, data)
            self.assertEqual(data["code"], status, data)
        got, data = self.gw.json("GET", "/templates/aliases/no-such-alias",
                                 headers={"X-API-KEY": KEY_A})
        self.assertIn("no-such-alias", data["message"], data)
        # The gateway's own API keeps its own shape.
        got, data = self.gw.json("GET", "/api/no-such-route", headers={"X-API-KEY": KEY_A})
        self.assertEqual((got, set(data)), (404, {"detail"}), data)
        # (Authorization replaces the helper's own Bearer key: only X-API-KEY is left to count.)
        got, data = self.gw.json("GET", "/v2/sandboxes",
                                 headers={"Authorization": "none", "X-API-KEY": "wrong"})
        self.assertEqual((got, data["code"]), (401, 401), data)
        got, data = self.gw.json("GET", "/v2/sandboxes", headers={"Authorization": "none"})
        self.assertEqual((got, data["code"]), (401, 401), data)
        self.assertEqual(self.list_sessions(headers=self.auth(KEY_A)), [])  # nothing half-made


class TestInSandbox(E2bTestCase):
    """sbx.files and sbx.commands through the in-sandbox API, which the gateway serves too
    (E2B_SANDBOX_URL)."""

    def setUp(self):
        super().setUp()
        os.environ["E2B_SANDBOX_URL"] = self.gw.url
        self.addCleanup(os.environ.pop, "E2B_SANDBOX_URL", None)

    def test_files(self):
        sbx = self.sandbox()
        work = self.record(sbx.sandbox_id)["working_dir"]
        files = sbx.files
        info = files.write("notes/hello.txt", "hello from e2b\n")
        self.assertEqual((info.name, info.path), ("hello.txt", work + "/notes/hello.txt"))
        self.assertEqual(files.read("notes/hello.txt"), "hello from e2b\n")
        data = bytes(range(256)) * 12_000  # 3 MB, every byte value
        files.write(work + "/blob.bin", data)
        self.assertEqual(bytes(files.read("blob.bin", format="bytes")), data)
        out = self.execute(sbx.sandbox_id, "wc -c < blob.bin; cat notes/hello.txt", "bash",
                           headers=self.auth(KEY_A))
        self.assertEqual(out["stdout"].split(), [str(len(data)), "hello", "from", "e2b"], out)

        entries = {e.name: e for e in files.list(".")}
        self.assertEqual(set(entries), {"notes", "blob.bin"}, entries)
        self.assertEqual(entries["notes"].type.value, "dir")
        self.assertEqual(entries["blob.bin"].type.value, "file")
        self.assertEqual(entries["blob.bin"].size, len(data))
        self.assertEqual(entries["blob.bin"].path, work + "/blob.bin")
        self.assertTrue(files.exists("notes/hello.txt"))
        self.assertFalse(files.exists("notes/nope.txt"))
        stat = files.get_info("notes/hello.txt")
        self.assertEqual((stat.type.value, stat.size), ("file", 15))

        self.assertTrue(files.make_dir("a/b/c"))
        self.assertFalse(files.make_dir("a/b/c"))  # exists already
        moved = files.rename("notes/hello.txt", "a/b/c/moved.txt")
        self.assertEqual(moved.path, work + "/a/b/c/moved.txt")
        self.assertFalse(files.exists("notes/hello.txt"))
        self.assertEqual(files.read("a/b/c/moved.txt"), "hello from e2b\n")
        deep = [e.path for e in files.list("a", depth=3)]
        self.assertIn(work + "/a/b/c/moved.txt", deep)
        files.remove("a")
        self.assertFalse(files.exists("a"))
        with self.assertRaises(NotFoundException):
            files.read("a/b/c/moved.txt")
        with self.assertRaises(NotFoundException):
            files.remove("a")

        # Every file call is in the session's transcript.
        calls = [e["call"] for e in self.log_lines(sbx.sandbox_id, headers=self.auth(KEY_A))]
        self.assertIn("e2b.files.write", calls)
        self.assertIn("e2b.files.read", calls)
        self.assertIn("e2b.filesystem.Move", calls)

    def test_access_tokens_and_commands(self):
        sbx = self.sandbox()
        other = Sandbox.create(api_key=KEY_B)
        self.known_sids.add(other.sandbox_id)
        base = {"E2b-Sandbox-Id": sbx.sandbox_id, "Content-Type": "application/json",
                "Authorization": "none"}
        for token, status in [(None, 401), ("wrong", 401)]:
            headers = dict(base)
            if token:
                headers["X-Access-Token"] = token
            got, data = self.gw.json("POST", "/filesystem.Filesystem/Stat", {"path": "."},
                                     headers=headers)
            self.assertEqual((got, data["code"]), (status, "unauthenticated"), data)
        # Another sandbox's token opens no door here.
        got, data = self.gw.json("GET", "/filesystem.Filesystem/Stat", None, headers=base)
        self.assertEqual(got, 405, data)
        headers = {**base, "X-Access-Token": other._envd_access_token}
        got, data = self.gw.json("POST", "/filesystem.Filesystem/Stat", {"path": "."},
                                 headers=headers)
        self.assertEqual(got, 401, data)
        headers = {**base, "E2b-Sandbox-Id": "s-nope", "X-Access-Token": "x"}
        got, data = self.gw.json("POST", "/filesystem.Filesystem/Stat", {"path": "."},
                                 headers=headers)
        self.assertEqual((got, data["code"]), (404, "not_found"), data)
        Sandbox.kill(other.sandbox_id, api_key=KEY_B)

    def test_commands(self):
        sbx = self.sandbox(envs={"FROM_CREATE": "c"})
        work = self.record(sbx.sandbox_id)["working_dir"]
        r = sbx.commands.run("echo out; echo err >&2; pwd; echo $FOO $FROM_CREATE",
                             envs={"FOO": "bar"})
        self.assertEqual((r.stdout, r.stderr, r.exit_code), (f"out\n{work}\nbar c\n", "err\n", 0))
        r = sbx.commands.run("pwd", cwd="/tmp")
        self.assertEqual(r.stdout, "/tmp\n")
        with self.assertRaises(CommandExitException) as caught:
            sbx.commands.run("echo partial; exit 3")
        self.assertEqual((caught.exception.exit_code, caught.exception.stdout), (3, "partial\n"))
        seen = []
        r = sbx.commands.run("echo one; echo two", on_stdout=seen.append)
        self.assertEqual("".join(seen), "one\ntwo\n")
        # Output arrives as it is produced, not when the command ends.
        stamped = []
        r = sbx.commands.run("echo first; sleep 1; echo second >&2; echo third",
                             on_stdout=lambda s: stamped.append((time.monotonic(), "out", s)),
                             on_stderr=lambda s: stamped.append((time.monotonic(), "err", s)))
        self.assertEqual((r.stdout, r.stderr), ("first\nthird\n", "second\n"))
        first = next(t for t, _, s in stamped if "first" in s)
        second = next(t for t, kind, s in stamped if kind == "err" and "second" in s)
        self.assertGreater(second - first, 0.7, stamped)
        # Background commands run on in the sandbox: listed, fed, reconnected to, killed.
        handle = sbx.commands.run("sleep 0.2; echo late", background=True)
        self.assertGreater(handle.pid, 0)
        self.assertEqual(handle.wait().stdout, "late\n")
        cat = sbx.commands.run("cat", background=True, stdin=True)
        listed = {p.pid: p for p in sbx.commands.list()}
        self.assertIn(cat.pid, listed, listed)
        self.assertEqual((listed[cat.pid].cmd, listed[cat.pid].args),
                         ("/bin/bash", ["-l", "-c", "cat"]))
        sbx.commands.send_stdin(cat.pid, "fed\n")
        sbx.commands.close_stdin(cat.pid)
        self.assertEqual(cat.wait().stdout, "fed\n")
        slow = sbx.commands.run("sleep 0.6; echo from-slow", background=True)
        again = sbx.commands.connect(slow.pid)
        self.assertEqual(again.wait().stdout, "from-slow\n")
        sleeper = sbx.commands.run("sleep 30", background=True)
        self.assertTrue(sbx.commands.kill(sleeper.pid))
        with self.assertRaises(CommandExitException) as caught:
            sleeper.wait()
        self.assertEqual((caught.exception.exit_code, caught.exception.error),
                         (-1, "signal: killed"))
        self.assertFalse(sbx.commands.kill(sleeper.pid))
        self.assertEqual(sbx.commands.list(), [])
        with self.assertRaises(NotFoundException) as caught:
            sbx.commands.send_stdin(sleeper.pid, "x")
        self.assertIn(f"no process with pid {sleeper.pid}", str(caught.exception))
        with self.assertRaises(TimeoutException):
            sbx.commands.run("sleep 30", timeout=1)
        calls = [e["call"] for e in self.log_lines(sbx.sandbox_id, headers=self.auth(KEY_A))]
        self.assertGreaterEqual(calls.count("e2b.process.Start"), 5, calls)


def main():
    from importlib.metadata import version
    print(f"E2B Python SDK {version('e2b')}")
    tg.main()  # the rex executable from argv, a deadline, unittest


if __name__ == "__main__":
    main()
