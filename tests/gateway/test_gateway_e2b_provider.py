#!/usr/bin/env python3
"""The gateway's e2b provider, against a second rex gateway acting as the E2B endpoint.

Each test starts the endpoint (`rex gateway` with its own key and storage; its E2B-compatible
control API and sandbox routing are what E2B's cloud offers), then the gateway under test with
E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL pointing at it, as a user would configure it for
E2B. Sessions created with {"provider": "e2b"} are the endpoint's sandboxes, with rex-server
uploaded and started in them by the provider.

usage: test_gateway_e2b_provider.py PATH/TO/rex [unittest args]
"""
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402
from gateway_process import Gateway  # noqa: E402

ENDPOINT_KEY = "e2b-endpoint-key"
E2B = {"provider": "e2b", "environment": "local"}
UPLOADS = "test_a_session_is_an_endpoint_sandbox_with_state_kept_and_ends_with_it"
# Its create uploads the build's rex-server through the endpoint's file API: some 240 MB under
# the sanitizers, which took over 30 s there beside the other tests.
UPLOAD_CREATE_TIMEOUT = 240.0


class TestE2bProvider(tg.GatewayTestCase):
    config = {"orphan_grace": 1, "drift_interval": 1, "sweep_interval": 0.1}

    def setUp(self):
        # The endpoint first: the gateway under test needs its address in its environment.
        self.endpoint_dir = tempfile.mkdtemp(prefix="e2b-", dir="/tmp")
        args = ["--api-key", ENDPOINT_KEY]
        if self._testMethodName == "test_an_endpoint_that_refuses_says_so":
            args += ["--max-sessions", "1"]
        self.endpoint = Gateway(tg.BINARY, os.path.join(self.endpoint_dir, "s"), args)
        self.addCleanup(self.stop_endpoint)  # runs last: after the gateway under test is gone
        self.endpoint.wait_ready(20)
        self.gateway_env = {"E2B_API_KEY": ENDPOINT_KEY, "E2B_API_URL": self.endpoint.url,
                            "E2B_SANDBOX_URL": self.endpoint.url}
        # The endpoint's sandboxes see this machine's files, so the build's rex-server is "in the
        # template": the provider starts it there. The first test uploads it, as by default.
        if self._testMethodName != UPLOADS:
            server = os.path.join(os.path.dirname(tg.BINARY), "rex-server")
            self.config = dict(self.config, e2b={"template_server_path": server})
        super().setUp()

    def stop_endpoint(self):
        try:
            for s in self.endpoint_sandboxes():
                self.endpoint.request("DELETE", f"/sandboxes/{s['sandboxID']}",
                                      headers={"X-API-KEY": ENDPOINT_KEY})
        finally:
            self.endpoint.terminate()
            shutil.rmtree(self.endpoint_dir, ignore_errors=True)

    def endpoint_sandboxes(self):
        status, data = self.endpoint.json("GET", "/sandboxes",
                                          headers={"X-API-KEY": ENDPOINT_KEY})
        self.assertEqual(status, 200, data)
        return data

    def endpoint_status(self, sandbox_id):
        status, _, _ = self.endpoint.request("GET", f"/sandboxes/{sandbox_id}",
                                             headers={"X-API-KEY": ENDPOINT_KEY})
        return status

    def wait_for(self, what, check, timeout=20.0):
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            value = check()
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"waited {timeout} s for {what}")

    def test_a_session_is_an_endpoint_sandbox_with_state_kept_and_ends_with_it(self):
        s = self.create(E2B, timeout=UPLOAD_CREATE_TIMEOUT)
        self.assertEqual(s["provider"], "e2b")
        listed = self.endpoint_sandboxes()
        self.assertEqual([x["sandboxID"] for x in listed], [s["sandbox_id"]])
        # The gateway's labels, and rex's own (the owner's, for rex gc).
        metadata = listed[0]["metadata"]
        self.assertEqual(metadata["rex.gateway"], self.gateway_id, metadata)
        self.assertEqual(metadata["rex.session"], s["session_id"], metadata)
        self.assertEqual(metadata["rex.managed"], "1", metadata)
        out = self.execute(s["session_id"], "cd /tmp && echo hi", language="bash")
        self.assertEqual(out["stdout"], "hi\n", out)
        self.execute(s["session_id"], "x = 6 * 7")
        out = self.execute(s["session_id"], "x")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        calls = [line.get("call") for line in self.log_lines(s["session_id"])]
        self.assertIn("execute", calls)
        status, data = self.gw.json("DELETE", f"/api/sessions/{s['session_id']}")
        self.assertEqual(status, 200, data)
        self.assertEqual(self.endpoint_status(s["sandbox_id"]), 404)

    def test_kill9_and_restart_adopts_the_sandbox_with_its_state(self):
        s = self.create(E2B)
        self.execute(s["session_id"], "x = 41")
        self.gw.kill9()
        self.gw = self.start_gateway()
        again = self.get(s["session_id"])
        self.assertEqual(again["state"], "ready", again)
        out = self.execute(s["session_id"], "x + 1")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        self.assertEqual(len(self.endpoint_sandboxes()), 1, "a second sandbox was made")

    def test_a_sandbox_killed_behind_the_gateways_back_is_lost(self):
        s = self.create(E2B)
        status, _, body = self.endpoint.request("DELETE", f"/sandboxes/{s['sandbox_id']}",
                                                headers={"X-API-KEY": ENDPOINT_KEY})
        self.assertEqual(status, 204, body)
        self.wait_for("the session to be lost",
                      lambda: self.get(s["session_id"])["state"] == "lost")

    def test_an_orphan_sandbox_with_this_gateways_id_is_removed(self):
        status, made = self.endpoint.json(
            "POST", "/sandboxes",
            {"templateID": "local", "timeout": 300,
             "metadata": {"rex.gateway": self.gateway_id, "rex.session": "s-no-record"}},
            headers={"X-API-KEY": ENDPOINT_KEY})
        self.assertEqual(status, 201, made)
        status, other = self.endpoint.json(
            "POST", "/sandboxes",
            {"templateID": "local", "timeout": 300,
             "metadata": {"rex.gateway": "another-gateway", "rex.session": "s-other"}},
            headers={"X-API-KEY": ENDPOINT_KEY})
        self.assertEqual(status, 201, other)
        self.wait_for("the orphan to be removed",
                      lambda: self.endpoint_status(made["sandboxID"]) == 404)
        self.assertEqual(self.endpoint_status(other["sandboxID"]), 200,
                         "another gateway's sandbox was touched")

    def test_an_endpoint_that_refuses_says_so(self):
        first = self.create(E2B)  # the endpoint allows one sandbox at a time
        status, data = self.gw.json("POST", "/api/sessions", E2B)
        self.assertEqual(status, 502, data)
        message = data["error"]["message"]
        self.assertIn("refused the sandbox", message)
        self.assertIn("has 1 active sessions, its limit", message)  # the endpoint's words
        self.assertEqual([x["sandboxID"] for x in self.endpoint_sandboxes()],
                         [first["sandbox_id"]], "a refused create left a sandbox")


def main():
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        tg.BINARY = os.path.abspath(sys.argv.pop(1))
    if not tg.BINARY or not os.access(tg.BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex [unittest args]")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
