#!/usr/bin/env python3
"""Bad input against a running rex-server, as one table.

Usage: test_bad_input.py PATH/TO/rex-server [unittest arguments]

Every row sends one kind of bad request and states the answer it must get: the HTTP status and
the JSON body (exactly, or the parts of it that do not vary, such as an exception's class and
the words of its message). Before the rows a session is given some state and a command is left
running in a second session; after all rows the server must still answer, that state must be
intact, the running command must finish with its own output, and nothing the rows tried to
write outside their targets may exist.
"""

import faulthandler
import http.client
import io
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest
import uuid
import zipfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rexserver import RexServer, multipart  # noqa: E402
from test_protocol import closed_by_peer, read_response  # noqa: E402

BINARY = os.environ.get("REX_SERVER", "")
TOKEN = "bad-input-token"
MAX_JSON = 4096
MAX_BODY = 65536
MAX_HEADER = 8192


class Expect:
    """What a row must get back. `body` is compared exactly; `exception` checks a 511 answer's
    swerexception class and that its message contains every string of `says`; for a 422 answer,
    that its error list names `field`, has an error of type `kind`, and messages holding `says`; `closed` means the server
    hangs up (with no answer, or after the answer given as status) within `within` seconds."""

    def __init__(self, status=None, body=None, exception=None, says=(), field=None, kind=None,
                 closed=False, within=None):
        self.status, self.body, self.exception, self.says = status, body, exception, says
        self.field, self.kind, self.closed, self.within = field, kind, closed, within


def zip_bytes(entries, symlinks=()):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            z.writestr(name, data)
        for name, target in symlinks:
            info = zipfile.ZipInfo(name)
            info.create_system = 3  # unix, so the mode bits below are read
            info.external_attr = (0o120777 << 16)  # a symbolic link
            z.writestr(info, target)
    return buf.getvalue()


class BadInputTable(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rex-bad-input-")
        cls.outside = os.path.join(cls.tmp, "outside")  # nothing may ever appear here
        os.mkdir(cls.outside)
        cls.server = RexServer(BINARY, token=TOKEN, args=(
            "--max-json-body-bytes", str(MAX_JSON), "--max-body-bytes", str(MAX_BODY),
            "--max-header-bytes", str(MAX_HEADER), "--read-timeout", "2"))

    @classmethod
    def tearDownClass(cls):
        try:
            rc = cls.server.terminate()
            if rc != 0:
                raise AssertionError(f"rex-server exited with {rc}: {cls.server.output()!r}")
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    # --- ways of sending a request ------------------------------------------------------------

    def post_raw(self, route, body, headers=None):
        h = {"Content-Type": "application/json", "X-Request-ID": str(uuid.uuid4())}
        h.update(headers or {})
        return self.server.request("POST", route, body=body, headers=h)

    def post_json(self, route, payload):
        return self.post_raw(route, json.dumps(payload).encode())

    def upload(self, data, target, unzip, filename="payload.bin"):
        return self.server.upload(data, target, unzip, filename,
                                  "application/zip" if unzip else "application/octet-stream")

    def upload_fields(self, fields):
        body, content_type = multipart(fields)
        return self.server.request("POST", "/upload", body=body,
                                   headers={"Content-Type": content_type})

    def trickle(self, data, interval=1.0, budget=8.0):
        """Sends `data` a byte every `interval` seconds; the seconds until the server hung up,
        or None when it was still reading after `budget` seconds."""
        with self.server.raw_socket(timeout=budget + 2) as sock:
            started = time.monotonic()
            for b in data:
                try:
                    sock.sendall(bytes([b]))
                except (BrokenPipeError, ConnectionResetError):
                    return time.monotonic() - started
                if closed_by_peer(sock, interval):
                    return time.monotonic() - started
                if time.monotonic() - started > budget:
                    return None
        return None

    # --- the table ----------------------------------------------------------------------------

    def rows(self):
        bash = RexServer.bash_action
        victim_dir = self.path("victim-dir")
        os.makedirs(os.path.join(victim_dir, "keep"))
        with open(os.path.join(victim_dir, "keep", "file.txt"), "w") as f:
            f.write("kept\n")
        binary = self.path("binary.bin")
        with open(binary, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n\x00\xff\xfe\x80 not text")
        sneaky = self.path("zip-target")
        out = os.path.relpath(self.outside, sneaky)  # ../outside, seen from the target

        return [
            # Bodies that are not what the route takes.
            ("malformed JSON", lambda: self.post_raw("/run_in_session", b'{"command": "ls",'),
             Expect(422, kind="json_invalid")),
            ("JSON that is not an object", lambda: self.post_raw("/execute", b"[1, 2, 3]"),
             Expect(422, says=("expected an object, got array",))),
            ("not UTF-8", lambda: self.post_raw("/execute", b'{"command": "\xff\xfe"}'),
             Expect(422, kind="json_invalid")),
            ("empty body", lambda: self.post_raw("/create_session", b""),
             Expect(422, kind="json_invalid")),
            ("wrong type: command is a number",
             lambda: self.post_json("/run_in_session", {**bash("x"), "command": 5}),
             Expect(422, field="command", says=("BashAction.command: expected a string",))),
            ("wrong type: timeout is a word",
             lambda: self.post_json("/execute", {"command": "true", "timeout": "soon"}),
             Expect(422, field="timeout", says=("Command.timeout: expected a number",))),
            ("wrong type: env is a list",
             lambda: self.post_json("/execute", {"command": "true", "env": ["A=1"]}),
             Expect(422, field="env", says=("Command.env: expected an object",))),
            ("missing required field: command",
             lambda: self.post_json("/execute", {"timeout": 1}),
             Expect(422, field="command", kind="missing")),
            ("missing required field: path", lambda: self.post_json("/read_file", {}),
             Expect(422, field="path", kind="missing")),
            ("unknown action_type",
             lambda: self.post_json("/run_in_session", {**bash("ls"), "action_type": "rm-rf"}),
             Expect(422, field="action_type", says=('unknown action type "rm-rf"',))),
            ("unknown check value",
             lambda: self.post_json("/run_in_session", {**bash("ls"), "check": "maybe"}),
             Expect(422, field="check", says=('got "maybe"',))),
            ("unknown session type",
             lambda: self.post_json("/create_session", {"session": "z", "session_type": "zsh"}),
             Expect(422, field="session_type", says=('got "zsh"',))),
            # Sizes and timing.
            ("JSON body over the limit",
             lambda: self.post_json("/execute", {"command": "x" * (MAX_JSON * 2)}),
             Expect(413, body={"detail": "Request Entity Too Large"})),
            ("upload over the limit",
             lambda: self.upload(b"z" * (MAX_BODY * 2), self.path("never.bin"), False),
             Expect(413, body={"detail": "Request Entity Too Large"})),
            ("huge header",
             lambda: self.server.request("GET", "/is_alive",
                                         headers={"X-Filler": "f" * (MAX_HEADER * 2)}),
             Expect(431, body={"detail": "Request Header Fields Too Large"})),
            ("a byte a second", lambda: self.trickle(b"GET /is_alive HTTP/1.1\r\nX-Slow: aaaa"),
             Expect(closed=True, within=4.0)),
            # Routes, methods, tokens.
            ("unknown endpoint", lambda: self.post_json("/format_disk", {}),
             Expect(404, body={"detail": "Not Found"})),
            ("wrong method", lambda: self.server.request("DELETE", "/execute"),
             Expect(405, body={"detail": "Method Not Allowed"})),
            ("GET on a POST route", lambda: self.server.get("/run_in_session"),
             Expect(405, body={"detail": "Method Not Allowed"})),
            ("missing token",
             lambda: self.server.request("POST", "/execute", body=b'{"command":"touch x"}',
                                         auth=False),
             Expect(403, body={"detail": "Not authenticated"})),
            ("wrong token",
             lambda: self.server.request("POST", "/execute", body=b'{"command":"touch x"}',
                                         headers={"X-API-Key": "guess"}, auth=False),
             Expect(401, body={"detail": "Invalid API Key"})),
            ("token one character short",
             lambda: self.server.request("GET", "/is_alive", headers={"X-API-Key": TOKEN[:-1]},
                                         auth=False),
             Expect(401, body={"detail": "Invalid API Key"})),
            # Archives that reach outside their target.
            ("zip with ../ entries",
             lambda: self.upload(zip_bytes([("ok.txt", "ok"), (f"{out}/dotdot.txt", "x")]),
                                 sneaky + "-1", True, "zipped_transfer.zip"),
             Expect(511, exception="builtins.ValueError", says=("dotdot.txt", "contains '..'"))),
            ("zip with an absolute path",
             lambda: self.upload(zip_bytes([(self.outside + "/absolute.txt", "x")]),
                                 sneaky + "-2", True, "zipped_transfer.zip"),
             Expect(511, exception="builtins.ValueError", says=("absolute.txt", "is absolute"))),
            ("zip with a symlink pointing out, then a file through it",
             lambda: self.upload(zip_bytes([("link/through.txt", "x")],
                                           symlinks=[("link", self.outside)]),
                                 sneaky + "-3", True, "zipped_transfer.zip"),
             Expect(511, exception="builtins.ValueError", says=("'link'", "points outside"))),
            ("not a zip at all",
             lambda: self.upload(b"PK\x03\x04 garbage", sneaky + "-4", True,
                                 "zipped_transfer.zip"),
             Expect(511, exception="builtins.ValueError", says=("not a valid zip",))),
            ("upload onto an existing directory",
             lambda: self.upload(b"flat file", victim_dir, False),
             Expect(511, exception="builtins.IsADirectoryError", says=(victim_dir,))),
            ("upload that is not multipart",
             lambda: self.post_json("/upload", {"target_path": self.path("nope")}),
             Expect(422)),
            ("upload without a file part",
             lambda: self.server.request("POST", "/upload", body=multipart(
                 [("target_path", self.path("nope"))])[0], headers={
                     "Content-Type": multipart([("target_path", "x")], "b")[1]}),
             Expect(422)),
            ("upload whose unzip field is not UTF-8",
             lambda: self.upload_fields([("target_path", self.path("nope")),
                                         ("unzip", b"fal\x8d\x91"),
                                         ("file", ("f.bin", b"x", "application/octet-stream"))]),
             Expect(422, field="unzip", says=("expected a boolean", "fal\\udc8d"))),
            # Files that cannot be read as text.
            ("read_file on a directory",
             lambda: self.post_json("/read_file", {"path": victim_dir}),
             Expect(511, exception="builtins.IsADirectoryError", says=(victim_dir,))),
            ("read_file on a binary file",
             lambda: self.post_json("/read_file", {"path": binary}),
             # ValueError: UnicodeDecodeError's base, which SWE-ReX's client can rebuild.
             Expect(511, exception="builtins.ValueError", says=("'utf-8' codec can't decode",))),
            ("read_file on a missing file",
             lambda: self.post_json("/read_file", {"path": self.path("no", "such")}),
             Expect(511, exception="builtins.FileNotFoundError", says=("no/such",))),
            ("write_file under a file",
             lambda: self.post_json("/write_file", {"path": binary + "/child", "content": "x"}),
             Expect(511, exception="builtins.FileExistsError", says=("binary.bin",))),
            ("session that does not exist",
             lambda: self.post_json("/run_in_session", bash("ls", session="ghost")),
             Expect(511, exception="swerex.exceptions.SessionDoesNotExistError",
                    says=("ghost",))),
            ("session created twice",
             lambda: self.post_json("/create_session", {"session": "victim"}),
             Expect(511, exception="swerex.exceptions.SessionExistsError", says=("victim",))),
            ("command that does not parse",
             lambda: self.post_json("/run_in_session", bash("echo 'unclosed", session="victim")),
             Expect(511, exception="swerex.exceptions.BashIncorrectSyntaxError")),
        ]

    def check_row(self, name, got, expect):
        if expect.closed:
            self.assertIsNotNone(got, f"{name}: the server never hung up")
            self.assertLess(got, expect.within, f"{name}: hung up only after {got:.1f} s")
            return
        self.assertEqual(got.status, expect.status, f"{name}: {got!r}")
        data = got.json()
        if expect.body is not None:
            self.assertEqual(data, expect.body, name)
        if expect.status == 422:
            self.assertEqual(set(data), {"detail"}, name)
            self.assertIsInstance(data["detail"], list, name)
            self.assertTrue(data["detail"], name)
            for item in data["detail"]:
                self.assertLessEqual({"loc", "msg", "type"}, set(item), name)
            if expect.field is not None:
                self.assertTrue(any(expect.field in item["loc"] for item in data["detail"]),
                                f"{name}: {data}")
            if expect.kind is not None:
                self.assertTrue(any(item["type"] == expect.kind for item in data["detail"]),
                                f"{name}: {data}")
            for words in expect.says:
                self.assertTrue(any(words in item["msg"] for item in data["detail"]),
                                f"{name}: {words!r} not in {data}")
        if expect.exception is not None:
            self.assertEqual(set(data), {"swerexception"}, name)
            exc = data["swerexception"]
            self.assertEqual(set(exc), {"message", "class_path", "traceback", "extra_info"}, name)
            self.assertEqual(exc["class_path"], expect.exception, f"{name}: {exc['message']}")
            for words in expect.says:
                self.assertIn(words, exc["message"], name)

    def test_every_row_gets_its_answer_and_nothing_is_harmed(self):
        s = self.server
        s.create_session("victim")
        s.ok("/run_in_session", s.bash_action("cd /tmp && export MARK=still-here",
                                              session="victim"))
        # A command left running in its own session while the rows are sent.
        s.create_session("busy")
        busy = {}
        runner = threading.Thread(target=lambda: busy.update(reply=s.run(
            "sleep 3; echo finished", session="busy", timeout=60)))
        runner.start()

        rows = self.rows()
        for name, send, expect in rows:
            with self.subTest(row=name):
                self.check_row(name, send(), expect)

        runner.join(timeout=60)
        self.assertFalse(runner.is_alive(), "the busy session's command never answered")
        self.assertEqual(busy["reply"].status, 200, busy["reply"])
        self.assertEqual(busy["reply"].json()["output"], "finished\n")
        after = s.ok("/run_in_session", s.bash_action("echo $MARK; pwd", session="victim"))
        self.assertEqual(after["output"], "still-here\n/tmp\n")
        self.assertEqual(s.get("/is_alive").json(), {"is_alive": True, "message": ""})
        self.assertEqual(os.listdir(self.outside), [], "a row wrote outside its target")
        self.assertFalse(os.path.exists(self.path("never.bin")))
        with open(self.path("victim-dir", "keep", "file.txt")) as f:
            self.assertEqual(f.read(), "kept\n", "the directory under an upload was changed")
        # Neither the token nor a wrong guess at it appears in anything the server printed.
        self.assertNotIn(TOKEN, s.output())
        self.assertNotIn("guess", s.output())
        print(f"{len(rows)} bad inputs answered; sessions and files intact", file=sys.stderr)

    def test_server_keeps_serving_on_one_connection_after_errors(self):
        """Errors that leave the request stream in sync keep a keep-alive connection usable."""
        with self.server.raw_socket() as sock:
            for body in (b"{not json", b'{"command": 1}', b"[]"):
                head = (f"POST /execute HTTP/1.1\r\nHost: x\r\nX-API-Key: {TOKEN}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
                sock.sendall(head.encode() + body)
                status, _, _ = read_response(sock, "POST")
                self.assertEqual(status, 422)
            sock.sendall(f"GET /is_alive HTTP/1.1\r\nHost: x\r\nX-API-Key: {TOKEN}\r\n\r\n"
                         .encode())
            status, _, answer = read_response(sock)
            self.assertEqual((status, json.loads(answer)), (200, {"is_alive": True,
                                                                  "message": ""}))

    def test_garbage_instead_of_http_is_400_and_closed(self):
        with self.server.raw_socket(timeout=5) as sock:
            sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n")
            try:
                status = read_response(sock)[0]
            except (ConnectionError, http.client.HTTPException):
                status = None  # hanging up without an answer is fine too
            if status is not None:
                self.assertEqual(status, 400)
            self.assertTrue(closed_by_peer(sock, 5))
        self.assertEqual(self.server.get("/is_alive").status, 200)


class SecurityDefaults(unittest.TestCase):
    """An empty token is a warning on any address but loopback (and unix sockets)."""

    def start(self, host):
        server = RexServer(BINARY, token="", host=host)
        try:
            # The warning comes before the "listening" line, which the constructor waited for.
            return server.output()
        finally:
            self.assertEqual(server.terminate(), 0)

    def test_empty_token_on_all_addresses_warns(self):
        output = self.start("0.0.0.0")
        self.assertIn("empty --auth-token", output)
        self.assertIn("anyone who can reach this address can run commands here", output)

    def test_empty_token_on_loopback_does_not_warn(self):
        self.assertNotIn("empty --auth-token", self.start("127.0.0.1"))


def main():
    global BINARY
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = sys.argv.pop(1)
    if not BINARY or not os.access(BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex-server [unittest args]")
    BINARY = os.path.abspath(BINARY)
    faulthandler.dump_traceback_later(200, exit=True)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    main()
