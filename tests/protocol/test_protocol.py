#!/usr/bin/env python3
"""rex-server from the outside: raw HTTP against the real executable (PROTOCOL.md).

Usage: test_protocol.py PATH/TO/rex-server [unittest arguments]
       (or REX_SERVER=PATH test_protocol.py ...)

Each test class starts its own server on a free port (or a unix socket) and stops it with
SIGTERM, which must end it with status 0. Every socket and process wait has a timeout.
"""

import base64
import faulthandler
import http.client
import io
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
import zipfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rexserver import (HTTP_TIMEOUT, Reply, RexServer, is_gone,  # noqa: E402
                       multipart, process_state, wait_until)

BINARY = os.environ.get("REX_SERVER", "")

EXCEPTION_KEYS = {"message", "class_path", "traceback", "extra_info"}
OBSERVATION_KEYS = {"output", "exit_code", "failure_reason", "expect_string", "session_type"}


class ServerTestCase(unittest.TestCase):
    """Starts one server for the class; stopping it with SIGTERM must exit with status 0."""

    token = "s3cret-token"
    server_args = ()
    unix = False

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rex-protocol-")
        sock = os.path.join(cls.tmp, "rex.sock") if cls.unix else None
        cls.server = RexServer(BINARY, token=cls.token, args=cls.server_args, unix_socket=sock)

    @classmethod
    def tearDownClass(cls):
        try:
            rc = cls.server.terminate()
            if rc != 0:
                raise AssertionError(f"rex-server exited with status {rc} after SIGTERM; "
                                     f"output: {cls.server.output()!r}")
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # --- assertion helpers ------------------------------------------------------------------

    def assertReply(self, reply, status, body=None):
        self.assertEqual(reply.status, status, reply)
        data = reply.json()
        if body is not None:
            self.assertEqual(data, body)
        return data

    def assertSwerexception(self, reply, class_path):
        """A 511 answer carrying exactly SWE-ReX's exception transfer object."""
        self.assertEqual(reply.status, 511, reply)
        data = reply.json()
        self.assertEqual(set(data), {"swerexception"})
        exc = data["swerexception"]
        self.assertEqual(set(exc), EXCEPTION_KEYS)
        self.assertIsInstance(exc["message"], str)
        self.assertIsInstance(exc["traceback"], str)
        self.assertIsInstance(exc["extra_info"], dict)
        self.assertEqual(exc["class_path"], class_path, exc["message"])
        return exc

    def assertObservation(self, data, output=None, exit_code=0):
        self.assertEqual(set(data), OBSERVATION_KEYS)
        self.assertEqual(data["session_type"], "bash")
        self.assertEqual(data["failure_reason"], "")
        self.assertIsInstance(data["expect_string"], str)
        self.assertEqual(data["exit_code"], exit_code)
        if output is not None:
            self.assertEqual(data["output"], output)
        return data

    def assertValidationError(self, reply, field=None, kind=None):
        """FastAPI's 422 shape: {"detail": [{"loc": ["body", ...], "msg": ..., "type": ...}]}."""
        self.assertEqual(reply.status, 422, reply)
        data = reply.json()
        self.assertEqual(set(data), {"detail"})
        self.assertIsInstance(data["detail"], list)
        self.assertTrue(data["detail"])
        for item in data["detail"]:
            self.assertLessEqual({"loc", "msg", "type"}, set(item))
            self.assertEqual(item["loc"][0], "body")
            self.assertIsInstance(item["msg"], str)
        if field is not None:
            self.assertTrue(any(field in item["loc"] for item in data["detail"]), data)
        if kind is not None:
            self.assertTrue(any(item["type"] == kind for item in data["detail"]), data)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def new_session(self):
        name = "s-" + uuid.uuid4().hex[:8]
        self.assertEqual(self.server.create_session(name), {"output": "", "session_type": "bash"})
        self.addCleanup(self._close_quietly, name)
        return name

    def _close_quietly(self, name):
        self.server.post("/close_session", {"session": name, "session_type": "bash"})


# --- raw HTTP helpers ------------------------------------------------------------------------

def read_response(sock, method="GET"):
    """Reads exactly one HTTP response from a connected socket: (status, headers, body).

    Reads no byte past the response, so pipelined answers and a later close stay observable.
    """
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        piece = sock.recv(1)
        if not piece:
            raise http.client.RemoteDisconnected(f"closed after {head!r}")
        head += piece
    lines = head.decode("iso-8859-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if not status_line[0].startswith("HTTP/1."):
        raise http.client.BadStatusLine(lines[0])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "transfer-encoding" in headers:
        raise AssertionError(f"unexpected Transfer-Encoding in an answer: {headers}")
    length = 0 if method == "HEAD" else int(headers.get("content-length", "0"))
    body = b""
    while len(body) < length:
        piece = sock.recv(length - len(body))
        if not piece:
            raise http.client.IncompleteRead(body, length - len(body))
        body += piece
    return int(status_line[1]), headers, body


def raw_request(method, path, token, body=b"", extra=""):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {token}\r\n{extra}"
    if body or method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def closed_by_peer(sock, timeout):
    """True when the peer closes `sock` within `timeout` seconds (EOF or reset)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            continue
        try:
            if sock.recv(65536) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


# --- the tests -------------------------------------------------------------------------------

class TestRootAndAuth(ServerTestCase):

    def test_root(self):
        self.assertReply(self.server.get("/"), 200, {"message": "hello world"})

    def test_is_alive(self):
        r = self.server.get("/is_alive")
        self.assertReply(r, 200, {"is_alive": True, "message": ""})
        self.assertEqual(r.headers["content-type"], "application/json")

    def test_missing_key_is_403_on_every_route(self):
        for method, path in [("GET", "/"), ("GET", "/is_alive"), ("GET", "/no/such/route"),
                             ("POST", "/run_in_session"), ("POST", "/close")]:
            with self.subTest(path=path):
                r = self.server.request(method, path, auth=False)
                self.assertReply(r, 403, {"detail": "Not authenticated"})

    def test_wrong_key_is_401_on_every_route(self):
        for key in ["wrong", self.token[:-1], self.token + "x", self.token.upper(), ""]:
            for method, path in [("GET", "/"), ("GET", "/is_alive"), ("GET", "/no/such/route"),
                                 ("POST", "/execute")]:
                with self.subTest(key=key, path=path):
                    r = self.server.request(method, path, headers={"X-API-Key": key}, auth=False)
                    self.assertReply(r, 401, {"detail": "Invalid API Key"})

    def test_a_refused_request_runs_nothing(self):
        marker = self.path("must-not-exist")
        body = json.dumps({"command": ["touch", marker]}).encode()
        r = self.server.request("POST", "/execute", body=body,
                                headers={"X-API-Key": "wrong", "Content-Type": "application/json"},
                                auth=False)
        self.assertEqual(r.status, 401)
        self.assertFalse(os.path.exists(marker))

    def test_unknown_route_is_404(self):
        self.assertReply(self.server.get("/nope"), 404, {"detail": "Not Found"})
        self.assertReply(self.server.post("/nope", {}), 404, {"detail": "Not Found"})

    def test_wrong_method_is_405(self):
        self.assertReply(self.server.get("/run_in_session"), 405,
                         {"detail": "Method Not Allowed"})
        self.assertReply(self.server.request("POST", "/"), 405, {"detail": "Method Not Allowed"})
        self.assertReply(self.server.request("POST", "/is_alive"), 405,
                         {"detail": "Method Not Allowed"})


class TestNoAuth(ServerTestCase):
    token = ""

    def test_every_route_open_without_a_key(self):
        self.assertReply(self.server.get("/"), 200, {"message": "hello world"})
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})
        r = self.server.post("/execute", {"command": ["echo", "open"]})
        self.assertReply(r, 200, {"stdout": "open\n", "stderr": "", "exit_code": 0})

    def test_any_key_is_accepted(self):
        r = self.server.get("/is_alive", headers={"X-API-Key": "anything"})
        self.assertReply(r, 200, {"is_alive": True, "message": ""})


class TestValidation(ServerTestCase):

    def post_raw(self, path, body):
        return self.server.request("POST", path, body=body,
                                   headers={"Content-Type": "application/json"})

    def test_bodies_are_read_when_the_client_asks_to_close(self):
        # SWE-ReX's client sends `Connection: close` with every request; its bodies count all
        # the same, and the answer closes the connection.
        close = {"Connection": "close"}
        r = self.server.post("/execute", {"command": "echo hi", "shell": True}, headers=close)
        self.assertEqual((r.status, r.json()), (200, {"stdout": "hi\n", "stderr": "",
                                                      "exit_code": 0}))
        self.assertEqual(r.headers.get("connection", "").lower(), "close")
        name = "close-" + uuid.uuid4().hex[:6]
        r = self.server.post("/create_session", {"session": name}, headers=close)
        self.assertEqual(r.status, 200, r)
        r = self.server.post("/run_in_session", self.server.bash_action("echo $((6*7))",
                                                                        session=name),
                             headers=close)
        self.assertEqual((r.status, r.json()["output"]), (200, "42\n"))
        self.server.close_session(name)
        # Refused, with its body: still an answer, then the close.
        r = self.server.post("/execute", {"command": "true"}, auth=False, headers=close)
        self.assertEqual(r.status, 403, r)

    def test_invalid_json_is_422(self):
        for body in [b"{not json", b'{"command": "echo"', b"", b"\xff\xfe"]:
            with self.subTest(body=body):
                self.assertValidationError(self.post_raw("/run_in_session", body))

    def test_missing_required_field_is_422(self):
        self.assertValidationError(self.server.post("/run_in_session", {"session": "x"}),
                                   field="command", kind="missing")
        self.assertValidationError(self.server.post("/execute", {"shell": True}),
                                   field="command", kind="missing")
        self.assertValidationError(self.server.post("/read_file", {}), field="path",
                                   kind="missing")
        self.assertValidationError(self.server.post("/write_file", {"path": "/tmp/x"}),
                                   field="content", kind="missing")

    def test_wrong_type_is_422(self):
        self.assertValidationError(self.server.post("/run_in_session", {"command": 5}),
                                   field="command")
        self.assertValidationError(
            self.server.post("/run_in_session", {"command": "true", "timeout": "soon"}),
            field="timeout")
        self.assertValidationError(self.server.post("/execute", {"command": {"a": 1}}),
                                   field="command")
        self.assertValidationError(self.post_raw("/run_in_session", b"[1, 2]"))

    def test_unknown_action_type_is_422(self):
        r = self.server.post("/run_in_session", {"command": "true", "action_type": "teleport"})
        self.assertValidationError(r, field="action_type")

    def test_invalid_check_value_is_422(self):
        r = self.server.post("/run_in_session", {"command": "true", "check": "loudly"})
        self.assertValidationError(r, field="check")

    def test_unknown_fields_are_ignored(self):
        name = self.new_session()
        r = self.server.post("/run_in_session", {"command": "echo fine", "session": name,
                                                 "some_future_field": [1, 2, 3]})
        self.assertObservation(self.assertReply(r, 200), output="fine\n")

    def test_missing_fields_take_defaults(self):
        r = self.server.post("/create_session", {})
        self.assertReply(r, 200, {"output": "", "session_type": "bash"})
        self.addCleanup(self._close_quietly, "default")
        r = self.server.post("/run_in_session", {"command": "echo defaults"})
        self.assertObservation(self.assertReply(r, 200), output="defaults\n")
        self.assertReply(self.server.post("/close_session", {}), 200, {"session_type": "bash"})


class TestSessions(ServerTestCase):

    def test_create_and_close_shapes(self):
        name = "shapes"
        self.assertEqual(self.server.create_session(name), {"output": "", "session_type": "bash"})
        self.assertEqual(self.server.close_session(name), {"session_type": "bash"})

    def test_startup_source(self):
        rc = self.path("rc.sh")
        with open(rc, "w") as f:
            f.write("export REX_FROM_RC=yes\necho sourced\n")
        name = "rc-" + uuid.uuid4().hex[:6]
        data = self.server.create_session(name, startup_source=[rc])
        self.addCleanup(self._close_quietly, name)
        self.assertEqual(set(data), {"output", "session_type"})
        self.assertIn("sourced", data["output"])
        r = self.server.run("echo $REX_FROM_RC", session=name)
        self.assertObservation(self.assertReply(r, 200), output="yes\n")

    def test_observation_shape(self):
        name = self.new_session()
        data = self.assertReply(self.server.run("echo hello", session=name), 200)
        self.assertObservation(data, output="hello\n", exit_code=0)

    def test_state_persists_between_commands(self):
        name = self.new_session()
        self.assertReply(self.server.run(f"cd {self.tmp} && export REX_V=42", session=name), 200)
        data = self.assertReply(self.server.run("echo $PWD $REX_V", session=name), 200)
        self.assertObservation(data, output=f"{self.tmp} 42\n")

    def test_output_is_cleaned(self):
        name = self.new_session()
        r = self.server.run(r"printf '\033[1;31mred\033[0m\r\nnext\r\n'", session=name)
        self.assertObservation(self.assertReply(r, 200), output="red\nnext\n")
        r = self.server.run(r"printf 'a\xffb\n'", session=name)
        self.assertObservation(self.assertReply(r, 200), output="a\\xffb\n")

    def test_check_raise_nonzero(self):
        name = self.new_session()
        exc = self.assertSwerexception(self.server.run("echo out; exit_with() { return 3; }; "
                                                       "exit_with", session=name),
                                       "swerex.exceptions.NonZeroExitCodeError")
        self.assertIn("3", exc["message"])
        # The session is still usable afterwards.
        self.assertObservation(self.assertReply(self.server.run("echo ok", session=name), 200),
                               output="ok\n")

    def test_check_raise_prefixes_error_msg(self):
        name = self.new_session()
        exc = self.assertSwerexception(
            self.server.run("false", session=name, error_msg="the build failed"),
            "swerex.exceptions.NonZeroExitCodeError")
        self.assertTrue(exc["message"].startswith("the build failed"), exc["message"])

    def test_check_silent_reports_the_code(self):
        name = self.new_session()
        r = self.server.run("echo x; (exit 7)", session=name, check="silent")
        self.assertObservation(self.assertReply(r, 200), output="x\n", exit_code=7)

    def test_check_ignore_gives_null_exit_code(self):
        name = self.new_session()
        r = self.server.run("(exit 7)", session=name, check="ignore")
        self.assertObservation(self.assertReply(r, 200), exit_code=None)
        r = self.server.run("echo fine", session=name, check="ignore")
        self.assertObservation(self.assertReply(r, 200), output="fine\n", exit_code=None)

    def test_syntax_error_runs_nothing(self):
        name = self.new_session()
        marker = self.path("syntax-marker")
        exc = self.assertSwerexception(self.server.run(f"touch {marker}; (", session=name),
                                       "swerex.exceptions.BashIncorrectSyntaxError")
        self.assertLessEqual({"bash_stdout", "bash_stderr"}, set(exc["extra_info"]))
        self.assertIsInstance(exc["extra_info"]["bash_stdout"], str)
        self.assertIn("syntax error", exc["extra_info"]["bash_stderr"])
        self.assertFalse(os.path.exists(marker), "a command with a syntax error ran")
        self.assertObservation(self.assertReply(self.server.run("echo ok", session=name), 200),
                               output="ok\n")

    def test_timeout_then_interrupt_recovers(self):
        name = self.new_session()
        started = time.monotonic()
        exc = self.assertSwerexception(self.server.run("sleep 30", session=name, timeout=0.5),
                                       "swerex.exceptions.CommandTimeoutError")
        self.assertLess(time.monotonic() - started, 10)
        self.assertTrue(exc["message"])
        r = self.server.post("/run_in_session", {"session": name, "timeout": 0.2, "n_retry": 3,
                                                 "expect": [], "action_type": "bash_interrupt"})
        data = self.assertObservation(self.assertReply(r, 200), exit_code=0)
        self.assertTrue(data["expect_string"])
        self.assertObservation(self.assertReply(self.server.run("echo back", session=name), 200),
                               output="back\n")

    def test_session_exists(self):
        name = self.new_session()
        r = self.server.post("/create_session", {"startup_source": [], "session": name,
                                                 "session_type": "bash", "startup_timeout": 1.0})
        self.assertSwerexception(r, "swerex.exceptions.SessionExistsError")

    def test_session_does_not_exist(self):
        self.assertSwerexception(self.server.run("true", session="never-created"),
                                 "swerex.exceptions.SessionDoesNotExistError")
        r = self.server.post("/close_session", {"session": "never-created",
                                                "session_type": "bash"})
        self.assertSwerexception(r, "swerex.exceptions.SessionDoesNotExistError")
        r = self.server.post("/run_in_session", {"session": "never-created",
                                                 "action_type": "bash_interrupt"})
        self.assertSwerexception(r, "swerex.exceptions.SessionDoesNotExistError")

    def test_closed_session_is_gone(self):
        name = "closing"
        self.server.create_session(name)
        pid = int(self.assertReply(self.server.run("echo $$", session=name), 200)["output"])
        self.assertEqual(self.server.close_session(name), {"session_type": "bash"})
        self.assertSwerexception(self.server.run("true", session=name),
                                 "swerex.exceptions.SessionDoesNotExistError")
        wait_until(lambda: is_gone(pid), 5, what=f"bash {pid} to end")


class TestExecuteAndFiles(ServerTestCase):

    def execute(self, **fields):
        body = {"command": None, "timeout": None, "shell": False, "check": False, "error_msg": "",
                "env": None, "cwd": None, "merge_output_streams": False}
        body.update(fields)
        return self.server.post("/execute", body)

    def test_execute_argv(self):
        self.assertReply(self.execute(command=["echo", "a  b", "$HOME"]), 200,
                         {"stdout": "a  b $HOME\n", "stderr": "", "exit_code": 0})

    def test_execute_shell_string(self):
        r = self.execute(command="echo out; echo err >&2; exit 3", shell=True)
        self.assertReply(r, 200, {"stdout": "out\n", "stderr": "err\n", "exit_code": 3})

    def test_execute_merge_output_streams(self):
        r = self.execute(command="echo out; echo err >&2", shell=True, merge_output_streams=True)
        self.assertReply(r, 200, {"stdout": "out\nerr\n", "stderr": "", "exit_code": 0})

    def test_execute_env_replaces_environment(self):
        r = self.execute(command=["/usr/bin/env"], env={"ONLY": "this"})
        self.assertReply(r, 200, {"stdout": "ONLY=this\n", "stderr": "", "exit_code": 0})

    def test_execute_cwd_and_stdin(self):
        r = self.execute(command="pwd; cat; echo end", shell=True, cwd=self.tmp)
        self.assertReply(r, 200, {"stdout": f"{self.tmp}\nend\n", "stderr": "", "exit_code": 0})

    def test_execute_check_raises(self):
        exc = self.assertSwerexception(
            self.execute(command="exit 4", shell=True, check=True, error_msg="step failed"),
            "swerex.exceptions.NonZeroExitCodeError")
        self.assertTrue(exc["message"].startswith("step failed"), exc["message"])

    def test_execute_timeout(self):
        started = time.monotonic()
        self.assertSwerexception(self.execute(command=["sleep", "30"], timeout=0.3),
                                 "swerex.exceptions.CommandTimeoutError")
        self.assertLess(time.monotonic() - started, 10)

    def test_execute_missing_program(self):
        self.assertSwerexception(self.execute(command=["/no/such/program"]),
                                 "builtins.FileNotFoundError")

    def test_write_then_read_file(self):
        target = self.path("deep", "er", "file.txt")
        content = "first line\nsecond: h\u00e9llo \u2603\n"
        self.assertReply(self.server.post("/write_file", {"content": content, "path": target}),
                         200, {})
        with open(target, encoding="utf-8") as f:
            self.assertEqual(f.read(), content)
        r = self.server.post("/read_file", {"path": target, "encoding": None, "errors": None})
        self.assertReply(r, 200, {"content": content})
        # Overwrites.
        self.assertReply(self.server.post("/write_file", {"content": "new", "path": target}),
                         200, {})
        self.assertReply(self.server.post("/read_file", {"path": target}), 200,
                         {"content": "new"})

    def test_read_file_encodings(self):
        target = self.path("latin.txt")
        with open(target, "wb") as f:
            f.write(b"caf\xe9")
        r = self.server.post("/read_file", {"path": target, "encoding": "latin-1"})
        self.assertReply(r, 200, {"content": "caf\u00e9"})
        r = self.server.post("/read_file", {"path": target, "errors": "backslashreplace"})
        self.assertReply(r, 200, {"content": "caf\\xe9"})

    def test_read_missing_file(self):
        exc = self.assertSwerexception(
            self.server.post("/read_file", {"path": self.path("absent.txt")}),
            "builtins.FileNotFoundError")
        self.assertIn("absent.txt", exc["message"])


class TestClose(ServerTestCase):

    def test_close_ends_every_session_and_keeps_serving(self):
        pids = []
        for name in ["one", "two"]:
            self.server.create_session(name)
            out = self.assertReply(self.server.run("echo $$", session=name), 200)["output"]
            pids.append(int(out))
        self.assertReply(self.server.request("POST", "/close"), 200, {})
        for pid in pids:
            wait_until(lambda: is_gone(pid), 5, what=f"bash {pid} to end")
        self.assertSwerexception(self.server.run("true", session="one"),
                                 "swerex.exceptions.SessionDoesNotExistError")
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})
        # The names are free again.
        self.server.create_session("one")
        self.assertReply(self.server.run("true", session="one"), 200)
        self.server.close_session("one")


class TestRequestId(ServerTestCase):

    def count_lines(self, path):
        if not os.path.exists(path):
            return 0
        with open(path) as f:
            return len(f.read().splitlines())

    def test_repeated_id_replays_without_running_again(self):
        name = self.new_session()
        log = self.path("replay.log")
        rid = str(uuid.uuid4())
        first = self.server.run(f"echo ran >> {log}; echo $RANDOM$RANDOM", session=name,
                                request_id=rid)
        self.assertEqual(first.status, 200, first)
        again = self.server.run(f"echo ran >> {log}; echo $RANDOM$RANDOM", session=name,
                                request_id=rid)
        self.assertEqual(again.status, first.status)
        self.assertEqual(again.body, first.body)
        self.assertEqual(again.headers.get("content-type"), first.headers.get("content-type"))
        self.assertEqual(self.count_lines(log), 1)
        # A fresh ID runs again.
        self.assertEqual(self.server.run(f"echo ran >> {log}", session=name).status, 200)
        self.assertEqual(self.count_lines(log), 2)

    def test_error_answers_are_replayed_too(self):
        name = self.new_session()
        log = self.path("replay-error.log")
        rid = str(uuid.uuid4())
        first = self.server.run(f"echo ran >> {log}; false", session=name, request_id=rid)
        self.assertSwerexception(first, "swerex.exceptions.NonZeroExitCodeError")
        again = self.server.run(f"echo ran >> {log}; false", session=name, request_id=rid)
        self.assertEqual((again.status, again.body), (first.status, first.body))
        self.assertEqual(self.count_lines(log), 1)

    def test_duplicate_while_running_waits_for_the_first_answer(self):
        name = self.new_session()
        log = self.path("concurrent.log")
        rid = str(uuid.uuid4())
        command = f"echo ran >> {log}; sleep 0.5; echo $RANDOM$RANDOM$RANDOM"
        replies = {}

        def send(key):
            replies[key] = self.server.run(command, session=name, request_id=rid)

        first = threading.Thread(target=send, args=("first",))
        first.start()
        wait_until(lambda: self.count_lines(log) == 1, 5, what="the first request to start")
        second = threading.Thread(target=send, args=("second",))
        second.start()
        first.join(HTTP_TIMEOUT)
        second.join(HTTP_TIMEOUT)
        self.assertFalse(first.is_alive() or second.is_alive(), "a request did not finish")
        self.assertEqual(replies["first"].status, 200, replies["first"])
        self.assertEqual((replies["second"].status, replies["second"].body),
                         (replies["first"].status, replies["first"].body))
        self.assertEqual(self.count_lines(log), 1)

    def test_replay_needs_the_key_too(self):
        rid = str(uuid.uuid4())
        first = self.server.post("/execute", {"command": ["echo", "secret output"]},
                                 request_id=rid)
        self.assertReply(first, 200)
        r = self.server.post("/execute", {"command": ["echo", "secret output"]}, request_id=rid,
                             headers={"X-API-Key": "wrong"})
        self.assertReply(r, 401, {"detail": "Invalid API Key"})

    def test_same_id_on_another_route_is_not_a_replay(self):
        rid = str(uuid.uuid4())
        a = self.server.post("/execute", {"command": ["echo", "exec"]}, request_id=rid)
        self.assertReply(a, 200, {"stdout": "exec\n", "stderr": "", "exit_code": 0})
        target = self.path("rid.txt")
        b = self.server.post("/write_file", {"content": "x", "path": target}, request_id=rid)
        self.assertReply(b, 200, {})
        self.assertTrue(os.path.exists(target))


class TestConnections(ServerTestCase):

    def test_keep_alive_serves_several_requests(self):
        name = "keepalive"
        with self.server.raw_socket() as sock:
            sock.sendall(raw_request("GET", "/is_alive", self.token))
            status, headers, body = read_response(sock)
            self.assertEqual((status, json.loads(body)), (200, {"is_alive": True, "message": ""}))
            self.assertNotEqual(headers.get("connection", "").lower(), "close")
            create = json.dumps({"session": name}).encode()
            sock.sendall(raw_request("POST", "/create_session", self.token, create))
            status, _, body = read_response(sock, "POST")
            self.assertEqual((status, json.loads(body)), (200, {"output": "",
                                                                "session_type": "bash"}))
            for i in range(3):
                run = json.dumps({"command": f"echo {i}", "session": name}).encode()
                sock.sendall(raw_request("POST", "/run_in_session", self.token, run))
                status, _, body = read_response(sock, "POST")
                self.assertEqual(status, 200)
                self.assertEqual(json.loads(body)["output"], f"{i}\n")
            close = json.dumps({"session": name}).encode()
            sock.sendall(raw_request("POST", "/close_session", self.token, close))
            status, _, body = read_response(sock, "POST")
            self.assertEqual((status, json.loads(body)), (200, {"session_type": "bash"}))

    def test_pipelined_requests_are_answered_in_order(self):
        with self.server.raw_socket() as sock:
            sock.sendall(raw_request("GET", "/", self.token) +
                         raw_request("GET", "/is_alive", self.token) +
                         raw_request("GET", "/nope", self.token))
            self.assertEqual(read_response(sock)[0], 200)
            status, _, body = read_response(sock)
            self.assertEqual((status, json.loads(body)), (200, {"is_alive": True, "message": ""}))
            self.assertEqual(read_response(sock)[0], 404)

    def test_connection_close_is_honoured(self):
        with self.server.raw_socket() as sock:
            sock.sendall(raw_request("GET", "/is_alive", self.token, extra="Connection: close\r\n"))
            status, headers, body = read_response(sock)
            self.assertEqual(status, 200)
            self.assertEqual(headers.get("connection", "").lower(), "close")
            self.assertTrue(closed_by_peer(sock, 5), "the server kept the connection open")

    def test_http10_closes_after_the_answer(self):
        with self.server.raw_socket() as sock:
            sock.sendall(f"GET /is_alive HTTP/1.0\r\nX-API-Key: {self.token}\r\n\r\n".encode())
            status, _, body = read_response(sock)
            self.assertEqual((status, json.loads(body)), (200, {"is_alive": True, "message": ""}))
            self.assertTrue(closed_by_peer(sock, 5), "the server kept an HTTP/1.0 connection open")

    def test_chunked_request_body(self):
        payload = json.dumps({"command": ["echo", "chunked body"]}).encode()
        pieces = [payload[:7], payload[7:20], payload[20:]]
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        head = (f"POST /execute HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {self.token}\r\n"
                f"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
        with self.server.raw_socket() as sock:
            sock.sendall(head)
            for p in pieces:  # each chunk in its own segment
                time.sleep(0.02)
                sock.sendall(b"%x\r\n%s\r\n" % (len(p), p))
            sock.sendall(b"0\r\n\r\n")
            status, _, body = read_response(sock, "POST")
            self.assertEqual((status, json.loads(body)),
                             (200, {"stdout": "chunked body\n", "stderr": "", "exit_code": 0}))
            # The same body in one piece, on the same connection.
            sock.sendall(head + chunked)
            status, _, body = read_response(sock, "POST")
            self.assertEqual(status, 200)

    def test_expect_100_continue(self):
        payload = json.dumps({"command": ["echo", "continued"]}).encode()
        head = (f"POST /execute HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {self.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                f"Expect: 100-continue\r\n\r\n").encode()
        with self.server.raw_socket() as sock:
            sock.sendall(head)
            interim = b""
            while b"\r\n\r\n" not in interim:
                piece = sock.recv(1)
                self.assertTrue(piece, "closed before 100 Continue")
                interim += piece
            self.assertTrue(interim.startswith(b"HTTP/1.1 100"), interim)
            sock.sendall(payload)
            status, _, body = read_response(sock, "POST")
            self.assertEqual((status, json.loads(body)),
                             (200, {"stdout": "continued\n", "stderr": "", "exit_code": 0}))


class TestLimits(ServerTestCase):
    server_args = ("--max-header-bytes", "4096", "--max-json-body-bytes", "2048",
                   "--max-connections", "4", "--idle-timeout", "60", "--read-timeout", "60")

    def assertStillServing(self):
        # A connection the server has not yet seen closing may still count against the limit.
        def alive():
            try:
                return self.server.get("/is_alive").status == 200
            except OSError:
                return False
        wait_until(alive, 10, interval=0.05, what="the server to answer /is_alive again")

    def test_header_too_large_is_431(self):
        r = self.server.get("/is_alive", headers={"X-Padding": "a" * 8000})
        data = self.assertReply(r, 431)
        self.assertEqual(set(data), {"detail"})
        self.assertStillServing()
        # Just under the limit is fine.
        r = self.server.get("/is_alive", headers={"X-Padding": "a" * 3000})
        self.assertReply(r, 200, {"is_alive": True, "message": ""})

    # The server checks --max-json-body-bytes only for chunked bodies: a body with a
    # Content-Length is checked against --max-body-bytes alone (Beast tests the limit when the
    # header ends, before the JSON limit is set), so this 5000-byte body is accepted.
    def test_json_body_too_large_is_413(self):
        target = self.path("big.txt")
        r = self.server.post("/write_file", {"content": "x" * 5000, "path": target})
        data = self.assertReply(r, 413)
        self.assertEqual(set(data), {"detail"})
        self.assertFalse(os.path.exists(target))
        self.assertStillServing()
        self.assertReply(self.server.post("/write_file", {"content": "x" * 1000, "path": target}),
                         200, {})

    # The same cause: an announced 8 GB JSON body is not refused at once (the server waits for
    # it, and reserves memory for all of it).
    def test_huge_announced_json_body_is_413_at_once(self):
        with self.server.raw_socket(timeout=3) as sock:
            sock.sendall((f"POST /write_file HTTP/1.1\r\nHost: x\r\nX-API-Key: {self.token}\r\n"
                          f"Content-Length: 8000000000\r\n\r\n{{").encode())
            try:
                status, _, answer = read_response(sock, "POST")
            except socket.timeout:
                self.fail("no answer to an 8 GB Content-Length within 3 s")
        self.assertEqual(status, 413)
        self.assertEqual(set(json.loads(answer)), {"detail"})
        self.assertStillServing()

    def test_chunked_json_body_too_large_is_413(self):
        body = json.dumps({"content": "y" * 5000, "path": self.path("chunky.txt")}).encode()
        pieces = [body[i:i + 1000] for i in range(0, len(body), 1000)]
        with self.server.raw_socket() as sock:
            sock.sendall((f"POST /write_file HTTP/1.1\r\nHost: x\r\nX-API-Key: {self.token}\r\n"
                          f"Transfer-Encoding: chunked\r\n\r\n").encode())
            try:
                for p in pieces:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(p), p))
                sock.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer and close before the whole body is sent
            status, _, answer = read_response(sock, "POST")
        self.assertEqual(status, 413)
        self.assertEqual(set(json.loads(answer)), {"detail"})
        self.assertFalse(os.path.exists(self.path("chunky.txt")))
        self.assertStillServing()

    def test_too_many_connections_is_503(self):
        held = []
        try:
            deadline = time.monotonic() + 10
            while len(held) < 4:
                self.assertLess(time.monotonic(), deadline, "could not open 4 connections")
                sock = self.server.raw_socket()
                sock.sendall(raw_request("GET", "/is_alive", self.token))
                try:
                    status = read_response(sock)[0]
                except (ConnectionResetError, http.client.HTTPException):
                    status = None
                if status == 200:
                    held.append(sock)
                else:  # an earlier test's connection still counted: try again
                    sock.close()
                    time.sleep(0.05)
            with self.server.raw_socket() as extra:
                status, headers, body = read_response(extra)
                self.assertEqual(status, 503)
                self.assertEqual(set(json.loads(body)), {"detail"})
                self.assertTrue(closed_by_peer(extra, 5))
            # The held ones still work.
            held[0].sendall(raw_request("GET", "/", self.token))
            self.assertEqual(read_response(held[0])[0], 200)
        finally:
            for s in held:
                s.close()
        self.assertStillServing()


class TestIdleTimeout(ServerTestCase):
    server_args = ("--idle-timeout", "1", "--read-timeout", "30")

    def test_idle_connection_is_closed(self):
        with self.server.raw_socket() as sock:
            started = time.monotonic()
            self.assertTrue(closed_by_peer(sock, 8), "an idle connection stayed open")
            self.assertGreater(time.monotonic() - started, 0.5)

    def test_idle_keep_alive_connection_is_closed_after_an_answer(self):
        with self.server.raw_socket() as sock:
            sock.sendall(raw_request("GET", "/is_alive", self.token))
            self.assertEqual(read_response(sock)[0], 200)
            self.assertTrue(closed_by_peer(sock, 8), "an idle connection stayed open")
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})

    def test_a_long_command_is_not_an_idle_connection(self):
        name = self.new_session()
        r = self.server.run("sleep 2; echo done", session=name)
        self.assertObservation(self.assertReply(r, 200), output="done\n")


class TestReadTimeout(ServerTestCase):
    server_args = ("--idle-timeout", "30", "--read-timeout", "1")

    def trickle(self, sock, data, budget):
        """Sends `data` a byte at a time every 0.1 s; returns seconds until the server hung up,
        or None if it was still reading after `budget` seconds."""
        started = time.monotonic()
        for b in data:
            if time.monotonic() - started > budget:
                return None
            try:
                sock.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - started
            if closed_by_peer(sock, 0.1):
                return time.monotonic() - started
        return None

    # The whole header must arrive within --read-timeout once its first byte came; the server
    # currently applies --idle-timeout (30 s here) to the whole header of a connection's first
    # request, so a client trickling bytes holds the connection until then.
    def test_slow_header_is_disconnected(self):
        with self.server.raw_socket() as sock:
            data = b"GET /is_alive HTTP/1.1\r\nX-Slow: " + b"a" * 200
            took = self.trickle(sock, data, budget=6)
            self.assertIsNotNone(took, "a client sending a byte every 0.1 s was never cut off")
            self.assertLess(took, 4)
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})

    def test_slow_header_on_a_reused_connection_is_disconnected(self):
        with self.server.raw_socket() as sock:
            sock.sendall(raw_request("GET", "/is_alive", self.token))
            self.assertEqual(read_response(sock)[0], 200)
            data = b"GET /is_alive HTTP/1.1\r\nX-Slow: " + b"a" * 200
            took = self.trickle(sock, data, budget=6)
            self.assertIsNotNone(took, "a client sending a byte every 0.1 s was never cut off")
            self.assertLess(took, 4)

    # --read-timeout bounds each piece of a body, not the whole body (ServerConfig), so a big
    # upload on a slow link is not cut off while data keeps coming. The server sets one deadline
    # for the whole body instead: this one, a piece every 0.25 s for 2.5 s, is cut at 1 s.
    def test_steady_slow_body_is_accepted(self):
        body = json.dumps({"command": ["echo", "x" * 60]}).encode()
        with self.server.raw_socket(timeout=5) as sock:
            sock.sendall((f"POST /execute HTTP/1.1\r\nHost: x\r\nX-API-Key: {self.token}\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n").encode())
            try:
                for i in range(0, len(body), 8):
                    sock.sendall(body[i:i + 8])
                    time.sleep(0.25)
            except (BrokenPipeError, ConnectionResetError):
                self.fail("the server hung up on a body that kept arriving")
            status, _, answer = read_response(sock, "POST")
        self.assertEqual((status, json.loads(answer)),
                         (200, {"stdout": "x" * 60 + "\n", "stderr": "", "exit_code": 0}))

    # The same for answers: a reader that keeps taking a large answer slowly (a relay passing it
    # on to its own slow client) gets all of it, however long the whole takes. 16 MB read at
    # about 2.5 MB/s takes several seconds against a --read-timeout of 1 s.
    def test_steady_slow_reader_gets_the_whole_answer(self):
        size = 16 * 1024 * 1024
        command = f"head -c {size} /dev/zero | tr '\\0' x"
        body = json.dumps({"command": ["sh", "-c", command]}).encode()
        with self.server.raw_socket(timeout=10) as sock:
            sock.sendall(raw_request("POST", "/execute", self.token, body))
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                piece = sock.recv(1)
                self.assertTrue(piece, f"closed after {head!r}")
                head += piece
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            received = 0
            started = time.monotonic()
            while received < length:
                piece = sock.recv(min(256 * 1024, length - received))
                if not piece:
                    self.fail(f"the server hung up after {received} of {length} bytes, "
                              f"{time.monotonic() - started:.1f} s into the answer")
                received += len(piece)
                time.sleep(0.1)
            took = time.monotonic() - started
        self.assertGreater(took, 2, "the answer was read too fast to test the deadline")
        self.assertGreater(length, size)

    def test_stalled_body_is_disconnected(self):
        with self.server.raw_socket() as sock:
            sock.sendall((f"POST /execute HTTP/1.1\r\nHost: x\r\nX-API-Key: {self.token}\r\n"
                          f"Content-Length: 100\r\n\r\n{{").encode())
            started = time.monotonic()
            self.assertTrue(closed_by_peer(sock, 8), "a stalled body kept the connection open")
            self.assertLess(time.monotonic() - started, 5)
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})


class TestConcurrency(ServerTestCase):

    def run_in_thread(self, command, session, results, key, **kw):
        def work():
            results[key] = self.server.run(command, session=session, **kw)
        t = threading.Thread(target=work)
        t.start()
        return t

    def test_is_alive_answers_while_a_command_runs(self):
        name = self.new_session()
        started = self.path("sleep-started")
        results = {}
        t = self.run_in_thread(f"touch {started}; sleep 2", name, results, "sleep")
        wait_until(lambda: os.path.exists(started), 5, what="the sleep to start")
        for _ in range(5):
            begin = time.monotonic()
            r = self.server.get("/is_alive", timeout=0.15)
            self.assertLess(time.monotonic() - begin, 0.15)
            self.assertReply(r, 200, {"is_alive": True, "message": ""})
            time.sleep(0.1)
        t.join(HTTP_TIMEOUT)
        self.assertEqual(results["sleep"].status, 200, results["sleep"])

    def test_sessions_run_in_parallel(self):
        a, b = self.new_session(), self.new_session()
        results = {}
        begin = time.monotonic()
        threads = [self.run_in_thread("sleep 1; echo a", a, results, "a"),
                   self.run_in_thread("sleep 1; echo b", b, results, "b")]
        for t in threads:
            t.join(HTTP_TIMEOUT)
        took = time.monotonic() - begin
        self.assertEqual(results["a"].json()["output"], "a\n")
        self.assertEqual(results["b"].json()["output"], "b\n")
        self.assertLess(took, 1.7, "two sessions' commands did not run at the same time")

    def test_one_session_runs_commands_one_after_another(self):
        name = self.new_session()
        log = self.path("order.log")
        results = {}
        first = self.run_in_thread(
            f"echo start1 $EPOCHREALTIME >> {log}; sleep 0.5; echo end1 $EPOCHREALTIME >> {log}",
            name, results, "first")
        wait_until(lambda: os.path.exists(log), 5, what="the first command to start")
        second = self.run_in_thread(
            f"echo start2 $EPOCHREALTIME >> {log}; echo end2 $EPOCHREALTIME >> {log}",
            name, results, "second")
        first.join(HTTP_TIMEOUT)
        second.join(HTTP_TIMEOUT)
        self.assertEqual(results["first"].status, 200, results["first"])
        self.assertEqual(results["second"].status, 200, results["second"])
        with open(log) as f:
            stamps = dict(line.split() for line in f.read().splitlines())
        self.assertEqual(set(stamps), {"start1", "end1", "start2", "end2"})
        self.assertGreaterEqual(float(stamps["start2"]), float(stamps["end1"]))

    def test_interrupt_reaches_a_running_command(self):
        name = self.new_session()
        started = self.path("loop-started")
        results = {}
        t = self.run_in_thread(f"touch {started}; sleep 60", name, results, "sleep",
                               check="silent")
        wait_until(lambda: os.path.exists(started), 5, what="the sleep to start")
        r = self.server.post("/run_in_session", {"session": name, "action_type": "bash_interrupt"})
        self.assertObservation(self.assertReply(r, 200), exit_code=0)
        t.join(10)
        self.assertFalse(t.is_alive(), "the interrupted command never answered")
        self.assertObservation(self.assertReply(self.server.run("echo after", session=name),
                                                200), output="after\n")


    def test_close_session_reaches_a_running_command(self):
        name = "closing-busy"
        self.server.create_session(name)
        started = self.path("close-started")
        results = {}
        t = self.run_in_thread(f"touch {started}; sleep 60", name, results, "sleep")
        wait_until(lambda: os.path.exists(started), 5, what="the sleep to start")
        begin = time.monotonic()
        self.assertEqual(self.server.close_session(name), {"session_type": "bash"})
        self.assertLess(time.monotonic() - begin, 5)
        t.join(10)
        self.assertFalse(t.is_alive(), "the command of a closed session never answered")
        self.assertEqual(results["sleep"].status, 511, results["sleep"])
        self.assertEqual(set(results["sleep"].json()["swerexception"]), EXCEPTION_KEYS)


class TestMaxLifetime(unittest.TestCase):

    def test_server_exits_by_itself_and_leaves_no_bash(self):
        server = RexServer(BINARY, args=("--max-lifetime", "2"))
        try:
            server.create_session("life")
            out = server.run("sleep 300 & echo $$ $!", session="life").json()["output"]
            # The last line; an interactive bash may print the job's "[1] PID" first.
            bash_pid, job_pid = (int(x) for x in out.splitlines()[-1].split())
            kids = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True,
                                  text=True, timeout=10).stdout.split()
            self.assertIn(str(bash_pid), kids)
            # A command still running when the lifetime ends gets an answer.
            results = {}

            def long_command():
                try:
                    results["r"] = server.run("sleep 60", session="life")
                except OSError as e:
                    results["r"] = e
            t = threading.Thread(target=long_command)
            t.start()
            self.assertEqual(server.wait(timeout=10), 0, server.output())
            t.join(10)
            self.assertFalse(t.is_alive())
            # The session was closed under it: an exception answer, not a dropped connection.
            self.assertIsInstance(results.get("r"), Reply, results)
            self.assertEqual(results["r"].status, 511, results["r"])
            self.assertEqual(set(results["r"].json()["swerexception"]), EXCEPTION_KEYS)
            for pid in (bash_pid, job_pid):
                self.assertTrue(wait_until(lambda: is_gone(pid), 5, what=f"process {pid} to end"),
                                f"process {pid} ({process_state(pid)}) outlived the server")
        finally:
            server.kill()


class TestSessionInput(unittest.TestCase):
    """POST /session_input (a rex addition): what a person types at a running command."""

    def test_a_read_in_a_script_gets_the_input(self):
        server = RexServer(BINARY)
        try:
            server.create_session("s")
            results = {}

            def run():
                results["r"] = server.run(
                    "read -r -p 'name? ' who; read -r n; echo \"hello $who $((n * 2))\"",
                    session="s", timeout=20)
            t = threading.Thread(target=run)
            t.start()
            # The run holds the session; the input skips its queue.
            deadline = time.monotonic() + 10
            while True:
                r = server.post("/session_input", {"session": "s", "input": "rex\n"})
                if r.status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)  # the command may not be running yet
            self.assertEqual((r.status, r.json()), (200, {}), r)
            r = server.post("/session_input", {"session": "s", "input": "21\n"})
            self.assertEqual(r.status, 200, r)
            t.join(20)
            self.assertFalse(t.is_alive())
            obs = results["r"].json()
            self.assertEqual(obs["exit_code"], 0, obs)
            self.assertIn("hello rex 42", obs["output"], obs)
        finally:
            server.kill()

    def test_refusals(self):
        server = RexServer(BINARY)
        try:
            server.create_session("s")
            r = server.post("/session_input", {"session": "s", "input": "echo oops\n"})
            self.assertEqual(r.status, 511, r)
            exc = r.json()["swerexception"]
            self.assertIn("no command is running", exc["message"], exc)
            self.assertEqual(exc["extra_info"].get("rex_error"), "NoCommandRunningError", exc)
            # Nothing ran: the next command sees no "oops".
            out = server.run("echo fine", session="s").json()["output"]
            self.assertEqual(out.strip(), "fine")
            r = server.post("/session_input", {"session": "nope", "input": "x"})
            self.assertEqual(r.status, 511, r)
            self.assertIn("SessionDoesNotExistError", r.json()["swerexception"]["class_path"])
            r = server.post("/session_input", {"session": "s", "input": 5})
            self.assertEqual(r.status, 422, r)
        finally:
            server.kill()


class ProcessStream:
    """A /processes/start or /processes/connect answer read as it comes over a raw socket: its
    Server-Sent Events, their `data` decoded; chunked framing taken apart by hand."""

    def __init__(self, server, path, payload):
        self.sock = server.raw_socket()
        body = json.dumps(payload).encode()
        self.sock.sendall(raw_request("POST", path, server.token, body))
        head = b""
        while b"\r\n\r\n" not in head:
            piece = self.sock.recv(1)
            if not piece:
                raise AssertionError(f"closed after {head!r}")
            head += piece
        self.status = int(head.split(b" ", 2)[1])
        self.raw = b""
        self.output = b""
        self.events = []

    def _more(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.sock], [], [], left)[0]:
            return False
        piece = self.sock.recv(65536)
        if not piece:
            raise AssertionError(f"the stream ended; events {self.events}")
        self.raw += piece
        # Chunk sizes are lines of hex digits alone; events are "event: ...\ndata: ...\n\n".
        text = self.raw.decode("latin-1")
        blocks = text.split("\n\n")
        self.raw = blocks.pop().encode("latin-1")
        for block in blocks:
            name, data = None, None
            for line in block.split("\n"):
                line = line.strip("\r")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
            if name is None:
                continue
            self.events.append((name, data))
            if name == "stdout":
                self.output += base64.b64decode(data["data"])
        return True

    def wait_for(self, what, timeout=10):
        """Until the output holds `what` (bytes), an event of that name (str) came, or `what`
        (a function of the output so far) says yes."""
        deadline = time.monotonic() + timeout
        while True:
            if isinstance(what, bytes) and what in self.output:
                return
            if callable(what) and what(self.output):
                return
            if isinstance(what, str) and any(n == what for n, _ in self.events):
                return [d for n, d in self.events if n == what][-1]
            if not self._more(deadline):
                raise AssertionError(f"no {what!r} within {timeout} s; output {self.output!r}, "
                                     f"events {[n for n, _ in self.events]}")

    def vanish(self):
        """Gone without a word: a reset, as a client that crashed or lost its network."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


class OneServerCase(unittest.TestCase):
    """Tests that share one rex-server, started for the class."""

    @classmethod
    def setUpClass(cls):
        cls.server = RexServer(BINARY)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()


class TestTerminals(OneServerCase):
    """Processes with a pty (a rex addition): the wire of `rex shell`'s terminal."""

    def type(self, tag, keys):
        r = self.server.post("/processes/input",
                             {"tag": tag, "data": base64.b64encode(keys).decode()})
        self.assertEqual((r.status, r.json()), (200, {}), r)

    def listed(self, tag):
        r = self.server.get("/processes")
        self.assertEqual(r.status, 200, r)
        return [p for p in r.json()["processes"] if p["tag"] == tag]

    def test_a_shell_on_a_terminal(self):
        s = ProcessStream(self.server, "/processes/start",
                          {"argv": ["bash", "--norc", "--noprofile", "-i"], "tag": "tty-shell",
                           "env": {"PS1": "$ "}, "pty": {"cols": 90, "rows": 20}})
        self.assertEqual(s.status, 200)
        pid = s.wait_for("start")["pid"]
        s.wait_for(b"$ ")
        self.assertEqual(self.listed("tty-shell"),
                         [{"pid": pid, "argv": ["bash", "--norc", "--noprofile", "-i"],
                           "env": {"PS1": "$ "}, "cwd": os.getcwd(), "tag": "tty-shell",
                           "stdin_pipe": True, "pty": {"cols": 90, "rows": 20}}])
        self.type("tty-shell", b"stty size\r")
        s.wait_for(b"20 90\r\n")
        r = self.server.post("/processes/resize",
                             {"tag": "tty-shell", "size": {"cols": 150, "rows": 50}})
        self.assertEqual((r.status, r.json()), (200, {}), r)
        self.type("tty-shell", b"stty size\r")
        s.wait_for(b"50 150\r\n")
        self.type("tty-shell", b"exit 4\r")
        end = s.wait_for("end")
        self.assertEqual(end, {"exit_code": 4, "signal": None, "status": "exit status 4"})
        self.assertEqual(self.listed("tty-shell"), [])
        s.sock.close()

    def test_bad_requests_are_named_and_change_nothing(self):
        def start(pty):
            return self.server.post("/processes/start", {"argv": ["cat"], "pty": pty})
        r = start({"cols": "wide", "rows": 24})
        self.assertEqual(r.status, 422, r)
        self.assertIn("cols", r.body.decode())
        r = start({"cols": 80, "rows": -1})
        self.assertEqual(r.status, 200, r)  # a start's failure is the stream's error event
        self.assertIn(b"event: error", r.body)
        error = json.loads(r.body.split(b"data: ", 1)[1].split(b"\n", 1)[0])["swerexception"]
        self.assertEqual(error["class_path"], "builtins.ValueError", error)
        self.assertIn("80x-1", error["message"])
        r = self.server.post("/processes/resize", {"tag": "nobody", "size": {"cols": 9, "rows": 9}})
        self.assertEqual(r.status, 511, r)
        self.assertEqual(r.json()["swerexception"]["extra_info"].get("rex_error"),
                         "ProcessDoesNotExistError", r)
        r = self.server.post("/processes/resize", {"tag": "nobody", "size": [80, 24]})
        self.assertEqual(r.status, 422, r)
        self.assertEqual(self.server.get("/processes").json(), {"processes": []})

    def test_a_client_that_vanishes_mid_stream_leaves_the_terminal_running(self):
        s = ProcessStream(self.server, "/processes/start",
                          {"argv": ["cat"], "tag": "tty-left", "pty": {"cols": 80, "rows": 24}})
        pid = s.wait_for("start")["pid"]
        # Whatever fails below, the next test finds no process of this one's.
        self.addCleanup(self.server.post, "/processes/signal",
                        {"tag": "tty-left", "signal": "SIGKILL"})
        self.type("tty-left", b"one\r")
        s.wait_for(b"one\r\none\r\n")
        s.vanish()
        # The process runs on, and the server serves on.
        self.type("tty-left", b"two\r")
        self.assertEqual([p["pid"] for p in self.listed("tty-left")], [pid])
        self.assertEqual(self.server.get("/is_alive").json()["is_alive"], True)
        again = ProcessStream(self.server, "/processes/connect", {"tag": "tty-left"})
        self.assertEqual(again.wait_for("start")["pid"], pid)
        self.type("tty-left", b"three\r")
        # The terminal's echo of "three" and cat's copy of it; cat's copy of "two" may come
        # between them when cat was slow to run (a busy machine).
        again.wait_for(lambda out: out.count(b"three\r\n") == 2)
        r = self.server.post("/processes/signal", {"tag": "tty-left", "signal": "SIGKILL"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(again.wait_for("end")["signal"], signal.SIGKILL)
        again.sock.close()


class TestSessionTerminals(OneServerCase):
    """A bash session's own terminal lent to a person between its commands (a rex addition:
    /sessions/attach, keys as /session_input, /sessions/resize)."""

    def keys(self, session, typed):
        r = self.server.post("/session_input", {"session": session, "input": typed})
        self.assertEqual((r.status, r.json()), (200, {}), r)

    def run_once_back(self, session, command):
        """The output of `command`, run as soon as the session takes commands again (within
        3 s of its terminal's client leaving)."""
        t0 = time.monotonic()
        while True:
            r = self.server.run(command, session=session, check="silent")
            if r.status == 200 or time.monotonic() - t0 > 10:
                break
            time.sleep(0.05)
        self.assertEqual(r.status, 200, r)
        self.assertLess(time.monotonic() - t0, 3, "the session came back late after the client left")
        return r.json()["output"]

    def test_attach_type_detach_and_the_session_goes_on(self):
        self.server.create_session("lent")
        self.assertEqual(self.server.run("cd /tmp; A=1", session="lent").status, 200)
        s = ProcessStream(self.server, "/sessions/attach",
                          {"session": "lent", "size": {"cols": 70, "rows": 15}})
        self.assertEqual(s.status, 200)
        self.assertGreater(s.wait_for("start")["pid"], 0)
        s.wait_for(b"(rex) ")
        self.keys("lent", "stty size; B=2\r")
        s.wait_for(b"15 70\r\n")
        r = self.server.run("echo no", session="lent", check="silent")
        self.assertEqual(r.status, 511, r)
        self.assertIn("a terminal is attached", r.json()["swerexception"]["message"])
        r = self.server.post("/sessions/resize", {"session": "lent", "size": {"cols": 99, "rows": 9}})
        self.assertEqual((r.status, r.json()), (200, {}), r)
        self.keys("lent", "stty size\r")
        s.wait_for(b"9 99\r\n")
        s.sock.close()
        # A client that leaves detaches at once, without waiting for a keepalive.
        self.assertEqual(self.run_once_back("lent", "echo $PWD $A $B"), "/tmp 1 2\n")

    def test_a_client_that_vanishes_hands_the_session_back(self):
        self.server.create_session("vanish")
        s = ProcessStream(self.server, "/sessions/attach", {"session": "vanish"})
        s.wait_for(b"(rex) ")
        self.keys("vanish", "sleep 100\r")
        s.wait_for(b"sleep 100\r\n")
        s.vanish()
        self.assertEqual(self.run_once_back("vanish", "echo back"), "back\n")
        self.assertEqual(self.server.get("/is_alive").json()["is_alive"], True)

    def test_bad_requests_are_named_and_change_nothing(self):
        self.server.create_session("bad")
        r = self.server.post("/sessions/attach", {"session": "bad", "size": {"cols": "wide"}})
        self.assertEqual(r.status, 422, r)
        self.assertIn("cols", r.body.decode())
        r = self.server.post("/sessions/attach", {"session": "bad", "size": [80, 24]})
        self.assertEqual(r.status, 422, r)
        r = self.server.post("/sessions/attach", {"session": "nobody"})
        self.assertEqual(r.status, 200, r)  # a failed attach is the stream's error event
        error = json.loads(r.body.split(b"data: ", 1)[1].split(b"\n", 1)[0])["swerexception"]
        self.assertEqual(error["class_path"], "swerex.exceptions.SessionDoesNotExistError", error)
        r = self.server.post("/sessions/attach",
                             {"session": "bad", "size": {"cols": 0, "rows": 24}})
        error = json.loads(r.body.split(b"data: ", 1)[1].split(b"\n", 1)[0])["swerexception"]
        self.assertEqual(error["class_path"], "builtins.ValueError", error)
        r = self.server.post("/sessions/resize", {"session": "bad", "size": {"cols": 9, "rows": 9}})
        self.assertEqual(r.status, 511, r)
        self.assertIn("no terminal is attached", r.json()["swerexception"]["message"])
        self.assertEqual(self.server.run("echo fine", session="bad").json()["output"], "fine\n")


class TestLifetimeEndpoint(unittest.TestCase):
    """POST /lifetime (a rex addition) replaces the deadline of a server started ahead of its
    use: shorter, longer, or none."""

    def test_set_read_and_reach_the_deadline(self):
        server = RexServer(BINARY, args=("--max-lifetime", "600"))
        try:
            got = server.get("/lifetime").json()
            self.assertTrue(590 < got["max_lifetime"] <= 600, got)
            self.assertAlmostEqual(got["deadline"], time.time() + got["max_lifetime"], delta=5)
            # Without the token: refused like every route.
            self.assertEqual(server.request("POST", "/lifetime", json.dumps({"max_lifetime": 1}),
                                            auth=False).status, 403)
            for bad in ({"max_lifetime": -1}, {"max_lifetime": "soon"}, {}, [],
                        {"max_lifetime": 1e12}):
                r = server.post("/lifetime", bad)
                self.assertEqual(r.status, 422, (bad, r))
                self.assertIn("max_lifetime", r.json()["detail"], (bad, r.json()))
            r = server.post("/lifetime", {"max_lifetime": 0})
            self.assertEqual(r.json(), {"max_lifetime": None, "deadline": None})
            server.create_session("life")
            out = server.run("echo $$", session="life").json()["output"]
            bash_pid = int(out.strip().splitlines()[-1])
            t0 = time.monotonic()
            r = server.post("/lifetime", {"max_lifetime": 1.5})
            self.assertEqual(r.status, 200, r)
            self.assertTrue(1.0 < r.json()["max_lifetime"] <= 1.5, r.json())
            self.assertEqual(server.wait(timeout=10), 0, server.output())
            self.assertGreater(time.monotonic() - t0, 1.3, "it ended before its new deadline")
            self.assertIn("maximum lifetime of 1.5 s reached", server.output())
            self.assertTrue(wait_until(lambda: is_gone(bash_pid), 5, what="the session's bash"))
        finally:
            server.kill()

    def test_an_absurd_max_lifetime_is_refused_before_listening(self):
        sock = os.path.join(tempfile.mkdtemp(prefix="lt-"), "s.sock")
        r = subprocess.run([BINARY, "--unix-socket", sock, "--auth-token", "t",
                            "--max-lifetime", "1e12"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("--max-lifetime: max_lifetime must be a number of seconds", r.stderr)
        self.assertFalse(os.path.exists(sock), "the socket was bound before the refusal")
        shutil.rmtree(os.path.dirname(sock), ignore_errors=True)

    def test_a_longer_deadline_replaces_a_shorter_one(self):
        server = RexServer(BINARY, args=("--max-lifetime", "1"))
        try:
            self.assertEqual(server.post("/lifetime", {"max_lifetime": 60}).status, 200)
            time.sleep(1.5)
            self.assertTrue(server.get("/is_alive").json()["is_alive"])
        finally:
            server.kill()


class TestSignals(unittest.TestCase):

    def check_graceful(self, signo):
        server = RexServer(BINARY)
        try:
            server.create_session("busy")
            out = server.run("echo $$", session="busy").json()["output"]
            bash_pid = int(out)
            results = {}

            def long_command():
                try:
                    results["r"] = server.run("sleep 60", session="busy")
                except OSError as e:
                    results["r"] = e
            t = threading.Thread(target=long_command)
            t.start()
            # The command is running once bash has a child.
            wait_until(lambda: subprocess.run(["pgrep", "-P", str(bash_pid)], capture_output=True,
                                              timeout=10).returncode == 0,
                       5, what="the command to start")
            server.proc.send_signal(signo)
            self.assertEqual(server.wait(), 0, server.output())
            t.join(10)
            self.assertFalse(t.is_alive())
            self.assertIsInstance(results.get("r"), Reply, results)
            self.assertEqual(results["r"].status, 511, results["r"])
            wait_until(lambda: is_gone(bash_pid), 5, what=f"bash {bash_pid} to end")
        finally:
            server.kill()

    def test_sigterm_answers_running_commands_and_exits_0(self):
        self.check_graceful(signal.SIGTERM)

    def test_sigint_answers_running_commands_and_exits_0(self):
        self.check_graceful(signal.SIGINT)


class TestUnixSocket(ServerTestCase):
    unix = True

    def test_requests_over_the_socket(self):
        self.assertTrue(os.path.exists(self.server.unix_socket))
        self.assertReply(self.server.get("/"), 200, {"message": "hello world"})
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})
        self.assertReply(self.server.get("/is_alive", auth=False), 403,
                         {"detail": "Not authenticated"})
        name = self.new_session()
        r = self.server.run("echo over unix", session=name)
        self.assertObservation(self.assertReply(r, 200), output="over unix\n")
        self.assertSwerexception(self.server.run("false", session=name),
                                 "swerex.exceptions.NonZeroExitCodeError")
        self.assertReply(self.server.post("/execute", {"command": ["echo", "x"]}), 200,
                         {"stdout": "x\n", "stderr": "", "exit_code": 0})

    def test_keep_alive_over_the_socket(self):
        with self.server.raw_socket() as sock:
            for _ in range(3):
                sock.sendall(raw_request("GET", "/is_alive", self.token))
                self.assertEqual(read_response(sock)[0], 200)


class TestUnixSocketRemoved(unittest.TestCase):

    def test_socket_file_is_removed_on_exit_and_stale_one_replaced(self):
        tmp = tempfile.mkdtemp(prefix="rex-unix-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "s.sock")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)  # a socket file left by an earlier run
        stale.close()
        server = RexServer(BINARY, unix_socket=path)
        try:
            self.assertEqual(server.get("/is_alive").status, 200)
        finally:
            self.assertEqual(server.terminate(), 0)
        self.assertFalse(os.path.exists(path))


class TestTokenFromTheEnvironment(unittest.TestCase):

    def test_the_token_is_in_no_listing_of_the_server_and_not_inherited(self):
        token = "env-token-" + os.urandom(8).hex()
        server = RexServer(BINARY, token=token, token_in_env=True)
        try:
            self.assertEqual(server.get("/is_alive").status, 200)
            self.assertEqual(server.get("/is_alive", auth=False).status, 403)
            for listing in ("environ", "cmdline"):
                with open(f"/proc/{server.pid}/{listing}", "rb") as f:
                    self.assertNotIn(token.encode(), f.read(), f"/proc/PID/{listing}")
            r = server.post("/execute", {"command": ["sh", "-c", "echo ${REX_AUTH_TOKEN:-none}"]})
            self.assertEqual(r.status, 200)
            self.assertEqual(json.loads(r.body)["stdout"], "none\n")
        finally:
            self.assertEqual(server.terminate(), 0)


class TestCommandLine(unittest.TestCase):

    def run_binary(self, *args, binary=None):
        return subprocess.run([binary or BINARY, *args], capture_output=True, text=True,
                              timeout=10, stdin=subprocess.DEVNULL)

    def test_version_alone_prints_only_the_version(self):
        for flag in ["--version", "-v"]:
            with self.subTest(flag=flag):
                p = self.run_binary(flag)
                self.assertEqual(p.returncode, 0)
                self.assertRegex(p.stdout, r"^\d+\.\d+\.\d+\n$")
                self.assertEqual(p.stderr, "")

    def test_version_with_other_flags_fails(self):
        for args in [("--version", "--port", "1"), ("--port", "1", "-v")]:
            with self.subTest(args=args):
                p = self.run_binary(*args)
                self.assertEqual(p.returncode, 1, p)
                self.assertNotRegex(p.stdout, r"^\d+\.\d+\.\d+\n$")

    def test_swerex_remote_alias(self):
        alias = os.path.join(os.path.dirname(BINARY), "swerex-remote")
        if not os.path.exists(alias):
            self.skipTest(f"no {alias}")
        p = self.run_binary("--version", binary=alias)
        self.assertEqual((p.returncode, p.stdout), (0, self.run_binary("--version").stdout))

    # `--install PATH` copies the server (a Kubernetes init container hands it to the sandbox's
    # container this way, from an image that holds nothing else).
    def test_install_copies_the_server(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        target = os.path.join(tmp, "rex-server")
        p = self.run_binary("--install", target)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn(f"installed at {target}", p.stdout)
        self.assertEqual(os.stat(target).st_mode & 0o777, 0o755)
        self.assertEqual(self.run_binary("--version", binary=target).stdout,
                         self.run_binary("--version").stdout)
        self.assertEqual(os.listdir(tmp), ["rex-server"], "a temporary file was left")
        missing = os.path.join(tmp, "missing", "rex-server")
        p = self.run_binary("--install", missing)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"[Errno 2] No such file or directory: '{missing}'", p.stderr)
        self.assertEqual(self.run_binary("--install").returncode, 2)

    def test_auth_token_is_required(self):
        p = self.run_binary("--port", "0", "--host", "127.0.0.1")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("auth-token", p.stdout + p.stderr)

    def test_port_in_use_fails_clearly(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            p = self.run_binary("--auth-token", "t", "--host", "127.0.0.1", "--port", str(port))
        self.assertEqual(p.returncode, 1, p)
        self.assertIn(str(port), p.stderr)


class TestUpload(ServerTestCase):
    server_args = ("--max-json-body-bytes", "4096", "--max-body-bytes", "65536")

    def upload(self, data, target_path, unzip, filename="payload.bin",
               ctype="application/octet-stream"):
        return self.server.upload(data, target_path, unzip, filename, ctype)

    @staticmethod
    def zip_bytes(entries):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in entries:
                z.writestr(name, data)
        return buf.getvalue()

    def test_file_to_an_exact_path_with_parents(self):
        data = bytes(range(256)) * 40 + b"\r\n\x00end"  # larger than --max-json-body-bytes
        target = self.path("up", "a", "b", "file.bin")
        self.assertReply(self.upload(data, target, unzip=False), 200, {})
        with open(target, "rb") as f:
            self.assertEqual(f.read(), data)

    def test_zip_is_extracted_into_a_directory(self):
        data = self.zip_bytes([("top.txt", "top\n"), ("dir/inner.txt", "inner\n"),
                               ("dir/deeper/x.py", "print(1)\n")])
        target = self.path("extracted", "here")
        self.assertReply(self.upload(data, target, unzip=True, filename="zipped_transfer.zip",
                                     ctype="application/zip"), 200, {})
        for rel, content in [("top.txt", "top\n"), ("dir/inner.txt", "inner\n"),
                             ("dir/deeper/x.py", "print(1)\n")]:
            with open(os.path.join(target, rel)) as f:
                self.assertEqual(f.read(), content)

    def test_zip_escaping_the_target_is_refused(self):
        base = self.path("evil-base")
        target = os.path.join(base, "inside")
        data = self.zip_bytes([("ok.txt", "fine\n"), ("../evil", "gotcha\n")])
        r = self.upload(data, target, unzip=True, filename="zipped_transfer.zip",
                        ctype="application/zip")
        self.assertEqual(r.status, 511, r)
        exc = r.json()["swerexception"]
        self.assertEqual(set(exc), EXCEPTION_KEYS)
        self.assertIn("../evil", exc["message"])
        self.assertFalse(os.path.exists(os.path.join(base, "evil")), "wrote outside the target")

    def test_chunked_upload_without_unzip_field(self):
        data = os.urandom(20000)
        body, content_type = multipart([("file", ("blob", data, "application/octet-stream")),
                                        ("target_path", self.path("chunked", "blob"))])
        pieces = [body[i:i + 3000] for i in range(0, len(body), 3000)]
        with self.server.raw_socket() as sock:
            sock.sendall((f"POST /upload HTTP/1.1\r\nHost: x\r\nX-API-Key: {self.token}\r\n"
                          f"Content-Type: {content_type}\r\n"
                          f"Transfer-Encoding: chunked\r\n\r\n").encode())
            for p in pieces:
                sock.sendall(b"%x\r\n%s\r\n" % (len(p), p))
            sock.sendall(b"0\r\n\r\n")
            status, _, answer = read_response(sock, "POST")
        self.assertEqual((status, json.loads(answer)), (200, {}))
        with open(self.path("chunked", "blob"), "rb") as f:
            self.assertEqual(f.read(), data)

    def test_upload_replaces_an_existing_file(self):
        target = self.path("replace.txt")
        with open(target, "w") as f:
            f.write("old content that is longer\n")
        self.assertReply(self.upload(b"new\n", target, unzip=False), 200, {})
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"new\n")

    def test_upload_without_target_path_is_422(self):
        body, content_type = multipart([("file", ("f", b"x", "application/octet-stream"))])
        r = self.server.request("POST", "/upload", body=body,
                                headers={"Content-Type": content_type})
        self.assertValidationError(r, field="target_path")

    def test_upload_that_is_not_multipart_is_422(self):
        r = self.server.post("/upload", {"target_path": self.path("nope")})
        self.assertValidationError(r)
        self.assertFalse(os.path.exists(self.path("nope")))

    def test_bad_zip_is_an_error(self):
        target = self.path("badzip")
        r = self.upload(b"PK\x03\x04 this is not a zip", target, unzip=True,
                        filename="zipped_transfer.zip", ctype="application/zip")
        self.assertEqual(r.status, 511, r)
        self.assertEqual(set(r.json()["swerexception"]), EXCEPTION_KEYS)
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})

    def test_upload_over_max_body_bytes_is_413(self):
        target = self.path("too-big.bin")
        r = self.upload(b"z" * 100_000, target, unzip=False)
        data = self.assertReply(r, 413)
        self.assertEqual(set(data), {"detail"})
        self.assertFalse(os.path.exists(target))
        self.assertReply(self.server.get("/is_alive"), 200, {"is_alive": True, "message": ""})


def main():
    global BINARY
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BINARY = sys.argv.pop(1)
    if not BINARY or not os.access(BINARY, os.X_OK):
        sys.exit(f"usage: {sys.argv[0]} PATH/TO/rex-server [unittest args] "
                 f"(or set REX_SERVER); got {BINARY!r}")
    BINARY = os.path.abspath(BINARY)
    # A last resort against a hang the per-call timeouts miss: print every stack and exit.
    faulthandler.dump_traceback_later(280, exit=True)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
