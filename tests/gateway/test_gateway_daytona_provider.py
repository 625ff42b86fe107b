#!/usr/bin/env python3
"""The gateway's daytona provider, against tests/daytona's stack: a fake of Daytona's API and
toolbox (its sandboxes are directories and loopback addresses of this machine) behind Prism
proxies that check every request and answer against Daytona's OpenAPI documents.

Each test starts the stack (node tests/daytona/stack.mjs), then the gateway under test with
DAYTONA_API_URL and DAYTONA_API_KEY pointing at it, as a user would configure it for Daytona.
Sessions created with {"provider": "daytona"} are the fake's sandboxes, with rex-server uploaded
and started in them by the provider. When the stack stops, Prism's complaints fail the test.

usage: test_gateway_daytona_provider.py PATH/TO/rex [unittest args]
       (REX_DAYTONA_ENV: where scripts/common.sh's rex_daytona_env installed the stack's parts;
       REX_NODE: node, default `node` on PATH)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STACK = os.path.join(HERE, "..", "daytona", "stack.mjs")
DAYTONA = {"provider": "daytona", "environment": "local"}
ENV_DIR = os.environ.get("REX_DAYTONA_ENV", "")
NODE = os.environ.get("REX_NODE") or shutil.which("node") or ""


def unavailable():
    if not ENV_DIR or not os.path.isdir(os.path.join(ENV_DIR, "openapi")):
        return ("Prism and Daytona's OpenAPI documents are not installed (REX_DAYTONA_ENV; "
                "scripts/common.sh's rex_daytona_env installs them)")
    if not NODE or not os.access(NODE, os.X_OK):
        return "node is not installed"
    return ""


class Stack:
    """stack.mjs as a child process: its stdin is a pipe held here, so it ends with the test."""

    def __init__(self):
        self.log_dir = tempfile.mkdtemp(prefix="daytona-stack-", dir="/tmp")
        self.log_path = os.path.join(self.log_dir, "stack.log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [NODE, STACK], stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "REX_DAYTONA_ENV": ENV_DIR},
            start_new_session=True)  # a group of its own: killed, it takes the fake and Prism
        until = time.monotonic() + 60
        while True:
            text = self.output()
            if "READY " in text and "\n" in text[text.index("READY "):]:
                break
            if time.monotonic() > until or self.process.poll() is not None:
                raise RuntimeError(f"the Daytona stack did not start: {text}")
            time.sleep(0.05)
        line = text[text.index("READY "):].split("\n", 1)[0]
        fields = dict(word.split("=", 1) for word in line.split()[1:])
        self.api_url, self.api_key, self.fake_url = fields["api"], fields["key"], fields["fake"]

    def output(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        """Ends the stack; Prism's complaints (and the fake's exit) as text, empty when none."""
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        text = self.output()
        shutil.rmtree(self.log_dir, ignore_errors=True)
        if self.process.returncode == 0 and "VIOLATIONS 0" in text:
            return ""
        at = text.find("VIOLATIONS ")
        return text[at:] if at >= 0 else f"the stack ended without its report:\n{text[-4000:]}"

    def api(self, method, path, body=None):
        request = urllib.request.Request(
            self.api_url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.api_key}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def sandboxes(self):
        with urllib.request.urlopen(self.fake_url + "/_fake/sandboxes", timeout=30) as answer:
            return json.loads(answer.read())


class TestDaytonaProvider(tg.GatewayTestCase):
    config = {"orphan_grace": 1, "drift_interval": 1, "sweep_interval": 0.1}

    def setUp(self):
        why = unavailable()
        if why:
            self.skipTest(why)
        self.stack = Stack()
        self.addCleanup(self.stop_stack)  # runs last: after the gateway under test is gone
        self.gateway_env = {"DAYTONA_API_URL": self.stack.api_url,
                            "DAYTONA_API_KEY": self.stack.api_key}
        super().setUp()

    def stop_stack(self):
        complaints = self.stack.stop()
        self.assertEqual(complaints, "", "Prism found traffic Daytona's documents do not allow")

    def live_sandboxes(self):
        return [s for s in self.stack.sandboxes() if s["state"] not in ("destroyed", "destroying")]

    def wait_for(self, what, check, timeout=20.0):
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            value = check()
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"waited {timeout} s for {what}")

    def test_a_session_is_a_daytona_sandbox_with_state_kept_and_ends_with_it(self):
        s = self.create(DAYTONA, timeout=120)
        self.assertEqual(s["provider"], "daytona")
        status, sandbox = self.stack.api("GET", f"/sandbox/{s['sandbox_id']}")
        self.assertEqual(status, 200, sandbox)
        self.assertEqual(sandbox["labels"].get("rex.gateway"), self.gateway_id)
        self.assertEqual(sandbox["labels"].get("rex.session"), s["session_id"])
        out = self.execute(s["session_id"], "cd /tmp && echo hi", language="bash")
        self.assertEqual(out["stdout"], "hi\n", out)
        self.execute(s["session_id"], "x = 6 * 7")
        out = self.execute(s["session_id"], "x")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        status, data = self.gw.json("DELETE", f"/api/sessions/{s['session_id']}")
        self.assertEqual(status, 200, data)
        self.wait_for("nothing left in the fake", lambda: self.stack.sandboxes() == [])

    def test_kill9_and_restart_adopts_the_sandbox_with_its_state(self):
        s = self.create(DAYTONA, timeout=120)
        self.execute(s["session_id"], "x = 41")
        self.gw.kill9()
        self.gw = self.start_gateway()
        again = self.get(s["session_id"])
        self.assertEqual(again["state"], "ready", again)
        out = self.execute(s["session_id"], "x + 1")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        self.assertEqual(len(self.live_sandboxes()), 1, "a second sandbox was made")

    def test_a_sandbox_deleted_behind_the_gateways_back_is_lost(self):
        s = self.create(DAYTONA, timeout=120)
        status, body = self.stack.api("DELETE", f"/sandbox/{s['sandbox_id']}")
        self.assertEqual(status, 200, body)
        self.wait_for("the session to be lost",
                      lambda: self.get(s["session_id"])["state"] == "lost")

    def test_an_orphan_sandbox_with_this_gateways_id_is_removed(self):
        ours = {"snapshot": "daytonaio/sandbox:fake",
                "labels": {"rex.gateway": self.gateway_id, "rex.session": "s-no-record"}}
        status, made = self.stack.api("POST", "/sandbox", ours)
        self.assertEqual(status, 200, made)
        theirs = {"snapshot": "daytonaio/sandbox:fake",
                  "labels": {"rex.gateway": "another-gateway", "rex.session": "s-other"}}
        status, other = self.stack.api("POST", "/sandbox", theirs)
        self.assertEqual(status, 200, other)
        self.wait_for("the orphan to be removed",
                      lambda: self.stack.api("GET", f"/sandbox/{made['id']}")[0] == 404,
                      timeout=30)
        status, kept = self.stack.api("GET", f"/sandbox/{other['id']}")
        self.assertEqual(status, 200, "another gateway's sandbox was touched")
        self.assertNotIn(kept["state"], ("destroyed", "destroying"), kept)
        self.stack.api("DELETE", f"/sandbox/{other['id']}")


def main():
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        tg.BINARY = os.path.abspath(sys.argv.pop(1))
    if not tg.BINARY or not os.access(tg.BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex [unittest args]")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
