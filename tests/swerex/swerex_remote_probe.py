"""Starts swerex-remote with SWE-ReX's Docker start command and drives it with RemoteRuntime.

Usage: swerex_remote_probe.py TOKEN BIN_DIR

The command is the one `DockerDeployment._get_swerex_start_cmd` builds: `/bin/sh -c
"swerex-remote --auth-token TOKEN || <pip fallback>"`, with the fallback replaced by `exit 97`
(nothing may be installed). Without `--port`, the server listens on 0.0.0.0:8000 as in a
container, so test_client.py runs this in a private network namespace. BIN_DIR goes first on
PATH. Prints one JSON object describing what happened; exits 0 when every step ran.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys

from swerex.deployment.docker import DockerDeployment
from swerex.runtime.abstract import BashAction, CloseBashSessionRequest, CreateBashSessionRequest
from swerex.runtime.remote import RemoteRuntime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protocol"))
from rexserver import children_of  # noqa: E402

FALLBACK_EXIT = 97
TIMEOUT = 30.0


async def drive(token):
    runtime = RemoteRuntime(auth_token=token, port=8000)  # as DockerDeployment connects
    await runtime.wait_until_alive(timeout=10.0)
    await runtime.create_session(CreateBashSessionRequest(session="probe"))
    obs = await runtime.run_in_session(BashAction(command="echo probe-$((6 * 7))",
                                                  session="probe"))
    await runtime.close_session(CloseBashSessionRequest(session="probe"))
    return obs.output


def main():
    token, bin_dir = sys.argv[1], sys.argv[2]
    shell, dash_c, command = DockerDeployment(image="unused")._get_swerex_start_cmd(token)
    prefix = f"swerex-remote --auth-token {token} || "
    report = {"stock_command": [shell, dash_c, command]}
    if (shell, dash_c) != ("/bin/sh", "-c") or not command.startswith(prefix):
        report["error"] = "SWE-ReX's start command changed shape"
        print(json.dumps(report))
        return 1
    command = prefix + f"exit {FALLBACK_EXIT}"
    report["command"] = [shell, dash_c, command]
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    sh = subprocess.Popen([shell, dash_c, command], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        report["output"] = asyncio.run(asyncio.wait_for(drive(token), TIMEOUT))
        servers = list(children_of(sh.pid))
        report["server_count"] = len(servers)
        if servers:
            with open(f"/proc/{servers[0]}/cmdline", "rb") as f:
                report["server_argv"] = [a.decode() for a in f.read().split(b"\0") if a]
            report["server_exe"] = os.readlink(f"/proc/{servers[0]}/exe")
            os.kill(servers[0], signal.SIGTERM)
        report["sh_exit"] = sh.wait(timeout=TIMEOUT)
    except Exception as e:  # reported to the test, which fails with the details
        report["error"] = f"{type(e).__name__}: {e}"
    finally:
        if sh.poll() is None:
            os.killpg(sh.pid, signal.SIGKILL)
            sh.wait(timeout=TIMEOUT)
    print(json.dumps(report))
    return 0 if "error" not in report else 1


if __name__ == "__main__":
    sys.exit(main())
