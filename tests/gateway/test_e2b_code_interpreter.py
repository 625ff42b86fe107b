#!/usr/bin/env python3
"""E2B's code-interpreter SDK (PyPI e2b-code-interpreter, pinned in tests/swerex/requirements.txt),
unchanged, on a rex gateway whose sandboxes are containers: Sandbox.create() of the gateway's
built-in `code-interpreter-v1` environment, then run_code through the gateway's port routing to
port 49999 of the sandbox: state across cells, a traceback, a matplotlib plot as a PNG, contexts
(Python and bash), a timeout that keeps the context's state.

Usage: PYTHON test_e2b_code_interpreter.py PATH/TO/rex [unittest arguments]
(PYTHON: one with `e2b_code_interpreter`; without it the test exits 77, skipped, saying why.)
"""

import base64
import os
import sys
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_docker as tgd  # noqa: E402

try:
    from e2b_code_interpreter import Sandbox
    from e2b.exceptions import TimeoutException
except ImportError as e:  # pragma: no cover - the environment decides
    print(f"skipped: E2B's code-interpreter SDK is not installed in {sys.executable}: {e}")
    sys.exit(77)

KEY = "e2b-ci-" + uuid.uuid4().hex[:8]


class CodeInterpreter(tgd.ContainerGatewayTestCase):
    tenant_keys = {"team-a": KEY}
    default_key = KEY

    def setUp(self):
        super().setUp()
        tgd.point_e2b_sdks_at(self.gw.url, KEY)

    def test_run_code_through_the_gateway(self):
        sbx = Sandbox.create(timeout=300)  # the SDK's default template, code-interpreter-v1
        self.known_sids.add(sbx.sandbox_id)
        self.assertEqual(sbx.run_code("x = 20").error, None)
        out = sbx.run_code("x * 2 + 2")
        self.assertEqual(out.text, "42")

        seen = []
        ex = sbx.run_code("print('hello'); import sys; print('warn', file=sys.stderr)",
                          on_stdout=lambda m: seen.append(m.line))
        self.assertEqual(ex.logs.stdout, ["hello\n"])
        self.assertEqual(ex.logs.stderr, ["warn\n"])
        self.assertEqual(seen, ["hello\n"])

        err = sbx.run_code("1 / 0")
        self.assertEqual(err.error.name, "ZeroDivisionError")
        self.assertIn("1 / 0", err.error.traceback)

        plot = sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
        self.assertIsNone(plot.error, plot.error)
        pngs = [r.png for r in plot.results if r.png]
        self.assertEqual(len(pngs), 1, plot.results)
        self.assertTrue(base64.b64decode(pngs[0]).startswith(b"\x89PNG"))

        ctx = sbx.create_code_context()
        self.assertIsNotNone(sbx.run_code("x", context=ctx).error)  # a context of its own
        bash = sbx.run_code("echo $((6 * 7))", language="bash")
        self.assertEqual(bash.logs.stdout, ["42\n"])

        with self.assertRaises(TimeoutException):
            sbx.run_code("import time; time.sleep(100)", timeout=2)
        self.assertEqual(sbx.run_code("x").text, "20")  # the context kept its state
        sbx.kill()


if __name__ == "__main__":
    tgd.tg.main()
