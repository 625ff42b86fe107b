#!/usr/bin/env python3
"""Runs an example against a rex-server started for it: with_server.py SERVER EXAMPLE [ARGS...].

The server listens on 127.0.0.1 with a port the system picks; the example gets its URL and token
as its first two arguments. The server is stopped with SIGTERM afterwards and must exit 0."""
import os
import re
import signal
import subprocess
import sys
import time


def main():
    server_path, example = sys.argv[1], sys.argv[2]
    token = "example-token"
    server = subprocess.Popen(
        [server_path, "--host", "127.0.0.1", "--port", "0", "--auth-token", token],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    deadline = time.monotonic() + 20
    seen = []
    while port is None and time.monotonic() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        seen.append(line)
        match = re.search(r"127\.0\.0\.1:(\d+)", line)
        if match:
            port = match.group(1)
    if port is None:
        server.kill()
        sys.exit("rex-server did not report its port:\n" + "".join(seen))
    try:
        result = subprocess.run([example, f"http://127.0.0.1:{port}", token] + sys.argv[3:],
                                timeout=120)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server_status = server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server_status = -1
    if server_status != 0:
        sys.exit(f"rex-server exited with {server_status}")
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
