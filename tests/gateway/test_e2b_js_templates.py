#!/usr/bin/env python3
"""E2B's JavaScript SDKs (tests/gateway/e2b_js, pinned by its package-lock.json), unchanged, on a
rex gateway whose sandboxes are containers: e2b_js/templates.mjs (Template.build, Sandbox.create
of the template, the cache, a failing step) and e2b_js/code_interpreter.mjs (@e2b/code-interpreter
on the gateway's code-interpreter-v1: run_code through port 49999).

Usage: test_e2b_js_templates.py PATH/TO/rex [unittest arguments]; REX_E2B_JS names the directory
where `npm ci` installed the SDKs (scripts/common.sh: rex_e2b_js_env). Without Node or the SDKs
it exits 77 (skipped), saying why.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_gateway_docker as tgd  # noqa: E402

SDK_DIR = os.environ.get("REX_E2B_JS", "")
NODE = shutil.which("node")
if not NODE or not os.path.isdir(os.path.join(SDK_DIR, "node_modules", "@e2b", "code-interpreter")):
    print(f"skipped: needs node ({NODE or 'not found'}) and E2B's JavaScript SDKs installed in "
          f"REX_E2B_JS ({SDK_DIR or 'unset'}): run scripts/test.sh")
    sys.exit(77)

KEY = "e2b-js-tpl-" + uuid.uuid4().hex[:8]


class JsOnGateway(tgd.ContainerGatewayTestCase):
    tenant_keys = {"team-a": KEY}
    default_key = KEY

    def node(self, script, **extra):
        env = {**os.environ, "E2B_API_URL": self.gw.url, "E2B_SANDBOX_URL": self.gw.url,
               "E2B_API_KEY": KEY, "REX_E2B_JS": SDK_DIR, **extra}
        for name in ("E2B_DOMAIN", "E2B_DEBUG", "REX_CI_URL"):
            env.pop(name, None)
        done = subprocess.run([NODE, os.path.join(HERE, "e2b_js", script)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=240)
        self.assertEqual(done.returncode, 0, done.stdout)
        self.known_sids.update(s["session_id"] for s in self.list_sessions())
        return done.stdout

    def test_templates(self):
        context = tempfile.mkdtemp(prefix="ctx-", dir=self.tmp)
        os.makedirs(os.path.join(context, "app"))
        with open(os.path.join(context, "app", "hello.txt"), "w") as f:
            f.write("hello from the context\n")
        out = self.node("templates.mjs", REX_E2B_IMAGE=tgd.IMAGE, REX_E2B_CONTEXT=context)
        self.assertIn("ok: E2B JavaScript SDK templates", out)

    def test_code_interpreter(self):
        out = self.node("code_interpreter.mjs")
        self.assertIn("ok: E2B JavaScript code-interpreter SDK", out)
        states = {s["state"] for s in self.list_sessions()}
        self.assertEqual(states, {"destroyed"}, self.list_sessions())


if __name__ == "__main__":
    tgd.tg.main()
