"""Shared helpers of the SWE-ReX suites: where rex-server is, and starting it on loopback.

`start_rex_server(path, token, extra_args)` starts the executable with `--port 0`, waits (bounded)
for the address it prints and returns a handle with `.url`, `.port`, `.token` and `.stop()`
(SIGTERM, then the exit status). The process handling is tests/protocol/rexserver.py's, so the
raw-HTTP suites and these start the server the same way.
"""

import asyncio
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "protocol"))
from rexserver import LISTEN_RE, START_TIMEOUT, STOP_TIMEOUT, RexServer  # noqa: E402,F401

# Bounds the whole of one test's client calls (asyncio.wait_for), so a hang fails the test.
TEST_TIMEOUT = 60.0


def rex_server_path():
    """The rex-server executable under test (CTest passes it in REX_SERVER)."""
    path = os.environ.get("REX_SERVER")
    if not path:
        pytest.fail("REX_SERVER is not set: it must name the rex-server executable to test")
    if not os.access(path, os.X_OK):
        pytest.fail(f"REX_SERVER={path!r} is not an executable file")
    return os.path.abspath(path)


class RunningRexServer(RexServer):
    """A rex-server process listening on loopback."""

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM; returns the exit status (the process is killed if it does not stop in time)."""
        return self.terminate(timeout)


def start_rex_server(path, token, extra_args=(), **kwargs):
    """Starts `path` with `--auth-token token --host 127.0.0.1 --port 0` and `extra_args`.

    Returns once the server printed where it listens (or raises AssertionError after
    rexserver.START_TIMEOUT). Keyword arguments go to RexServer (env, command_prefix, ...).
    """
    return RunningRexServer(path, token=token, args=tuple(extra_args), **kwargs)


def run_async(coro, timeout=TEST_TIMEOUT):
    """Runs a coroutine to completion on a fresh event loop, failing after `timeout` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))
