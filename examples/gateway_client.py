#!/usr/bin/env python3
"""A client of `rex gateway` in Python's standard library alone (docs/gateway.md).

Usage: gateway_client.py [URL] [--key KEY]      (default URL http://127.0.0.1:8000)

It creates a session, runs Python cells whose state carries over, runs a bash cell, writes and
reads a file, saves an artifact, prints the session's transcript, destroys the session and
downloads the artifact afterwards. Errors print the gateway's error code and message.
"""

import argparse
import hashlib
import json
import sys
import urllib.error
import urllib.request


class GatewayError(Exception):
    def __init__(self, status, body):
        try:
            error = json.loads(body)["error"]
            super().__init__(f"{status} {error['code']}: {error['message']}")
            self.code = error["code"]
        except (ValueError, KeyError, TypeError):
            super().__init__(f"{status}: {body[:200]!r}")
            self.code = None


class Gateway:
    def __init__(self, url, key=None):
        self.url = url.rstrip("/")
        self.key = key

    def call(self, method, path, body=None, raw=False):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.key:
            request.add_header("Authorization", f"Bearer {self.key}")
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                content = answer.read()
        except urllib.error.HTTPError as e:
            raise GatewayError(e.code, e.read().decode(errors="replace")) from None
        return content if raw else json.loads(content)

    def execute(self, session, code, language="python"):
        return self.call("POST", f"/api/sessions/{session}/execute",
                         {"code": code, "language": language})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default="http://127.0.0.1:8000")
    parser.add_argument("--key", help="an API key of the gateway (none when it has no keys)")
    args = parser.parse_args()
    gw = Gateway(args.url, args.key)

    session = gw.call("POST", "/api/sessions",
                      {"environment": "local", "timeout": 300, "metadata": {"example": "client"}})
    sid = session["session_id"]
    print(f"session {sid} is {session['state']}, working in {session['working_dir']}")
    try:
        gw.execute(sid, "import math\nradius = 2")
        cell = gw.execute(sid, "print('area:', math.pi * radius ** 2)\nradius * 10")
        print("stdout:", cell["stdout"].strip(), "| result:", cell["results"][0]["text"])
        failed = gw.execute(sid, "1 / 0")
        print("a cell that raises:", failed["error"]["name"], "-", failed["error"]["value"])
        print("bash:", gw.execute(sid, "echo $((6 * 7)) from $(basename $PWD)", "bash")["stdout"].strip())

        gw.call("POST", f"/api/sessions/{sid}/files", {"path": "report.txt", "content": "done\n"})
        content = gw.call("GET", f"/api/sessions/{sid}/files?path=report.txt", raw=True)
        print("report.txt:", content.decode().strip())
        saved = gw.call("POST", f"/api/sessions/{sid}/artifacts", {"paths": ["report.txt"]})
        artifact = saved["artifacts"][0]
        print(f"artifact {artifact['name']}: {artifact['size']} bytes, sha256 {artifact['sha256'][:12]}...")
    finally:
        ended = gw.call("DELETE", f"/api/sessions/{sid}")
        print(f"session {sid} is {ended['state']} ({ended['reason']})")

    transcript = gw.call("GET", f"/api/sessions/{sid}/log", raw=True).decode().splitlines()
    print(f"transcript: {len(transcript)} calls:", ", ".join(json.loads(l)["call"] for l in transcript))
    kept = gw.call("GET", f"/api/sessions/{sid}/artifacts/report.txt", raw=True)
    assert hashlib.sha256(kept).hexdigest() == artifact["sha256"]
    print("the artifact is still there after the session:", kept.decode().strip())


if __name__ == "__main__":
    try:
        main()
    except (GatewayError, urllib.error.URLError) as e:
        print(f"gateway_client: {e}", file=sys.stderr)
        sys.exit(1)
