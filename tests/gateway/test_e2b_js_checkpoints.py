#!/usr/bin/env python3
"""E2B's JavaScript SDK (tests/gateway/e2b_js, pinned by its package-lock.json), unchanged, doing
what it offers for a sandbox's state (e2b_js/checkpoints.mjs: pause, connect, snapshots, fork,
metrics) against a rex gateway, on the docker provider (containers) and the local one.

Usage: test_e2b_js_checkpoints.py PATH/TO/rex [unittest arguments]; REX_E2B_JS names the
directory where `npm ci` installed the SDK (scripts/common.sh: rex_e2b_js_env). Without Node or
the SDK it exits 77 (skipped), saying why.
"""

import os
import shutil
import subprocess
import sys
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_gateway_docker as tgd  # noqa: E402

SDK_DIR = os.environ.get("REX_E2B_JS", "")
NODE = shutil.which("node")
if not NODE or not os.path.isdir(os.path.join(SDK_DIR, "node_modules", "e2b")):
    print(f"skipped: needs node ({NODE or 'not found'}) and E2B's JavaScript SDK installed in "
          f"REX_E2B_JS ({SDK_DIR or 'unset'}/node_modules/e2b): run scripts/test.sh")
    sys.exit(77)

KEY = "e2b-js-ckpt-" + uuid.uuid4().hex[:8]


class Checkpoints:
    """The script, on the provider of the template the subclass names."""
    tenant_keys = {"team-a": KEY}
    default_key = KEY
    template = None

    def test_checkpoints(self):
        env = {**os.environ, "E2B_API_URL": self.gw.url, "E2B_SANDBOX_URL": self.gw.url,
               "E2B_API_KEY": KEY, "REX_E2B_JS": SDK_DIR, "REX_E2B_TEMPLATE": self.template}
        for name in ("E2B_DOMAIN", "E2B_DEBUG"):
            env.pop(name, None)
        done = subprocess.run([NODE, os.path.join(HERE, "e2b_js", "checkpoints.mjs")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=240)
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("ok: E2B JavaScript SDK checkpoints", done.stdout)
        self.known_sids.update(s["session_id"] for s in self.list_sessions())
        states = {s["state"] for s in self.list_sessions()}
        self.assertEqual(states, {"destroyed"}, self.list_sessions())


class OnDocker(Checkpoints, tgd.ContainerGatewayTestCase):
    template = "Python3"  # the gateway's environment whose provider is docker


class OnLocal(Checkpoints, tgd.tg.GatewayTestCase):
    template = "base"  # E2B's default: the gateway's `local`


if __name__ == "__main__":
    tgd.tg.main()
