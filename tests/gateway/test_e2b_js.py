#!/usr/bin/env python3
"""E2B's JavaScript SDK (tests/gateway/e2b_js, pinned by its package-lock.json), unchanged,
against a real rex gateway: e2b_js/control_plane.mjs, files.mjs and commands.mjs run under Node with
E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at a gateway this test starts, with two
keys of two tenants.

Usage: test_e2b_js.py PATH/TO/rex [unittest arguments]; REX_E2B_JS names the directory where
`npm ci` installed the SDK (scripts/common.sh: rex_e2b_js_env). Without Node or the SDK it exits
77 (skipped), saying why.
"""

import os
import shutil
import subprocess
import sys
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_gateway as tg  # noqa: E402

SDK_DIR = os.environ.get("REX_E2B_JS", "")
NODE = shutil.which("node")
if not NODE or not os.path.isdir(os.path.join(SDK_DIR, "node_modules", "e2b")):
    print(f"skipped: needs node ({NODE or 'not found'}) and E2B's JavaScript SDK installed in "
          f"REX_E2B_JS ({SDK_DIR or 'unset'}/node_modules/e2b): run scripts/test.sh")
    sys.exit(77)

KEY_A = "e2b-js-a-" + uuid.uuid4().hex[:8]
KEY_B = "e2b-js-b-" + uuid.uuid4().hex[:8]


class TestJavaScriptSdk(tg.GatewayTestCase):
    tenant_keys = {"team-a": KEY_A, "team-b": KEY_B}
    default_key = KEY_A

    def node(self, script):
        """Runs e2b_js/SCRIPT under Node against this test's gateway; its output."""
        env = {**os.environ, "E2B_API_URL": self.gw.url, "E2B_SANDBOX_URL": self.gw.url,
               "E2B_API_KEY": KEY_A, "REX_E2B_KEY_B": KEY_B, "REX_E2B_JS": SDK_DIR}
        for name in ("E2B_DOMAIN", "E2B_DEBUG"):
            env.pop(name, None)
        done = subprocess.run([NODE, os.path.join(HERE, "e2b_js", script)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout)
        return done.stdout

    def test_files(self):
        self.assertIn("ok: E2B JavaScript SDK files", self.node("files.mjs"))
        listed = self.list_sessions(headers=self.auth(KEY_A))
        self.assertEqual([s["state"] for s in listed], ["destroyed"], listed)

    def test_commands(self):
        self.assertIn("ok: E2B JavaScript SDK commands", self.node("commands.mjs"))
        sid = self.list_sessions(headers=self.auth(KEY_A))[0]["session_id"]
        lines = self.log_lines(sid, headers=self.auth(KEY_A))
        calls = [e["call"] for e in lines]
        self.assertEqual(calls.count("e2b.process.Start"), 9, calls)
        for call in ("List", "SendInput", "CloseStdin", "Connect"):
            self.assertIn(f"e2b.process.{call}", calls)
        # Two kills of one process: the second is refused, and recorded so.
        kills = [e for e in lines if e["call"] == "e2b.process.SendSignal"]
        self.assertEqual([k.get("error") for k in kills], [None, "not_found"], kills)
        # Each command's end is in its line: the killed one's status, the others' exit codes.
        ends = [e.get("status") for e in lines if e["call"] == "e2b.process.Start"]
        self.assertIn("signal: killed", ends)
        self.assertIn("exit status 3", ends)

    def test_control_plane(self):
        self.assertIn("ok: E2B JavaScript SDK control plane", self.node("control_plane.mjs"))
        # Both sandboxes it made were recorded and are gone again, through the SDK's own kills.
        listed = self.list_sessions(headers=self.auth(KEY_A))
        self.assertEqual(len(listed), 2, listed)
        self.assertEqual({s["state"] for s in listed}, {"destroyed"}, listed)
        self.assertEqual(self.list_sessions(headers=self.auth(KEY_B)), [])

if __name__ == "__main__":
    tg.main()
