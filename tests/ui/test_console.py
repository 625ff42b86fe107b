#!/usr/bin/env python3
"""The gateway's web console (/ui/) in a real browser: each test starts a gateway with two keys of
two tenants and runs one script of tests/ui under Node, which drives Debian's chromium with
Playwright's library (playwright-core) and checks the pages with axe-core, both pinned by
tests/ui/package-lock.json.

Usage: test_console.py PATH/TO/rex [unittest arguments]. The scripts get:
  REX_GATEWAY_URL                the gateway's address
  REX_UI_KEY_A, REX_UI_KEY_B     a key of tenant team-a, and one of team-b
  REX_UI_TEST_ENV                where `npm ci` installed tests/ui (its node_modules' parent;
                                 scripts/common.sh: rex_ui_test_env; CMake's REX_UI_TEST_ENV)
  REX_CHROMIUM                   the browser (chromium on PATH)
  REX_UI_SCREENSHOTS             where screenshots go (CTest: BUILD/ui-screenshots; else
                                 ui-screenshots beside the rex binary)
Unlike the SDK tests, a missing Node, chromium or test environment fails the test, naming it:
the console is part of the gateway, and its tests must run wherever the suite runs.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "gateway"))
import test_gateway as tg  # noqa: E402

# CMake's default for REX_UI_TEST_ENV, for a run by hand.
TEST_ENV = os.environ.get("REX_UI_TEST_ENV") or os.path.join(ROOT, "build", "ui-test-env")
NODE = shutil.which("node")
CHROMIUM = shutil.which("chromium")
SCRIPT_TIMEOUT = 240  # seconds; each script has its own, shorter deadline (it says where it was)

KEY_A = "ui-a-" + uuid.uuid4().hex[:12]
KEY_B = "ui-b-" + uuid.uuid4().hex[:12]


def missing():
    """What this machine lacks to run the scripts, one phrase each."""
    lacks = []
    if not NODE:
        lacks.append("node (Node.js) on PATH (scripts/common.sh: rex_node)")
    if not CHROMIUM:
        lacks.append("chromium on PATH (Debian's chromium, in scripts/common.sh's REX_PACKAGES)")
    for package in ("playwright-core", "axe-core"):
        if not os.path.isfile(os.path.join(TEST_ENV, "node_modules", package, "package.json")):
            lacks.append(f"{package} in REX_UI_TEST_ENV ({TEST_ENV}/node_modules/{package}; "
                         "scripts/common.sh: rex_ui_test_env, or scripts/test.sh)")
    return lacks


class TestConsole(tg.GatewayTestCase):
    tenant_keys = {"team-a": KEY_A, "team-b": KEY_B}
    default_key = KEY_A

    def setUp(self):
        lacks = missing()
        if lacks:
            self.fail("the console's browser tests need " + "; ".join(lacks))
        super().setUp()

    mode = "keys"

    def browse(self, script):
        """Runs tests/ui/SCRIPT under Node against this test's gateway, printing its output;
        fails unless it exits 0."""
        shots = os.environ.get("REX_UI_SCREENSHOTS") or os.path.join(
            os.path.dirname(tg.BINARY), "ui-screenshots")
        os.makedirs(shots, exist_ok=True)
        env = {**os.environ, "REX_GATEWAY_URL": self.gw.url, "REX_UI_KEY_A": KEY_A,
               "REX_UI_KEY_B": KEY_B, "REX_UI_TEST_ENV": TEST_ENV, "REX_CHROMIUM": CHROMIUM,
               "REX_UI_SCREENSHOTS": os.path.join(shots, self.mode), "REX_UI_MODE": self.mode}
        # Playwright's own browsers are never used (the scripts launch REX_CHROMIUM).
        env["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
        env.pop("DEBUG", None)
        started = time.monotonic()
        # A session of its own: on a timeout, Node and the browser it started go together.
        proc = subprocess.Popen([NODE, os.path.join(HERE, script)], env=env, cwd=HERE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=SCRIPT_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            print(out, flush=True)
            self.fail(f"{script} did not end within {SCRIPT_TIMEOUT} s")
        took = time.monotonic() - started
        print(f"--- {script} (exit {proc.returncode}, {took:.1f} s; screenshots in {shots})")
        print(out, flush=True)
        self.assertEqual(proc.returncode, 0, f"{script} failed (its output is above)")
        return out

    def test_console(self):
        self.assertIn(f"ok: console {self.mode}", self.browse("console.mjs"))


class TestConsoleFiles(tg.GatewayTestCase):
    """The console's files as the gateway serves them (no browser): without a key, under the
    security headers, revalidated by ETag; the rest of the gateway is untouched."""
    tenant_keys = {"team-a": KEY_A}
    default_key = KEY_A

    def get(self, path, headers=None):
        return self.gw.request("GET", path, headers={"Authorization": "", **(headers or {})})

    def assert_secured(self, headers):
        csp = headers.get("content-security-policy", "")
        for part in ("default-src 'none'", "script-src 'self'", "connect-src 'self'",
                     "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"):
            self.assertIn(part, csp)
        self.assertNotIn("unsafe-eval", csp)
        self.assertNotIn("script-src 'self' 'unsafe-inline'", csp)
        self.assertEqual(headers.get("x-frame-options"), "DENY")
        self.assertEqual(headers.get("x-content-type-options"), "nosniff")
        self.assertEqual(headers.get("referrer-policy"), "no-referrer")

    def test_the_page_and_its_files(self):
        status, headers, body = self.get("/ui/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/html"))
        self.assert_secured(headers)
        # No inline script: every script is a file of the console.
        self.assertNotRegex(body.decode(), r"<script(?![^>]*\bsrc=)[^>]*>")
        self.assertNotIn(b"http://", body.replace(b"http://www.w3.org", b""))
        for path, kind in [("/ui/main.js", "text/javascript"), ("/ui/style.css", "text/css"),
                           ("/ui/vendor/xterm.mjs", "text/javascript"),
                           ("/ui/vendor/xterm.css", "text/css")]:
            status, headers, body = self.get(path)
            self.assertEqual(status, 200, path)
            self.assertTrue(headers["content-type"].startswith(kind), (path, headers))
            self.assertGreater(len(body), 100, path)
            self.assert_secured(headers)
        # Revalidation: the same ETag is a 304 without a body.
        _, headers, _ = self.get("/ui/main.js")
        status, _, body = self.get("/ui/main.js", {"If-None-Match": headers["etag"]})
        self.assertEqual((status, body), (304, b""))
        status, _, body = self.get("/ui/main.js", {"If-None-Match": '"other"'})
        self.assertEqual(status, 200)

    def test_addresses_around_it(self):
        for path in ("/", "/ui"):
            status, headers, _ = self.get(path)
            self.assertEqual((status, headers.get("location")), (308, "/ui/"), path)
        status, headers, body = self.get("/ui/no-such-file.js")
        self.assertEqual(status, 404)
        self.assertIn(b"no-such-file.js", body)
        self.assert_secured(headers)
        status, _, _ = self.get("/ui/../api/sessions")
        self.assertIn(status, (400, 404))
        # The API still wants its key: the console's files are the only thing served without.
        status, _, _ = self.get("/api/sessions")
        self.assertEqual(status, 401)


class TestConsoleWithoutKeys(TestConsole):
    """A gateway without keys (loopback only): the console needs no sign-in, as the API."""
    tenant_keys = {}
    default_key = None
    mode = "no-keys"


if __name__ == "__main__":
    tg.main()
