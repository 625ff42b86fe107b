#!/usr/bin/env python3
"""The gateway's modal provider, against tests/modal's fake of Modal's control plane (its
sandboxes are processes of this machine, behind TLS tunnels whose CA the fake makes).

Each test starts the fake, then the gateway under test with MODAL_SERVER_URL, MODAL_TOKEN_ID and
MODAL_TOKEN_SECRET pointing at it and the fake's CA in its `modal:` settings, as a user would
configure it for Modal. Sessions created with {"provider": "modal"} are the fake's sandboxes, with
rex-server mounted into them by the provider. Run it with the Python of build/modal-env (the fake
and the orphans made here use the pinned `modal` package).

usage: test_gateway_modal_provider.py PATH/TO/rex [unittest args]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "..", "modal", "modal_fake.py")
MODAL = {"provider": "modal", "environment": "local"}
TOKEN_ID, TOKEN_SECRET = "ak-gateway-test", "as-gateway-test"

# Made with Modal's own client: a sandbox tagged as one of a gateway's, with no record there.
ORPHAN = """
import modal, sys
app = modal.App.lookup("rex", create_if_missing=True)
sb = modal.Sandbox.create("sleep", "300", app=app, image=modal.Image.from_registry("python:3.12"),
                          timeout=300, tags={"rex.gateway": sys.argv[1], "rex.session": sys.argv[2]})
print(sb.object_id)
"""


class ModalFake:
    def __init__(self, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="modal-fake-", dir="/tmp")
        self.log = open(os.path.join(self.dir, "fake.log"), "w")
        self.out_path = os.path.join(self.dir, "ready")
        with open(self.out_path, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, FAKE, "--port", "0", "--state-dir", self.dir,
                 "--token-id", TOKEN_ID, "--token-secret", TOKEN_SECRET, *extra_args],
                stdout=out, stderr=self.log)
        until = time.monotonic() + 60
        while True:
            with open(self.out_path) as f:
                line = f.read()
            if line.startswith("READY ") and line.endswith("\n"):
                break
            if time.monotonic() > until or self.process.poll() is not None:
                raise RuntimeError(f"the Modal fake did not start: {line}")
            time.sleep(0.05)
        _, port, self.ca_file = line.split()
        self.url = f"http://127.0.0.1:{port}"
        self.env = {"MODAL_SERVER_URL": self.url, "MODAL_TOKEN_ID": TOKEN_ID,
                    "MODAL_TOKEN_SECRET": TOKEN_SECRET}

    def state(self):
        try:
            with open(os.path.join(self.dir, "sandboxes.json")) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def sandboxes(self):
        return self.state().get("sandboxes", [])

    def running(self):
        return [s for s in self.sandboxes() if s["state"] == "running"]

    def stop(self):
        self.process.terminate()
        self.process.wait(30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ModalProviderCase(tg.GatewayTestCase):
    """A gateway whose modal provider talks to a fake started for each test."""
    config = {"orphan_grace": 1, "drift_interval": 1, "sweep_interval": 0.1}
    fake_args = ()

    def setUp(self):
        self.fake = ModalFake(self.fake_args)
        self.addCleanup(self.fake.stop)  # runs last: after the gateway under test is gone
        self.gateway_env = dict(self.fake.env)
        self.config = dict(self.config, modal={"ca_file": self.fake.ca_file})
        super().setUp()

    def wait_for(self, what, check, timeout=20.0):
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            value = check()
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"waited {timeout} s for {what}")

    def sandbox(self, sandbox_id):
        return next((s for s in self.fake.sandboxes() if s["id"] == sandbox_id), None)


class TestModalProvider(ModalProviderCase):
    def test_a_session_is_a_modal_sandbox_with_state_kept_and_ends_with_it(self):
        s = self.create(MODAL, timeout=120)
        self.assertEqual(s["provider"], "modal")
        self.assertEqual(self.sandbox(s["sandbox_id"])["state"], "running")
        out = self.execute(s["session_id"], "cd /tmp && echo hi", language="bash")
        self.assertEqual(out["stdout"], "hi\n", out)
        self.execute(s["session_id"], "x = 6 * 7")
        out = self.execute(s["session_id"], "x")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        status, data = self.gw.json("DELETE", f"/api/sessions/{s['session_id']}")
        self.assertEqual(status, 200, data)
        self.wait_for("the sandbox to end", lambda: self.fake.running() == [])
        self.assertEqual(self.sandbox(s["sandbox_id"])["status"], "terminated")

    def test_kill9_and_restart_adopts_the_sandbox_with_its_state(self):
        s = self.create(MODAL, timeout=120)
        self.execute(s["session_id"], "x = 41")
        self.gw.kill9()
        self.gw = self.start_gateway()
        again = self.get(s["session_id"])
        self.assertEqual(again["state"], "ready", again)
        out = self.execute(s["session_id"], "x + 1")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        self.assertEqual(len(self.fake.running()), 1, "a second sandbox was made")

    def test_a_sandbox_that_dies_behind_the_gateways_back_is_lost(self):
        s = self.create(MODAL, timeout=120)
        os.killpg(self.sandbox(s["sandbox_id"])["pgid"], signal.SIGKILL)
        self.wait_for("the session to be lost",
                      lambda: self.get(s["session_id"])["state"] == "lost")

    def test_an_orphan_sandbox_with_this_gateways_id_is_removed(self):
        env = {**os.environ, **self.fake.env, "MODAL_SANDBOX_V2": "0"}

        def orphan(gateway_id, session_id):
            made = subprocess.run([sys.executable, "-c", ORPHAN, gateway_id, session_id], env=env,
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(made.returncode, 0, made.stderr)
            return made.stdout.strip()

        ours = orphan(self.gateway_id, "s-no-record")
        theirs = orphan("another-gateway", "s-other")
        self.wait_for("the orphan to be ended",
                      lambda: self.sandbox(ours)["state"] == "finished", timeout=30)
        self.assertEqual(self.sandbox(theirs)["state"], "running",
                         "another gateway's sandbox was touched")


class TestModalProviderStopping(ModalProviderCase):
    """Each SandboxList takes 2 s: the drift check (every second) has one in flight most of the
    time."""
    fake_args = ("--list-delay", "2")

    def test_sigterm_waits_for_the_call_in_flight_and_exits_cleanly(self):
        def listing():
            st = self.fake.state()
            return st.get("lists_begun", 0) > st.get("lists_answered", 0)

        self.wait_for("the drift check's listing", listing)
        rc = self.gw.terminate()
        self.assertEqual(rc, 0, self.gw.output_tail())
        # The fake counts an answer once it is sent, a moment after the gateway may have it.
        self.wait_for("every call to Modal answered (the gateway ended with one unanswered)",
                      lambda: not listing(), timeout=3)


def main():
    try:
        import modal  # noqa: F401
    except ImportError:
        print("skipped: Modal's SDK is not installed here (run this with build/modal-env's Python; "
              "scripts/common.sh's rex_modal_env installs it)")
        sys.exit(77)
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        tg.BINARY = os.path.abspath(sys.argv.pop(1))
    if not tg.BINARY or not os.access(tg.BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex [unittest args]")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
