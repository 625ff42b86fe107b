#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/corpus/<target>/.

Deterministic (fixed times, sorted entries), so running it again changes nothing. Seeds that
fuzzing found (crashes turned regression tests) are kept in the same folders under names that
start with "found-"; this script never touches those.
"""
import gzip
import io
import json
import pathlib
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"
MTIME = 1700000000


def write(target, name, data):
    folder = ROOT / target
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (folder / name).write_bytes(data)


# --- http_server: raw bytes of one connection ----------------------------------------------

KEY = "X-API-Key: fuzz-token\r\n"


def get(path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: rex\r\n{KEY}{extra}\r\n"


def post(path, body, extra=""):
    if not isinstance(body, str):
        body = json.dumps(body)
    return (f"POST {path} HTTP/1.1\r\nHost: rex\r\n{KEY}Content-Type: application/json\r\n"
            f"Content-Length: {len(body.encode())}\r\n{extra}\r\n{body}")


def multipart(fields, boundary="fuzzboundary"):
    out = ""
    for name, filename, value in fields:
        out += f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\""
        if filename is not None:
            out += f"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream"
        out += f"\r\n\r\n{value}\r\n"
    return out + f"--{boundary}--\r\n"


def http_seeds():
    session = {"session": "s", "startup_source": [], "startup_timeout": 1.0}
    bash = {"action_type": "bash", "command": "echo hi", "session": "s", "timeout": 5,
            "check": "silent", "expect": [], "is_interactive_command": False}
    seeds = {
        "root": get("/"),
        "is_alive": get("/is_alive", "Connection: close\r\n"),
        "session_lifecycle": post("/create_session", session) + post("/run_in_session", bash) +
        post("/run_in_session", {"action_type": "bash_interrupt", "session": "s"}) +
        post("/close_session", {"session": "s"}),
        "run_without_session": post("/run_in_session", {"command": "ls", "check": "raise"}),
        "stream": post("/create_session", {}) +
        post("/run_in_session_stream", {"command": "echo streamed"}),
        "execute": post("/execute", {"command": ["ls", "-l"], "env": {"A": "1"}, "cwd": "/",
                                     "timeout": 1.5, "shell": False}) +
        post("/execute", {"command": "echo a | cat", "shell": True, "check": True}),
        "files": post("/write_file", {"path": "/tmp/x", "content": "data\n"}) +
        post("/read_file", {"path": "/tmp/x", "encoding": "utf-8", "errors": "strict"}) +
        post("/read_file", {"path": "/missing"}),
        "invalid_json": post("/execute", "{\"command\": [1, 2"),
        "missing_field": post("/write_file", {"path": "/x"}),
        "wrong_types": post("/run_in_session", {"command": 5, "timeout": "x", "expect": [1]}),
        "replay": post("/close", "", "X-Request-ID: 1\r\n") + post("/close", "", "X-Request-ID: 1\r\n"),
        "expect_continue": post("/create_session", {"session": "e"}, "Expect: 100-continue\r\n"),
        "chunked": (f"POST /write_file HTTP/1.1\r\nHost: rex\r\n{KEY}Transfer-Encoding: chunked\r\n"
                    "\r\n10\r\n{\"path\":\"/a\",\"co\r\n11\r\nntent\":\"chunked\"}\r\n0\r\n\r\n"),
        "method_and_path": get("/execute") + get("/nowhere?x=1") +
        f"DELETE / HTTP/1.1\r\n{KEY}\r\n",
        "head": f"HEAD /is_alive HTTP/1.1\r\n{KEY}\r\n" + get("/"),
        "wrong_key": "GET / HTTP/1.1\r\nX-API-Key: nope\r\n\r\n" + "GET / HTTP/1.1\r\n\r\n",
        "http10": "GET /is_alive HTTP/1.0\r\n" + KEY + "\r\n",
        "large_body_refused": post("/write_file", {"path": "/big", "content": "x" * 9000}),
        "bad_request": "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "processes": post("/processes/start", {"argv": ["cat"], "stdin_pipe": True, "tag": "c"}) +
        get("/processes") + post("/processes/input", {"tag": "c", "data": "aGkK", "close": True}) +
        post("/processes/signal", {"pid": 1, "signal": "SIGBOGUS"}) +
        post("/processes/connect", {"pid": 7}),
        "process_bad_input": post("/processes/input", {"pid": 1, "data": "not base64!"}) +
        post("/processes/start", {"argv": []}),
        "lifetime": get("/lifetime") + post("/lifetime", {"max_lifetime": 3600}) +
        post("/lifetime", {"max_lifetime": -1}) + post("/lifetime", {"max_lifetime": "x"}) +
        post("/lifetime", {"max_lifetime": 0}),
    }
    body = multipart([("target_path", None, "/tmp/up"), ("unzip", None, "false"),
                      ("file", "a.txt", "uploaded bytes")])
    seeds["upload"] = (f"POST /upload HTTP/1.1\r\nHost: rex\r\n{KEY}"
                       "Content-Type: multipart/form-data; boundary=fuzzboundary\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n{body}") + post("/read_file",
                                                                            {"path": "/tmp/up"})
    bad = multipart([("file", "a", "x"), ("file", "b", "y")])
    seeds["upload_two_files"] = (f"POST /upload HTTP/1.1\r\n{KEY}"
                                 "Content-Type: multipart/form-data; boundary=fuzzboundary\r\n"
                                 f"Content-Length: {len(bad)}\r\n\r\n{bad}")
    seeds["upload_no_boundary"] = (f"POST /upload HTTP/1.1\r\n{KEY}Content-Type: text/plain\r\n"
                                   "Content-Length: 3\r\n\r\nabc")
    for name, data in seeds.items():
        write("http_server", name, data)


# --- protocol_json: a type index byte, then JSON --------------------------------------------

JSON_TYPES = [
    ("create_session_request", {"startup_source": ["/etc/profile"], "session": "a",
                                "session_type": "bash", "startup_timeout": 2}),
    ("create_session_response", {"output": "ok", "session_type": "bash"}),
    ("close_session_request", {"session": "a", "session_type": "bash"}),
    ("close_session_response", {"session_type": "bash"}),
    ("bash_action", {"command": "ls", "session": "a", "timeout": 1.5,
                     "is_interactive_command": False, "is_interactive_quit": False,
                     "check": "ignore", "error_msg": "e", "expect": ["$ "], "action_type": "bash",
                     "no_output_timeout": 3, "max_output_bytes": 100000}),
    ("bash_interrupt_action", {"session": "a", "timeout": 0.2, "n_retry": 3, "expect": [],
                               "action_type": "bash_interrupt"}),
    ("action", {"action_type": "bash_interrupt", "n_retry": 1}),
    ("bash_observation", {"output": "out\n", "exit_code": 0, "failure_reason": "",
                          "expect_string": "$", "session_type": "bash"}),
    ("command", {"command": ["ls", "-a"], "timeout": None, "shell": False, "check": True,
                 "error_msg": "", "env": {"PATH": "/bin"}, "cwd": "/tmp",
                 "merge_output_streams": True}),
    ("command_response", {"stdout": "a", "stderr": "b", "exit_code": None}),
    ("read_file_request", {"path": "/x", "encoding": "latin-1", "errors": "replace"}),
    ("read_file_response", {"content": "\u00e9"}),
    ("write_file_request", {"content": "c", "path": "/y"}),
    ("write_file_response", {}),
    ("upload_request", {"source_path": "/a", "target_path": "/b", "unzip": True}),
    ("upload_response", {}),
    ("download_request", {"path": "/a", "target_path": "/b"}),
    ("download_response", {}),
    ("is_alive_response", {"is_alive": False, "message": "down"}),
    ("close_response", {}),
    ("exception", {"message": "boom", "class_path": "swerex.exceptions.NonZeroExitCodeError",
                   "traceback": "", "extra_info": {"exit_code": 1}}),
    ("process_config", {"argv": ["cat"], "env": {"A": "1"}, "cwd": "/tmp", "tag": "t",
                        "stdin_pipe": True, "keepalive": 0.5}),
    ("process_info", {"pid": 42, "argv": ["sleep", "9"], "env": None, "cwd": "/",
                      "tag": "", "stdin_pipe": False}),
    ("process_list_response", {"processes": [{"pid": 1, "argv": ["a"]}, {"pid": 2}]}),
    ("process_selector", {"pid": 0, "tag": "web", "keepalive": 15}),
    ("process_input", {"pid": 7, "data": "aGkK", "close": True}),
    ("process_signal", {"tag": "web", "signal": "SIGTERM"}),
    ("process_end", {"exit_code": None, "signal": 9, "status": "signal: killed"}),
    ("process_resize", {"tag": "tty", "size": {"cols": 132, "rows": 43}}),
    ("process_config_pty", {"argv": ["bash"], "tag": "tty", "pty": {"cols": 80, "rows": 24}}),
    ("session_attach", {"session": "agent", "size": {"cols": 120, "rows": 40}, "keepalive": 5}),
    ("session_resize", {"session": "agent", "size": {"cols": 90, "rows": 30}}),
]


def json_seeds():
    for index, (name, value) in enumerate(JSON_TYPES):
        write("protocol_json", name, bytes([index]) + json.dumps(value).encode())
    extra = {
        "action_default_tag": (6, {"command": "pwd"}),
        "action_unknown_tag": (6, {"action_type": "python", "command": "1"}),
        "command_string": (8, {"command": "echo $HOME", "shell": True}),
        "integer_overflow": (5, {"n_retry": 99999999999}),
        "null_fields": (4, {"command": "x", "timeout": None, "expect": None}),
        "exception_rex_only": (20, {"message": "died", "class_path":
                                    "swerex.exceptions.SwerexException",
                                    "extra_info": {"rex_error": "SessionDiedError"}}),
        "exception_unknown_class": (20, {"message": "m", "class_path": "x.Y"}),
    }
    for name, (index, value) in extra.items():
        write("protocol_json", name, bytes([index]) + json.dumps(value).encode())
    write("protocol_json", "not_json", bytes([0]) + b"{\"session\": ")
    write("protocol_json", "number_overflow", bytes([5]) + b"{\"timeout\": 1e400}")


# --- multipart: a Content-Type line, then the body ------------------------------------------

def multipart_seeds():
    ct = "multipart/form-data; boundary=fuzzboundary\n"
    write("multipart", "upload", ct + multipart([("target_path", None, "/t"),
                                                 ("unzip", None, "true"),
                                                 ("file", "f.zip", "PK\x03\x04data")]))
    write("multipart", "quoted_boundary",
          'Multipart/Form-Data; charset=utf-8; boundary="a b:c"\n' +
          multipart([("x", None, "y")], boundary="a b:c"))
    write("multipart", "filename_star",
          ct + "preamble\r\n--fuzzboundary\r\nContent-Disposition: form-data; name=file; "
          "filename=\"plain\"; filename*=UTF-8''%C3%A9t%C3%A9\r\nContent-Type: text/plain\r\n"
          " folded\r\n\r\nbody\r\n--fuzzboundary--\r\nepilogue")
    write("multipart", "empty_part", ct + "--fuzzboundary\r\nContent-Disposition: form-data; "
          "name=\"e\"\r\n\r\n\r\n--fuzzboundary  \r\nContent-Disposition: form-data; name=f\r\n"
          "\r\n\r\n--fuzzboundary--")
    write("multipart", "data_like_boundary", ct + multipart(
        [("file", "x", "\r\n--fuzzboundar\r\n--fuzzboundaryX\r\r\n")]))
    write("multipart", "truncated", ct + "--fuzzboundary\r\nContent-Disposition: form-data; "
          "name=a\r\n\r\nno end")
    write("multipart", "latin1_name", ct + "--fuzzboundary\r\nContent-Disposition: form-data; "
          "name=\"n\"; filename*=iso-8859-1'en'%E9\r\n\r\nx\r\n--fuzzboundary--\r\n")


# --- archive: the archive bytes -------------------------------------------------------------

def tar_bytes(entries, fmt=tarfile.PAX_FORMAT, compress=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for e in entries:
            info = tarfile.TarInfo(e["name"])
            info.mtime = MTIME
            info.mode = e.get("mode", 0o644)
            kind = e.get("type", "file")
            data = e.get("data", b"")
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                info.mode = e.get("mode", 0o755)
                tar.addfile(info)
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = e["link"]
                tar.addfile(info)
            elif kind == "hardlink":
                info.type = tarfile.LNKTYPE
                info.linkname = e["link"]
                tar.addfile(info)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    if compress:
        return gzip.compress(raw, mtime=MTIME)
    return raw


def zip_bytes(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for e in entries:
            info = zipfile.ZipInfo(e["name"], date_time=(2023, 11, 14, 22, 13, 20))
            kind = e.get("type", "file")
            if kind == "symlink":
                info.external_attr = (0o120777 << 16)
                z.writestr(info, e["link"])
            elif kind == "dir":
                info.external_attr = (0o40755 << 16) | 0x10
                z.writestr(info, b"")
            else:
                info.external_attr = (e.get("mode", 0o100644) << 16)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, e.get("data", b""))
    return buf.getvalue()


def archive_seeds():
    tree = [
        {"name": "dir/", "type": "dir"},
        {"name": "dir/a.txt", "data": b"hello\n"},
        {"name": "dir/sub/b.bin", "data": bytes(range(64)), "mode": 0o755},
        {"name": "dir/link", "type": "symlink", "link": "a.txt"},
        {"name": "dir/sub/up", "type": "symlink", "link": "../a.txt"},
        {"name": "top.txt", "data": b"top"},
    ]
    write("archive", "tree.tar", tar_bytes(tree + [{"name": "hard", "type": "hardlink",
                                                    "link": "top.txt"}]))
    write("archive", "tree.tar.gz", tar_bytes(tree, compress=True))
    write("archive", "tree.zip", zip_bytes(tree))
    write("archive", "gnu.tar", tar_bytes([{"name": "l" * 120 + "/f", "data": b"long name"},
                                           {"name": "fifo", "type": "fifo"}],
                                          fmt=tarfile.GNU_FORMAT))
    hostile = {
        "dotdot": [{"name": "../../escape.txt", "data": b"x"}],
        "deep_dotdot": [{"name": "a/../../../../../../../../../tmp/rex-fuzz-escape", "data": b"x"}],
        "absolute": [{"name": "/tmp/rex-fuzz-absolute", "data": b"x"}],
        "symlink_out": [{"name": "out", "type": "symlink", "link": "../../outside"}],
        "symlink_absolute": [{"name": "abs", "type": "symlink", "link": "/etc"}],
        "through_symlink": [{"name": "d", "type": "symlink", "link": "."},
                            {"name": "d/file", "data": b"x"}],
        "symlink_then_dir": [{"name": "x", "type": "symlink", "link": "y"},
                             {"name": "x/", "type": "dir"}],
        "file_then_dir": [{"name": "x", "data": b"1"}, {"name": "x/y", "data": b"2"}],
        "hardlink_out": [{"name": "h", "type": "hardlink", "link": "../../etc/passwd"}],
        "hardlink_later": [{"name": "h", "type": "hardlink", "link": "f"},
                           {"name": "f", "data": b"x"}],
        "replace_root": [{"name": ".", "type": "symlink", "link": "x"}],
    }
    for name, entries in hostile.items():
        write("archive", name + ".tar", tar_bytes(entries))
    write("archive", "dotdot.zip", zip_bytes([{"name": "../zip-escape", "data": b"x"}]))
    write("archive", "symlink_out.zip", zip_bytes([{"name": "s", "type": "symlink",
                                                    "link": "../../../x"},
                                                   {"name": "s/f", "data": b"x"}]))
    good = tar_bytes(tree)
    write("archive", "truncated.tar", good[:700])
    write("archive", "not_an_archive", b"just some text, not an archive\n")


# --- terminal_output: a piece-size byte, then terminal output or command text -----------------

def terminal_seeds():
    marker = "REXPS1f"
    seeds = {
        "prompt": (3, f"hello\r\nworld\r\n{marker}:12:0:0;"),
        "prompt_status_jobs": (1, f"\x1b[?2004l\r{marker}:7:127:2;"),
        "continuation": (5, f"{marker}:4;"),
        "rejected": (2, f"bash: syntax error\r\n{marker}!{marker}:3:2:0;"),
        "fake_prompt": (7, f"{marker}:x:0:0; {marker}:1:0 {marker}:99999999999999999999:0:0;"
                           f"{marker}:5:0:1;"),
        "escapes": (4, "\x1b[1;31mred\x1b[0m \x1b]0;title\x07 \x1b]8;;http://x\x1b\\link"
                       "\x1b]8;;\x1b\\ \x1bPdcs\x1b\\ \x1b(B \x1b= progress\r50%\r100%\r\r\n"),
        "utf8": (6, "caf\u00e9 \u2603 \U0001F600 ".encode() + b"\xff\xfe\xc3\x28 \xed\xa0\x80"
                    b" \xf4\x90\x80\x80 \xe2\x82"),
        "command": (0, "echo 'a b' \"c\" $'d\\n' | grep -v x && source venv/bin/activate"),
        "multiline": (8, "for i in 1 2; do\n  echo $i &\ndone\nf() { :; }\nalias l=ls\n"),
        "syntax_error": (9, "bash: eval: line 1: `__rex_ran=1;echo )'\n__rex_go 3;x"),
        "control": (12, "printf '\\x01\\t' \x7f\x01\x02 PS1=x PROMPT_COMMAND= coproc eval . x"),
    }
    for name, (piece, text) in seeds.items():
        if isinstance(text, str):
            text = text.encode()
        write("terminal_output", name, bytes([piece]) + text)
    write("terminal_output", "long_line", bytes([31]) + ("x" * 1500 + "'\\" * 300).encode())


# --- gateway_yaml: a kind byte (0 environment, 1 config, 2 data, 3 --api-key), then the text ----

def gateway_yaml_seeds():
    seeds = {
        "environment": (0, "name: python-data\nprovider: docker\nimage: rex-python:3.11\n"
                           "memory: 2g\ncpus: 1.5\nnetwork: none\nenv: {PYTHONUNBUFFERED: \"1\"}\n"
                           "working_dir: /work\nmounts: [\"/data:/data:ro\"]\nidle_timeout: 300\n"
                           "max_lifetime: 7200\ncollect: [\"out/*.csv\"]\n"),
        "environment_bad": (0, " env:\n  A: 1\n  B: &x yes\nmounts: &m [a, b]\ncollect: *m\n"),
        "config": (1, "listen: \"0.0.0.0:9000\"\nstorage: /var/lib/rex\nmax_storage_bytes: 10g\n"
                      "sweep_interval: 0.5\ntenants:\n  - name: team-a\n    keys: [key-a1, key-a2]\n"
                      "    max_sessions: 5\n    creates_per_minute: 2.5\n  - name: ci\n"
                      "    keys:\n      - 12345\n    max_sessions: ~\n"),
        "config_shared_key": (1, "listen: unix:/run/x.sock\ntenants: [{name: a, keys: [k]}, "
                                 "{name: b, keys: [k]}]\n"),
        "data": (2, "int: 42\nhex: 0x1F\nf: .5e3\ninf: .inf\nq: \"42\"\nlist: [1, two, {a: ~}]\n"
                    "anchor: &a {x: [1,2]}\nref: *a\nmulti: |\n  text\n"),
        "data_self_alias": (2, "a: &x [*x]\n"),
        "api_key": (3, "team-a=k3y"),
        "api_key_padding": (3, "c2VjcmV0=="),
    }
    for name, (kind, text) in seeds.items():
        write("gateway_yaml", name, bytes([kind]) + text.encode())


# --- gateway_request: a method byte (0 GET, 1 POST, 2 DELETE, 3 PATCH, 4 PUT, 5 HEAD), the
# target, header lines, an empty line, the body ------------------------------------------------

def gateway_request_seeds():
    auth = "Authorization: Bearer key-a\n"
    seeds = {
        "create": (1, "/api/sessions", auth + "Idempotency-Key: k1\n",
                   json.dumps({"provider": "local", "environment": "local", "timeout": 30,
                               "metadata": {"a": "b"}, "env": {"X": "1"}})),
        "create_unknown_field": (1, "/api/sessions", auth, '{"image": "x"}'),
        "create_bad_json": (1, "/api/sessions", "X-API-Key: key-b\n", '{"provider": '),
        "list": (0, "/api/sessions?state=ready&limit=5&label=a%3Db&cursor=s1", auth, ""),
        "get": (0, "/api/sessions/s0123456789abcdef", auth, ""),
        "delete": (2, "/api/sessions/s0123456789abcdef?sandbox_id=x", auth, ""),
        "patch": (3, "/api/sessions/s1", auth, '{"metadata": {"a": null}}'),
        "keepalive": (1, "/api/sessions/s1/keepalive", auth, '{"timeout": 1e400}'),
        "execute": (1, "/api/e2b/execute", auth,
                    '{"session_id": "s1", "code": "1+1", "language": "python"}'),
        "files_multipart": (1, "/api/e2b/files",
                            auth + "Content-Type: multipart/form-data; boundary=b\n",
                            "--b\r\nContent-Disposition: form-data; name=\"session_id\"\r\n\r\n"
                            "s1\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; "
                            "filename=\"x\"\r\n\r\ndata\r\n--b--\r\n"),
        "files_base64": (1, "/api/sessions/s1/files", auth,
                         '{"path": "../x", "content": "aGk=", "encoding": "base64"}'),
        "files_read": (0, "/api/e2b/files/s1?path=%2Fetc", auth, ""),
        "artifacts": (1, "/api/sessions/s1/artifacts", auth, '{"paths": ["a", 1]}'),
        "artifact": (0, "/api/sessions/s1/artifacts/x.tar", auth, ""),
        "events": (0, "/api/events", auth + "Last-Event-ID: 12\n", ""),
        "swerex": (1, "/api/sessions/s1/swerex/run_in_session", auth, '{"command": "ls"}'),
        "no_key": (0, "/api/environments", "", ""),
        "wrong_key": (0, "/api/agents/x", "Authorization: Bearer nope\n", ""),
        "metrics": (0, "/metrics", "", ""),
        "e2b_create": (1, "/v2/sandboxes", "X-API-KEY: key-a\n",
                       json.dumps({"templateID": "base", "metadata": {"a": "b"},
                                   "envVars": {"X": "1"}, "timeout": 300})),
        "e2b_list": (0, "/v2/sandboxes?metadata=a%3Db&state=running%2Cpaused&limit=2"
                        "&nextToken=s1", "X-API-KEY: key-a\n", ""),
        "e2b_timeout": (1, "/sandboxes/s1/timeout", "X-API-KEY: key-a\n", '{"timeout": "x"}'),
        "e2b_connect": (1, "/v2/sandboxes/s1/connect", "X-API-KEY: key-b\n", '{"timeout": 1}'),
        "e2b_kill": (2, "/sandboxes/s1", "X-API-KEY: nope\n", ""),
        "envd_stat": (1, "/filesystem.Filesystem/Stat",
                      "E2b-Sandbox-Id: s1\nX-Access-Token: t\nContent-Type: application/json\n",
                      '{"path": "/tmp"}'),
        "envd_files_read": (0, "/files?path=%2Fetc%2Fhostname", "E2b-Sandbox-Id: s1\n", ""),
        "envd_files_write": (1, "/files?path=a.txt",
                             "E2b-Sandbox-Id: s1\nX-Access-Token: t\n"
                             "Content-Type: multipart/form-data; boundary=b\n",
                             "--b\r\nContent-Disposition: form-data; name=\"file\"; "
                             "filename=\"a.txt\"\r\n\r\nhi\r\n--b--\r\n"),
        "envd_process": (1, "/process.Process/Start",
                         "E2b-Sandbox-Id: s1\nContent-Type: application/connect+json\n",
                         "\x00\x00\x00\x00\x02{}"),
        "envd_process_start": (1, "/process.Process/Start",
                               "E2b-Sandbox-Id: s1\nX-Access-Token: t\nConnect-Timeout-Ms: 5000\n"
                               "Content-Type: application/connect+json\n",
                               "\x00\x00\x00\x00\x4e" + json.dumps(
                                   {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "ls"],
                                                "envs": {"A": "1"}}})[:0x4e]),
        "envd_envelope_too_long": (1, "/process.Process/Start",
                                   "Content-Type: application/connect+json\n",
                                   "\x00\x7f\xff\xff\xff{}"),
        "envd_envelope_compressed": (1, "/process.Process/Start",
                                     "Content-Type: application/connect+json\n",
                                     "\x01\x00\x00\x00\x02{}"),
        "envd_process_unary": (1, "/process.Process/List",
                               "E2b-Sandbox-Id: s1\nContent-Type: application/json\n", "{}"),
        "envd_process_signal": (1, "/process.Process/SendSignal",
                                "E2b-Sandbox-Id: s1\nX-Access-Token: t\n"
                                "Content-Type: application/json\n",
                                json.dumps({"process": {"pid": 12}, "signal": "SIGNAL_SIGKILL"})),
        "envd_process_input_bad_base64": (1, "/process.Process/SendInput",
                                          "E2b-Sandbox-Id: s1\nX-Access-Token: t\n"
                                          "Content-Type: application/json\n",
                                          json.dumps({"process": {"tag": "x"},
                                                      "input": {"stdin": "%%%"}})),
        "envd_process_connect": (1, "/process.Process/Connect",
                                 "E2b-Sandbox-Id: s1\nContent-Type: application/connect+json\n"
                                 "Keepalive-Ping-Interval: 5\n",
                                 "\x00\x00\x00\x00\x17" + json.dumps({"process": {"pid": 3}})),
        "console_page": (0, "/ui/", "", ""),
        "console_file_revalidated": (0, "/ui/main.js", 'If-None-Match: "x"\n', ""),
        "console_root": (0, "/", "", ""),
        "console_missing": (5, "/ui/vendor/none.mjs", "", ""),
    }
    for name, (method, target, headers, body) in seeds.items():
        write("gateway_request", name,
              bytes([method]) + f"{target}\n{headers}\n{body}".encode())


# --- connect_envelope: a byte choosing the pieces' sizes, then a Connect stream -----------------

def envelope(flags, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return bytes([flags]) + len(payload).to_bytes(4, "big") + payload


def connect_envelope_seeds():
    start = envelope(0, json.dumps({"event": {"start": {"pid": 42}}}))
    data = envelope(0, json.dumps({"event": {"data": {"stderr": "bGlzdGVuaW5nIG9uIGh0dHA6"
                                                                 "Ly8xMjcuMC4wLjE6NDM2Mzcg"}}}))
    end = envelope(0, json.dumps({"event": {"end": {"exitCode": 0, "exited": True,
                                                    "status": "exit status 0"}}}))
    write("connect_envelope", "process_stream",
          b"\x03" + start + data + end + envelope(2, "{}"))
    write("connect_envelope", "error_end",
          b"\x00" + envelope(2, json.dumps({"error": {"code": "not_found", "message": "x"}})))
    write("connect_envelope", "truncated", b"\x05" + start[:7])
    write("connect_envelope", "over_limit", b"\x01" + b"\x00\x00\x01\x00\x00" + b"x" * 16)
    write("connect_envelope", "empty_payloads", b"\x02" + envelope(0, "") + envelope(1, ""))


# --- kubeconfig: a kind byte (0 kubeconfig, 1 an exec plugin's ExecCredential), then the text --

def kubeconfig_seeds():
    full = """apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0E=
    tls-server-name: kubernetes
users:
- name: admin
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-token
      args: [--cluster, dev]
      env: [{name: A, value: "1"}]
      interactiveMode: Never
      provideClusterInfo: true
contexts:
- name: dev
  context: {cluster: dev, user: admin, namespace: sandboxes}
- name: exec
  context: {cluster: dev, user: plugin}
"""
    seeds = {
        "full": (0, full),
        "json": (0, json.dumps({"current-context": "a", "clusters": [
            {"name": "c", "cluster": {"server": "https://s", "insecure-skip-tls-verify": True}}],
            "contexts": [{"name": "a", "context": {"cluster": "c"}}]})),
        "missing_user": (0, "current-context: a\nclusters: [{name: c, cluster: {server: x}}]\n"
                            "contexts: [{name: a, context: {cluster: c, user: u}}]\n"),
        "aliases": (0, "current-context: &c a\nclusters: &l [{name: *c, cluster: {server: x}}]\n"
                       "contexts: [{name: a, context: {cluster: a}}]\nusers: *l\n"),
        "credential": (1, json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                                      "kind": "ExecCredential",
                                      "status": {"token": "t",
                                                 "expirationTimestamp": "2026-11-25T10:00:00Z"}})),
        "credential_cert": (1, json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                                           "kind": "ExecCredential",
                                           "status": {"clientCertificateData": "C",
                                                      "clientKeyData": "K",
                                                      "expirationTimestamp":
                                                          "2026-11-25T10:00:00.25-07:00"}})),
    }
    for name, (kind, text) in seeds.items():
        write("kubeconfig", name, bytes([kind]) + text.encode())


# --- aws_config: the AWS CLI's INI files (credentials and config) ----------------------------

def aws_config_seeds():
    seeds = {
        "credentials": "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = secret\n"
                       "aws_session_token = token\n\n[work]\naws_access_key_id=W\n"
                       "aws_secret_access_key=w\n",
        "config": "# config\n[default]\nregion = eu-west-1\n[profile ci]\nregion = us-east-2\n"
                  "s3 =\n  max_concurrent_requests = 2\n; done\n",
        "role": "[default]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = base\n",
    }
    for name, text in seeds.items():
        write("aws_config", name, text)


# --- modal_toml: Modal's settings file (~/.modal.toml) -------------------------------------

def modal_toml_seeds():
    seeds = {
        "token": '[default]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\nactive = true\n',
        "profiles": "# profiles\n[\"other team\"]\ntoken_id = 'ak-2'\r\n"
                    'server_url = "http://127.0.0.1:1\\u0041"\nlogs_timeout = 10\n'
                    "max_throttle_wait = 1.5e1\n[b]\nactive = false\nx = 0x1F\ny = -inf\n",
        "two_active": '[a]\nactive = true\n[b]\nactive = true\nz = "\\U0001F600\\t"\n',
    }
    for name, text in seeds.items():
        write("modal_toml", name, text)


# --- deployment_config: a kind byte (0 a deployment config, 1 a gateway provider's defaults of
# the backend the next byte picks), then the JSON text ------------------------------------------

def deployment_config_seeds():
    configs = {
        "docker": {"type": "docker", "image": "python:3.11", "pull": "never", "port": 8000,
                   "docker_args": ["--memory=1g", "-e", "CI=1", "--platform", "linux/amd64"],
                   "startup_timeout": 60.5, "env": {"A": "1"}, "remove_container": False},
        "docker_swerex": {"image": "python:3.11", "python_standalone_dir": None,
                          "exec_shell": ["/bin/sh", "-c"]},
        "docker_bad_pull": {"type": "docker", "image": "x", "pull": "sometimes"},
        "local": {"type": "local", "working_dir": "/tmp/w", "env": {"K": "V"}},
        "remote": {"type": "remote", "host": "http://127.0.0.1", "port": 8000, "auth_token": "t",
                   "timeout": 0.5},
        "dummy": {"type": "dummy", "run_in_session_outputs": [{"output": "hi", "exit_code": 0}]},
        "gateway": {"type": "gateway", "url": "http://127.0.0.1:8000", "environment": "python"},
        "e2b": {"type": "e2b", "template": "base", "timeout": 300, "metadata": {"a": "b"}},
        "kubernetes": {"type": "kubernetes", "image": "i", "namespace": "n",
                       "resources": {"limits": {"cpu": "1"}}, "tolerations": [{"key": "k"}],
                       "node_selector": {"disk": "ssd"}, "connect": "proxy"},
        "fargate": {"type": "fargate", "image": "i", "cluster_name": "c", "port": 9000,
                    "connect": "private_ip", "log_group": None},
        "daytona": {"type": "daytona", "snapshot": "s", "container_timeout": 120, "public": True},
        "modal": {"type": "modal", "image": "i", "app_name": "a", "deployment_timeout": 600,
                  "sandbox_definition": {"workdir": "/src"}},
        "unknown_type": {"type": "nowhere"},
        "unknown_field": {"type": "local", "working_dri": "/"},
    }
    for name, config in configs.items():
        write("deployment_config", name, b"\x00" + json.dumps(config).encode())
    providers = {
        "kubernetes": (6, {"startup_timeout": 30, "runtime_class_name": "gvisor"}),
        "fargate_cluster": (7, {"cluster": "c", "port": 8880}),
        "e2b": (5, {"api_key": "k", "template_server_path": "/opt/rex-server"}),
    }
    for name, (backend, fields) in providers.items():
        write("deployment_config", "provider_" + name,
              bytes([1, backend]) + json.dumps(fields).encode())


# --- template_plan: E2B's TemplateBuildStartV2 JSON ----------------------------------------------

def template_plan_seeds():
    h = "0123456789abcdef" * 4
    requests = {
        "steps": {"fromImage": "rex-test-bookworm", "force": False, "steps": [
            {"type": "USER", "args": ["root"], "force": False},
            {"type": "WORKDIR", "args": ["/"], "force": False},
            {"type": "ENV", "args": ["A", "x \"y\" $HOME", "B", ""], "force": False},
            {"type": "COPY", "args": ["app/", "/opt/app/", "user", "0755"], "filesHash": h,
             "force": False},
            {"type": "RUN", "args": ["echo hi && whoami", "user"], "force": False},
            {"type": "USER", "args": ["builder"], "force": False}],
            "startCmd": "serve", "readyCmd": "sleep 1"},
        "template": {"fromTemplate": "base", "steps": [{"type": "RUN", "args": ["true"]}]},
        "empty": {"fromImage": "x"},
        "bad_type": {"steps": [{"type": "ADD", "args": ["a", "b"]}]},
        "bad_env": {"steps": [{"type": "ENV", "args": ["A"]}]},
        "newline": {"steps": [{"type": "WORKDIR", "args": ["/a\nRUN x"]}]},
        "bad_hash": {"steps": [{"type": "COPY", "args": ["a", "/b"], "filesHash": "zz"}]},
    }
    for name, request in requests.items():
        write("template_plan", name, json.dumps(request).encode())


if __name__ == "__main__":
    http_seeds()
    json_seeds()
    multipart_seeds()
    archive_seeds()
    terminal_seeds()
    gateway_yaml_seeds()
    gateway_request_seeds()
    connect_envelope_seeds()
    kubeconfig_seeds()
    aws_config_seeds()
    modal_toml_seeds()
    deployment_config_seeds()
    template_plan_seeds()
