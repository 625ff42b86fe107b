#!/usr/bin/env python3
"""E2B's JavaScript code-interpreter SDK (tests/gateway/e2b_js, pinned by its package-lock.json),
unchanged, against src/gateway/notebook_kernel.py's `http` mode: runs e2b_js/code_interpreter.mjs
under Node with REX_CI_URL naming a server this test starts on a free loopback port.

Usage: test_code_interpreter_kernel_js.py [--kernel-python PYTHON] (as
test_code_interpreter_kernel.py: the server's python, which must have matplotlib). REX_E2B_JS names
the directory where `npm ci` installed the SDKs (scripts/common.sh: rex_e2b_js_env). Without Node
or the SDK it exits 77 (skipped), saying why.
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_code_interpreter_kernel as ck  # noqa: E402

SDK_DIR = os.environ.get("REX_E2B_JS", "")
NODE = shutil.which("node")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ck.kernel_python_option(parser)
    args = parser.parse_args()
    sdk = os.path.join(SDK_DIR, "node_modules", "@e2b", "code-interpreter")
    if not NODE or not os.path.isdir(sdk):
        print(f"skipped: needs node ({NODE or 'not found'}) and E2B's code-interpreter SDK in "
              f"REX_E2B_JS ({sdk}): run scripts/test.sh")
        sys.exit(77)
    with ck.step("server starts"):
        url = ck.start_server(args.kernel_python)
    with ck.step("code_interpreter.mjs", deadline=180):
        env = dict(os.environ, REX_CI_URL=url, REX_E2B_JS=SDK_DIR)
        for name in ("E2B_SANDBOX_URL", "E2B_DOMAIN", "E2B_DEBUG"):
            env.pop(name, None)
        done = subprocess.run([NODE, os.path.join(HERE, "e2b_js", "code_interpreter.mjs")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=170)
        print(done.stdout, end="")
        ck.check(done.returncode == 0 and "ok: E2B JavaScript code-interpreter SDK" in done.stdout,
                 f"node exited with {done.returncode}")
    with ck.step("the server ends its kernels and shells"):
        ck.stop_server_and_children(2)  # the default Python kernel and a shell at least
    shutil.rmtree(ck.work, ignore_errors=True)
    print("PASS: E2B's JavaScript code-interpreter SDK against notebook_kernel.py http")


if __name__ == "__main__":
    try:
        main()
    finally:
        ck.stop_server()
