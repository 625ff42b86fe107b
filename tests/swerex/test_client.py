"""SWE-ReX's own RemoteRuntime (swe-rex 1.4.0, unchanged) against rex-server on loopback.

Every public method of the stock client, every `check` mode, interactive programs (python3,
pdb), expect strings, timeouts and interrupts, syntax errors, heredocs, prompt look-alikes,
large and invalid-UTF-8 output, `execute` in all its forms, files and uploads, concurrent
sessions, authentication, the exception class the client raises for each 511 answer, and
rex-server started as `swerex-remote` with SWE-ReX's own start commands.

The executable comes from REX_SERVER. Every test bounds its client calls with asyncio.wait_for
(conftest.run_async); every subprocess wait has a timeout.
"""

import asyncio
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import aiohttp
import pexpect
import pytest
import swerex
from swerex.deployment.remote import RemoteDeployment
from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    DeploymentNotStartedError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
    SwerexException,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    BashAction,
    BashInterruptAction,
    BashObservation,
    CloseBashSessionRequest,
    CloseBashSessionResponse,
    CloseResponse,
    Command,
    CommandResponse,
    CreateBashSessionRequest,
    CreateBashSessionResponse,
    IsAliveResponse,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)
from swerex.runtime.config import RemoteRuntimeConfig
from swerex.runtime.remote import RemoteRuntime

from conftest import (LISTEN_RE, START_TIMEOUT, STOP_TIMEOUT, rex_server_path, run_async,
                      start_rex_server)
from rexserver import children_of  # conftest puts tests/protocol on the path

TOKEN = "swerex-client-suite-token"
HERE = os.path.dirname(os.path.abspath(__file__))


# --- helpers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    """One rex-server for the module; each test uses its own session names."""
    s = start_rex_server(rex_server_path(), TOKEN)
    yield s
    status = s.stop()
    assert status == 0, f"rex-server exited with {status}; output: {s.output()[-3000:]!r}"


@pytest.fixture
def own_server():
    """A rex-server for one test (for calls that affect every session, such as /close)."""
    s = start_rex_server(rex_server_path(), TOKEN)
    yield s
    if s.proc.poll() is None:
        status = s.stop()
        assert status == 0, f"rex-server exited with {status}; output: {s.output()[-3000:]!r}"


def client(server, **kwargs):
    kwargs.setdefault("auth_token", server.token)
    return RemoteRuntime(port=server.port, **kwargs)


def new_name():
    return f"s-{uuid.uuid4().hex[:12]}"


async def open_session(rt, **kwargs):
    name = new_name()
    response = await rt.create_session(CreateBashSessionRequest(session=name, **kwargs))
    assert isinstance(response, CreateBashSessionResponse)
    return name


async def bash(rt, session, command, **kwargs):
    return await rt.run_in_session(BashAction(command=command, session=session, **kwargs))


async def close_quietly(rt, session):
    with contextlib.suppress(SwerexException):
        await rt.close_session(CloseBashSessionRequest(session=session))


@contextlib.contextmanager
def raises_exactly(cls, match=None):
    """Like pytest.raises, but the exception's type must be `cls` itself, not a subclass."""
    with pytest.raises(Exception) as info:
        yield info
    assert type(info.value) is cls, (
        f"expected {cls.__module__}.{cls.__qualname__}, got "
        f"{type(info.value).__module__}.{type(info.value).__qualname__}: {info.value}")
    if match is not None:
        assert re.search(match, str(info.value)), f"{match!r} not in {str(info.value)!r}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_for_path(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        await asyncio.sleep(0.02)


# --- the client's surface ---------------------------------------------------------------------


# Every public method of the pinned client, each exercised below.
PUBLIC_METHODS = {"close", "close_session", "create_session", "execute", "from_config",
                  "is_alive", "read_file", "run_in_session", "upload", "wait_until_alive",
                  "write_file"}


def test_client_surface_is_what_this_suite_covers():
    assert swerex.__version__ == "1.4.0"
    public = {n for n in dir(RemoteRuntime) if not n.startswith("_")}
    assert public == PUBLIC_METHODS
    assert {n for n in dir(AbstractRuntime) if not n.startswith("_")} <= public


def test_is_alive_and_wait_until_alive(server):
    async def go():
        rt = client(server)
        alive = await rt.is_alive()  # the client's own 0.15 s timeout
        assert isinstance(alive, IsAliveResponse)
        assert alive.is_alive is True and alive.message == "" and bool(alive)
        assert (await rt.is_alive(timeout=5.0)).is_alive
        started = time.monotonic()
        assert await rt.wait_until_alive(timeout=5.0) is None
        assert time.monotonic() - started < 2.0

    run_async(go())


def test_is_alive_and_wait_until_alive_without_a_server():
    async def go():
        rt = RemoteRuntime(auth_token=TOKEN, port=free_port())
        alive = await rt.is_alive()
        assert not alive and alive.is_alive is False
        assert "Failed to connect" in alive.message
        with pytest.raises(TimeoutError, match="Runtime did not start within"):
            await rt.wait_until_alive(timeout=0.6)

    run_async(go())


def test_config_forms(server):
    """from_config, RemoteRuntimeConfig.get_runtime, a host without scheme, a port in the host."""
    async def go():
        config = RemoteRuntimeConfig(auth_token=server.token, port=server.port)
        runtimes = [
            RemoteRuntime.from_config(config),
            config.get_runtime(),
            RemoteRuntime(auth_token=server.token, host="127.0.0.1", port=server.port),
            RemoteRuntime(auth_token=server.token, host=f"http://127.0.0.1:{server.port}"),
        ]
        for rt in runtimes:
            assert isinstance(rt, RemoteRuntime)
            assert await rt.is_alive()
            r = await rt.execute(Command(command=["echo", "configured"]))
            assert r.stdout == "configured\n"

    run_async(go())


def test_remote_deployment(own_server):
    """SWE-ReX's RemoteDeployment wraps RemoteRuntime; its stop() is the runtime's close()."""
    async def go():
        d = RemoteDeployment(auth_token=own_server.token, host="http://127.0.0.1",
                             port=own_server.port)
        with pytest.raises(DeploymentNotStartedError):
            d.runtime
        await d.start()
        assert await d.is_alive()
        name = await open_session(d.runtime)
        assert (await bash(d.runtime, name, "echo deployed")).output.strip() == "deployed"
        await d.stop()
        with pytest.raises(DeploymentNotStartedError):
            d.runtime
        with raises_exactly(SessionDoesNotExistError):
            await bash(client(own_server), name, "echo gone")

    run_async(go())


# --- sessions ---------------------------------------------------------------------------------


def test_create_run_close_session(server):
    async def go():
        rt = client(server)
        name = new_name()
        created = await rt.create_session(CreateBashSessionRequest(session=name))
        assert isinstance(created, CreateBashSessionResponse)
        assert created.output == "" and created.session_type == "bash"

        obs = await bash(rt, name, "echo hello")
        assert isinstance(obs, BashObservation)
        assert obs.output == "hello\n"
        assert obs.exit_code == 0 and obs.failure_reason == "" and obs.session_type == "bash"
        assert obs.expect_string != ""

        # State persists between commands: directory, variables, functions.
        await bash(rt, name, "cd /tmp && export REX_X=41 && f() { echo $((REX_X + 1)); }")
        assert (await bash(rt, name, "pwd; f")).output.split() == ["/tmp", "42"]

        closed = await rt.close_session(CloseBashSessionRequest(session=name))
        assert isinstance(closed, CloseBashSessionResponse) and closed.session_type == "bash"
        with raises_exactly(SessionDoesNotExistError):
            await bash(rt, name, "echo after close")
        with raises_exactly(SessionDoesNotExistError):
            await rt.close_session(CloseBashSessionRequest(session=name))

    run_async(go())


def test_startup_source(server, tmp_path):
    rc = tmp_path / "rc.sh"
    rc.write_text("export REX_FROM_RC=yes\necho sourced-the-rc-file\nalias ll='echo alias-works'\n")

    async def go():
        rt = client(server)
        name = new_name()
        created = await rt.create_session(CreateBashSessionRequest(
            session=name, startup_source=[str(rc)], startup_timeout=10.0))
        assert "sourced-the-rc-file" in created.output
        assert (await bash(rt, name, "echo $REX_FROM_RC")).output == "yes\n"
        assert (await bash(rt, name, "ll")).output == "alias-works\n"
        await close_quietly(rt, name)

    run_async(go())


def test_session_exists_and_does_not_exist(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        with raises_exactly(SessionExistsError, match=name):
            await rt.create_session(CreateBashSessionRequest(session=name))
        # The first session is untouched by the refused second one.
        assert (await bash(rt, name, "echo still-mine")).output == "still-mine\n"
        missing = new_name()
        with raises_exactly(SessionDoesNotExistError, match=missing):
            await bash(rt, missing, "echo nobody")
        with raises_exactly(SessionDoesNotExistError):
            await rt.run_in_session(BashInterruptAction(session=missing))
        with raises_exactly(SessionDoesNotExistError):
            await rt.close_session(CloseBashSessionRequest(session=missing))
        await close_quietly(rt, name)

    run_async(go())


def test_close_closes_every_session_and_the_server_keeps_serving(own_server):
    async def go():
        rt = client(own_server)
        names = [await open_session(rt) for _ in range(3)]
        await bash(rt, names[0], "echo busy-before-close")
        closed = await rt.close()
        assert isinstance(closed, CloseResponse)
        for name in names:
            with raises_exactly(SessionDoesNotExistError):
                await bash(rt, name, "echo gone")
        assert await rt.is_alive()
        # The names are free again and the server still runs commands.
        await rt.create_session(CreateBashSessionRequest(session=names[0]))
        assert (await bash(rt, names[0], "echo reborn")).output == "reborn\n"
        assert (await rt.execute(Command(command=["echo", "ok"]))).stdout == "ok\n"

    run_async(go())


def test_sigterm_with_a_command_running_answers_it_and_exits_0(own_server, tmp_path):
    flag = tmp_path / "running"

    async def go():
        rt = client(own_server)
        name = await open_session(rt)
        running = asyncio.create_task(bash(rt, name, f"touch {flag}; sleep 30"))
        await wait_for_path(flag)
        started = time.monotonic()
        status = await asyncio.to_thread(own_server.stop)
        assert status == 0, own_server.output()[-3000:]
        # The command still running is answered with an error before the server exits.
        with raises_exactly(SwerexException, match="closed"):
            await asyncio.wait_for(running, 10)
        assert time.monotonic() - started < 10

    run_async(go())


# --- check modes ------------------------------------------------------------------------------


@pytest.mark.parametrize("check,code,expected", [
    ("raise", 0, 0), ("silent", 0, 0), ("ignore", 0, None),
    ("silent", 3, 3), ("ignore", 3, None), ("silent", 255, 255),
])
def test_check_modes(server, check, code, expected):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        obs = await bash(rt, name, f"echo out-{code}; (exit {code})", check=check,
                         error_msg="unused unless raised")
        assert obs.output == f"out-{code}\n"
        assert obs.exit_code == expected
        # $? of the command is the next command's $? as well.
        assert (await bash(rt, name, "echo $?", check="silent")).output == f"{code}\n"
        await close_quietly(rt, name)

    run_async(go())


@pytest.mark.parametrize("error_msg", ["", "while building the project"])
def test_check_raise_nonzero(server, error_msg):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        with raises_exactly(NonZeroExitCodeError) as info:
            await bash(rt, name, "echo before-failure; (exit 7)", error_msg=error_msg)
        message = str(info.value)
        assert "exit code 7" in message
        assert "before-failure" in message
        if error_msg:
            assert message.startswith(f"{error_msg}: ")
        else:
            assert not message.startswith(":")
        # Default check is "raise".
        with raises_exactly(NonZeroExitCodeError):
            await bash(rt, name, "false")
        assert (await bash(rt, name, "echo recovered")).output == "recovered\n"
        await close_quietly(rt, name)

    run_async(go())


# --- interactive programs ---------------------------------------------------------------------


def test_interactive_python3(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)

        def py(command):
            return bash(rt, name, command, is_interactive_command=True, expect=[">>> "],
                        timeout=20)

        started = await py("python3")
        assert started.expect_string == ">>> " and started.exit_code == 0
        assert "Python 3" in started.output
        assert (await py("x = 6 * 7")).output == ""
        assert (await py("print(x)")).output == "42"
        assert (await py("print('a'); print('b')")).output == "a\nb"
        assert (await py("import sys; sys.version_info[0]")).output == "3"
        quit_ = await bash(rt, name, "quit()", is_interactive_quit=True, timeout=20)
        assert quit_.exit_code == 0
        assert (await bash(rt, name, "echo back in bash $((1 + 1))")).output == \
            "back in bash 2\n"
        await close_quietly(rt, name)

    run_async(go())


PDB_SCRIPT = """\
def add(a, b):
    total = a + b
    return total


result = add(2, 3)
print("result is", result)
"""


def test_pdb(server, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PDB_SCRIPT)

    async def go():
        rt = client(server)
        name = await open_session(rt)

        def pdb(command):
            return bash(rt, name, command, is_interactive_command=True, expect=["(Pdb) "],
                        timeout=20)

        started = await pdb(f"python3 -m pdb {script}")
        assert started.expect_string == "(Pdb) "
        assert "-> def add(a, b):" in started.output
        assert "-> result = add(2, 3)" in (await pdb("next")).output
        stepped = (await pdb("step")).output
        assert "--Call--" in stepped and "add()" in stepped
        assert "-> total = a + b" in (await pdb("next")).output
        assert "-> return total" in (await pdb("next")).output
        assert (await pdb("p total")).output == "5"
        assert (await pdb("p a, b")).output == "(2, 3)"
        finished = (await pdb("continue")).output
        assert "result is 5" in finished
        assert "The program finished and will be restarted" in finished
        quit_ = await bash(rt, name, "quit", is_interactive_quit=True, timeout=20)
        assert quit_.exit_code == 0
        assert (await bash(rt, name, "echo after-pdb")).output == "after-pdb\n"
        await close_quietly(rt, name)

    run_async(go())


def test_expect_strings(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        asked = await bash(rt, name, 'read -r -p "Your name? " who && echo "hello, $who"',
                           is_interactive_command=True, expect=["Your name? ", "never"],
                           timeout=10)
        assert asked.expect_string == "Your name? " and asked.exit_code == 0
        answered = await bash(rt, name, "rex", is_interactive_quit=True, timeout=10)
        assert "hello, rex" in answered.output
        assert (await bash(rt, name, "echo $who")).output == "rex\n"
        # The prompt ends an interactive command too: expect_string is then the prompt marker.
        plain = await bash(rt, name, "echo no-expect-hit", is_interactive_command=True,
                           expect=["will-not-appear"], timeout=10)
        assert "no-expect-hit" in plain.output
        assert plain.expect_string not in ("", "will-not-appear")
        assert (await bash(rt, name, "echo in-step")).output == "in-step\n"
        await close_quietly(rt, name)

    run_async(go())


# --- timeouts and interrupts ------------------------------------------------------------------


def test_timeout_then_interrupt(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        started = time.monotonic()
        with raises_exactly(CommandTimeoutError) as info:
            await bash(rt, name, "echo started; sleep 30", timeout=0.5)
        assert time.monotonic() - started < 10
        assert isinstance(info.value, TimeoutError)
        assert "started" in info.value.extra_info.get("output", "")
        interrupted = await rt.run_in_session(BashInterruptAction(session=name))
        assert isinstance(interrupted, BashObservation) and interrupted.exit_code == 0
        assert (await bash(rt, name, "echo still-alive")).output == "still-alive\n"
        assert (await bash(rt, name, "echo $((2 + 3))")).output == "5\n"
        await close_quietly(rt, name)

    run_async(go())


def test_timeout_in_an_interactive_program_then_interrupt(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)

        def py(command, **kwargs):
            kwargs.setdefault("timeout", 20)
            return bash(rt, name, command, is_interactive_command=True, expect=[">>> "],
                        **kwargs)

        await py("python3")
        with raises_exactly(CommandTimeoutError):
            await py("import time; time.sleep(30)", timeout=0.5)
        back = await rt.run_in_session(BashInterruptAction(session=name, expect=[">>> "]))
        assert back.expect_string == ">>> " and back.exit_code == 0
        assert "KeyboardInterrupt" in back.output
        assert (await py("print('python survived')")).output == "python survived"
        await bash(rt, name, "quit()", is_interactive_quit=True, timeout=20)
        assert (await bash(rt, name, "echo bash survived")).output == "bash survived\n"
        await close_quietly(rt, name)

    run_async(go())


# --- what commands look like ------------------------------------------------------------------


def test_syntax_errors_run_nothing(server, tmp_path):
    marker = tmp_path / "ran"

    async def go():
        rt = client(server)
        name = await open_session(rt)
        for command in [f"touch {marker}; echo 'unterminated",
                        f"touch {marker} && fi",
                        f"touch {marker}\nif then\nfi"]:
            with raises_exactly(BashIncorrectSyntaxError) as info:
                await bash(rt, name, command)
            extra = info.value.extra_info
            assert {"bash_stdout", "bash_stderr"} <= set(extra), extra
            assert "unexpected" in extra["bash_stderr"] or "syntax" in extra["bash_stderr"]
            assert not marker.exists(), f"{command!r} ran despite its syntax error"
        assert (await bash(rt, name, "echo fine")).output == "fine\n"
        await close_quietly(rt, name)

    run_async(go())


def test_heredocs(server, tmp_path):
    target = tmp_path / "heredoc.txt"

    async def go():
        rt = client(server)
        name = await open_session(rt)
        quoted = await bash(rt, name, "cat <<'EOF'\nliteral $HOME\nsecond line\nEOF")
        assert quoted.output == "literal $HOME\nsecond line\n"
        expanded = await bash(
            rt, name, f"X=world\ncat <<EOF > {target}\nhello $X\nEOF\ncat {target}\n"
                      f"wc -l < {target}")
        assert expanded.output.split("\n")[:2] == ["hello world", "1"]
        two = await bash(rt, name, "cat <<A; cat <<B\none\nA\ntwo\nB\necho three")
        assert two.output == "one\ntwo\nthree\n"
        python = await bash(rt, name, "python3 - <<'PY'\nfor i in range(3):\n    print(i * i)\nPY")
        assert python.output == "0\n1\n4\n"
        await close_quietly(rt, name)

    run_async(go())


def test_multi_line_commands(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        cases = [
            ("echo a\necho b\n\necho c", "a\nb\nc\n"),
            ("echo one \\\n  two", "one two\n"),
            ("for i in 1 2 3\ndo\n  echo n$i\ndone", "n1\nn2\nn3\n"),
            ('echo "first\nsecond"', "first\nsecond\n"),
            ("if true; then\n  echo yes\nelse\n  echo no\nfi", "yes\n"),
            ("# only a comment", ""),
            ("", ""),
        ]
        for command, expected in cases:
            obs = await bash(rt, name, command)
            assert (obs.output, obs.exit_code) == (expected, 0), command
        last_fails = await bash(rt, name, "true\nfalse", check="silent")
        assert last_fails.exit_code == 1
        await close_quietly(rt, name)

    run_async(go())


def test_output_that_looks_like_a_prompt(server, tmp_path):
    prompt_file = tmp_path / "prompt.txt"

    async def go():
        rt = client(server)
        a = await open_session(rt)
        b = await open_session(rt)
        cases = [
            "echo SHELLPS1PREFIX",
            "echo UNIQUESTRING29234 EXITCODESTART0EXITCODEEND",
            'printf "%s\\n" "$PS1"',
            'printf "%s\\n" "${PS1@P}"',
            'printf "%s" "${PS1@P}"',
            'printf "%s\\n%s\\n" "${PS1@P}" "${PS1@P}"',
            "set",
            "env",
        ]
        for i, command in enumerate(cases):
            obs = await bash(rt, a, f"{command}; echo after-{i}")
            assert obs.exit_code == 0
            assert obs.output.endswith(f"after-{i}\n"), (command, obs.output[-500:])
        # Back to back, so that what one command left behind cannot pass for the next one's end.
        for i in range(15):
            for command in ['printf "%s\\n" "${PS1@P}"', 'printf "%s" "${PS1@P}"', "echo x"]:
                obs = await bash(rt, a, f"{command}; echo round-{i}")
                assert obs.output.endswith(f"round-{i}\n"), (i, command, obs.output[-500:])
        # Another session's prompt, printed verbatim.
        await bash(rt, a, f'printf "%s" "${{PS1@P}}" > {prompt_file}')
        obs = await bash(rt, b, f"cat {prompt_file}; echo; echo after-other")
        assert obs.output.endswith("after-other\n")
        assert obs.output.startswith(prompt_file.read_text())
        assert (await bash(rt, b, "echo $((3 * 3))")).output == "9\n"
        await close_quietly(rt, a)
        await close_quietly(rt, b)

    run_async(go())


def test_large_output(server):
    count = 600_000  # about 4 MB

    async def go():
        rt = client(server)
        name = await open_session(rt)
        obs = await bash(rt, name, f"seq 1 {count}", timeout=60)
        assert len(obs.output) > 3_000_000
        assert obs.output == "".join(f"{i}\n" for i in range(1, count + 1))
        assert (await bash(rt, name, "echo after-large")).output == "after-large\n"
        await close_quietly(rt, name)

    run_async(go())


def test_invalid_utf8_and_terminal_sequences(server):
    async def go():
        rt = client(server)
        name = await open_session(rt)
        obs = await bash(rt, name, r"printf 'ok \xff\xfe end\n'")
        assert obs.output == "ok \\xff\\xfe end\n"
        obs = await bash(rt, name, r"printf 'cut \xe2\x82\n'")
        assert obs.output == "cut \\xe2\\x82\n"
        obs = await bash(rt, name, "printf 'caf\\xc3\\xa9 \\xe2\\x82\\xac\\n'")
        assert obs.output == "café €\n"
        obs = await bash(rt, name, r"printf '\033[1;31mred\033[0m plain\r\n'")
        assert obs.output == "red plain\n"
        r = await rt.execute(Command(command=r"printf 'a\377b'", shell=True))
        assert r.stdout == "a\\xffb"
        await close_quietly(rt, name)

    run_async(go())


# --- execute ----------------------------------------------------------------------------------


def test_execute_list_command(server):
    async def go():
        rt = client(server)
        r = await rt.execute(Command(command=["echo", "two words", "it's", "$HOME"]))
        assert isinstance(r, CommandResponse)
        assert (r.stdout, r.stderr, r.exit_code) == ("two words it's $HOME\n", "", 0)
        r = await rt.execute(Command(command=["sh", "-c", "echo to-err >&2; exit 4"]))
        assert (r.stdout, r.stderr, r.exit_code) == ("", "to-err\n", 4)
        # stdin is /dev/null: cat ends at once.
        r = await rt.execute(Command(command=["cat"], timeout=10))
        assert (r.stdout, r.exit_code) == ("", 0)

    run_async(go())


def test_execute_shell_string(server):
    async def go():
        rt = client(server)
        r = await rt.execute(Command(command="echo $((6 * 7)) && echo oops >&2; exit 3",
                                     shell=True))
        assert (r.stdout, r.stderr, r.exit_code) == ("42\n", "oops\n", 3)

    run_async(go())


def test_execute_check(server):
    async def go():
        rt = client(server)
        ok = await rt.execute(Command(command=["true"], check=True))
        assert ok.exit_code == 0
        with raises_exactly(NonZeroExitCodeError) as info:
            await rt.execute(Command(command="echo partial; exit 9", shell=True, check=True,
                                     error_msg="while testing execute"))
        message = str(info.value)
        assert message.startswith("while testing execute: ")
        assert "exit code 9" in message and "partial" in message

    run_async(go())


def test_execute_env_replaces_the_environment(server):
    async def go():
        rt = client(server)
        r = await rt.execute(Command(command=["/usr/bin/env"], env={"ONLY_THIS": "1"}))
        assert r.stdout == "ONLY_THIS=1\n"
        r = await rt.execute(Command(command=["/usr/bin/env"], env={}))
        assert r.stdout == ""
        r = await rt.execute(Command(command='echo "[$HOME][$REX_VAR]"', shell=True,
                                     env={"REX_VAR": "v"}))
        assert r.stdout == "[][v]\n"
        # Without env, the server's environment is inherited.
        r = await rt.execute(Command(command=["/usr/bin/env"]))
        assert "PATH=" in r.stdout

    run_async(go())


def test_execute_cwd(server, tmp_path):
    (tmp_path / "marker-file").write_text("x")

    async def go():
        rt = client(server)
        r = await rt.execute(Command(command=["pwd"], cwd=str(tmp_path)))
        assert r.stdout == os.path.realpath(tmp_path) + "\n"
        r = await rt.execute(Command(command="ls", shell=True, cwd=str(tmp_path)))
        assert r.stdout == "marker-file\n"

    run_async(go())


def test_execute_merge_output_streams(server):
    async def go():
        rt = client(server)
        command = "echo out; echo err >&2; echo out2"
        merged = await rt.execute(Command(command=command, shell=True,
                                          merge_output_streams=True))
        assert (merged.stdout, merged.stderr) == ("out\nerr\nout2\n", "")
        apart = await rt.execute(Command(command=command, shell=True))
        assert (apart.stdout, apart.stderr) == ("out\nout2\n", "err\n")

    run_async(go())


def test_execute_timeout(server):
    async def go():
        rt = client(server)
        for command, shell in [(["sleep", "30"], False), ("sleep 30 & sleep 31; wait", True)]:
            started = time.monotonic()
            with raises_exactly(CommandTimeoutError):
                await rt.execute(Command(command=command, shell=shell, timeout=0.5))
            assert time.monotonic() - started < 10
        r = await rt.execute(Command(command=["sleep", "0.1"], timeout=10))
        assert r.exit_code == 0

    run_async(go())


# --- files ------------------------------------------------------------------------------------


def test_write_file_creates_parents_and_read_file_reads_it(server, tmp_path):
    path = tmp_path / "new" / "deeper" / "file.txt"
    content = "héllo wörld\n€ line 2\n"

    async def go():
        rt = client(server)
        written = await rt.write_file(WriteFileRequest(content=content, path=str(path)))
        assert isinstance(written, WriteFileResponse)
        assert path.read_bytes() == content.encode()
        read = await rt.read_file(ReadFileRequest(path=str(path)))
        assert isinstance(read, ReadFileResponse) and read.content == content
        await rt.write_file(WriteFileRequest(content="short", path=str(path)))
        assert (await rt.read_file(ReadFileRequest(path=str(path)))).content == "short"
        assert path.read_text() == "short"

    run_async(go())


def test_read_file_encoding_and_errors(server, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9 na\xefve\n")

    async def go():
        rt = client(server)

        async def read(**kwargs):
            return (await rt.read_file(ReadFileRequest(path=str(path), **kwargs))).content

        assert await read(encoding="latin-1") == "café naïve\n"
        assert await read(encoding="utf-8", errors="replace") == "caf\ufffd na\ufffdve\n"
        assert await read(errors="ignore") == "caf nave\n"
        assert await read(errors="backslashreplace") == "caf\\xe9 na\\xefve\n"
        assert await read(encoding="ascii", errors="replace") == "caf\ufffd na\ufffdve\n"
        with pytest.raises(ValueError, match="can't decode"):
            await read(encoding="utf-8", errors="strict")
        with pytest.raises(ValueError):
            await read()
        # As Python's codecs (and so SWE-ReX's server) answer an unknown name.
        with pytest.raises(LookupError, match="unknown encoding: klingon"):
            await read(encoding="klingon")
        with pytest.raises(LookupError, match="unknown error handler name 'bogus'"):
            await read(errors="bogus")

    run_async(go())


def test_read_file_missing(server, tmp_path):
    missing = tmp_path / "does" / "not" / "exist.txt"

    async def go():
        rt = client(server)
        with raises_exactly(FileNotFoundError) as info:
            await rt.read_file(ReadFileRequest(path=str(missing)))
        assert str(missing) in str(info.value)

    run_async(go())


def test_upload_a_file(server, tmp_path):
    source = tmp_path / "source.bin"
    data = bytes(range(256)) * 1000
    source.write_bytes(data)
    target = tmp_path / "remote" / "a" / "b" / "copy.bin"

    async def go():
        rt = client(server)
        response = await rt.upload(UploadRequest(source_path=str(source),
                                                 target_path=str(target)))
        assert isinstance(response, UploadResponse)
        assert target.read_bytes() == data
        # An upload overwrites.
        source.write_bytes(b"second version")
        await rt.upload(UploadRequest(source_path=str(source), target_path=str(target)))
        assert target.read_bytes() == b"second version"
        read = await rt.read_file(ReadFileRequest(path=str(target)))
        assert read.content == "second version"

    run_async(go())


def test_upload_a_directory(server, tmp_path):
    source = tmp_path / "tree"
    files = {
        "top.txt": b"top level\n",
        "sub/inner.bin": bytes(range(256)) * 50,
        "sub/deeper/leaf.txt": "ünïcode leaf\n".encode(),
        "with space/file name.txt": b"spaces\n",
    }
    for rel, content in files.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_bytes(content)
    (source / "empty").mkdir()
    target = tmp_path / "remote-dir" / "nested"

    async def go():
        rt = client(server)
        response = await rt.upload(UploadRequest(source_path=str(source),
                                                 target_path=str(target)))
        assert isinstance(response, UploadResponse)
        uploaded = {str(p.relative_to(target)): p.read_bytes()
                    for p in target.rglob("*") if p.is_file()}
        assert uploaded == files
        assert (target / "empty").is_dir()
        # The client itself refuses a source that does not exist.
        with pytest.raises(ValueError, match="not a file or directory"):
            await rt.upload(UploadRequest(source_path=str(tmp_path / "nothing"),
                                          target_path=str(target)))

    run_async(go())


# --- concurrency ------------------------------------------------------------------------------


def test_sessions_run_concurrently(server):
    async def go():
        rt = client(server)
        names = [await open_session(rt) for _ in range(4)]
        started = time.monotonic()
        results = await asyncio.gather(*[
            bash(rt, name, f"sleep 1.5; echo done-{i}", timeout=30)
            for i, name in enumerate(names)])
        elapsed = time.monotonic() - started
        assert [r.output for r in results] == [f"done-{i}\n" for i in range(4)]
        assert elapsed < 4.0, f"4 sessions of 1.5 s took {elapsed:.2f} s: not concurrent"
        await asyncio.gather(*[close_quietly(rt, name) for name in names])

    run_async(go())


def test_a_long_command_does_not_delay_other_sessions(server, tmp_path):
    flag = tmp_path / "long-started"
    probe = tmp_path / "probe.txt"
    probe.write_text("probe")

    async def go():
        rt = client(server)
        slow = await open_session(rt)
        quick = await open_session(rt)
        long_task = asyncio.create_task(
            bash(rt, slow, f"touch {flag}; sleep 4; echo long-done", timeout=30))
        await wait_for_path(flag)
        started = time.monotonic()
        for i in range(5):
            assert (await bash(rt, quick, f"echo quick-{i}")).output == f"quick-{i}\n"
        assert (await rt.is_alive(timeout=2.0)).is_alive
        assert (await rt.execute(Command(command=["echo", "exec"]))).stdout == "exec\n"
        assert (await rt.read_file(ReadFileRequest(path=str(probe)))).content == "probe"
        elapsed = time.monotonic() - started
        assert not long_task.done()
        assert elapsed < 2.5, f"the other session's work took {elapsed:.2f} s"
        assert (await long_task).output == "long-done\n"
        await close_quietly(rt, slow)
        await close_quietly(rt, quick)

    run_async(go())


# --- authentication ---------------------------------------------------------------------------


def test_auth(server, tmp_path):
    marker = tmp_path / "must-not-exist"

    async def go():
        wrong = client(server, auth_token="not-the-token")
        alive = await wrong.is_alive()
        assert not alive
        assert "401" in alive.message and "Invalid API Key" in alive.message
        with pytest.raises(aiohttp.ClientResponseError) as info:
            await wrong.execute(Command(command=["touch", str(marker)]))
        assert info.value.status == 401
        with pytest.raises(aiohttp.ClientResponseError) as info:
            await wrong.create_session(CreateBashSessionRequest(session=new_name()))
        assert info.value.status == 401
        source = tmp_path / "upload-me"
        source.write_text("x")
        with pytest.raises(aiohttp.ClientResponseError) as info:
            await wrong.upload(UploadRequest(source_path=str(source),
                                             target_path=str(marker)))
        assert info.value.status == 401
        assert not marker.exists()

        anonymous = client(server, auth_token="")  # sends no X-API-Key header
        alive = await anonymous.is_alive()
        assert not alive and "403" in alive.message and "Not authenticated" in alive.message
        with pytest.raises(aiohttp.ClientResponseError) as info:
            await anonymous.write_file(WriteFileRequest(content="x", path=str(marker)))
        assert info.value.status == 403
        assert not marker.exists()

        right = client(server)
        assert await right.is_alive()
        await right.execute(Command(command=["touch", str(marker)]))
        assert marker.exists()

    run_async(go())


# --- exception transfer: the class the client raises for each 511 answer --------------------


async def _timeout_in_session(rt, s, tmp):
    await bash(rt, s, "sleep 30", timeout=0.3)


async def _timeout_in_execute(rt, s, tmp):
    await rt.execute(Command(command=["sleep", "30"], timeout=0.3))


async def _nonzero_in_session(rt, s, tmp):
    await bash(rt, s, "(exit 3)")


async def _nonzero_in_execute(rt, s, tmp):
    await rt.execute(Command(command=["false"], check=True))


async def _syntax_error(rt, s, tmp):
    await bash(rt, s, "fi")


async def _session_exists(rt, s, tmp):
    await rt.create_session(CreateBashSessionRequest(session=s))


async def _session_missing(rt, s, tmp):
    await bash(rt, s + "-missing", "true")


async def _startup_timeout(rt, s, tmp):
    rc = tmp / "slow-rc.sh"
    rc.write_text("sleep 10\n")
    await rt.create_session(CreateBashSessionRequest(session=s + "-slow",
                                                     startup_source=[str(rc)],
                                                     startup_timeout=0.3))


async def _file_missing(rt, s, tmp):
    await rt.read_file(ReadFileRequest(path=str(tmp / "missing")))


async def _read_a_directory(rt, s, tmp):
    await rt.read_file(ReadFileRequest(path=str(tmp)))


async def _read_below_a_file(rt, s, tmp):
    (tmp / "plain").write_text("x")
    await rt.read_file(ReadFileRequest(path=str(tmp / "plain" / "child")))


async def _nul_in_argv(rt, s, tmp):
    await rt.execute(Command(command=["echo", "a\0b"]))


async def _session_busy(rt, s, tmp):
    with raises_exactly(CommandTimeoutError):
        await bash(rt, s, "sleep 30", timeout=0.3)
    await bash(rt, s, "echo while-busy")


async def _shell_exited(rt, s, tmp):
    await bash(rt, s, "exit 5")


TRANSFERS = {
    "timeout-in-session": (_timeout_in_session, CommandTimeoutError),
    "timeout-in-execute": (_timeout_in_execute, CommandTimeoutError),
    "nonzero-in-session": (_nonzero_in_session, NonZeroExitCodeError),
    "nonzero-in-execute": (_nonzero_in_execute, NonZeroExitCodeError),
    "syntax-error": (_syntax_error, BashIncorrectSyntaxError),
    "session-exists": (_session_exists, SessionExistsError),
    "session-missing": (_session_missing, SessionDoesNotExistError),
    "startup-timeout": (_startup_timeout, pexpect.exceptions.TIMEOUT),
    "file-missing": (_file_missing, FileNotFoundError),
    "read-a-directory": (_read_a_directory, IsADirectoryError),
    "read-below-a-file": (_read_below_a_file, NotADirectoryError),
    "nul-in-argv": (_nul_in_argv, ValueError),
    # rex's own errors travel as SwerexException, the class every stock client knows.
    "session-busy": (_session_busy, SwerexException),
    "shell-exited": (_shell_exited, SwerexException),
}


@pytest.mark.parametrize("case", list(TRANSFERS))
def test_exception_transfer(server, tmp_path, case):
    provoke, expected = TRANSFERS[case]

    async def go():
        rt = client(server)
        name = await open_session(rt)
        with raises_exactly(expected):
            await provoke(rt, name, tmp_path)
        # The server and the other sessions are unaffected.
        other = await open_session(rt)
        assert (await bash(rt, other, "echo unaffected")).output == "unaffected\n"
        await close_quietly(rt, other)
        await close_quietly(rt, name)

    run_async(go())


# --- started as swerex-remote -----------------------------------------------------------------


def swerex_remote_dir(tmp_path, where):
    """A directory holding an executable named swerex-remote that is this rex-server: the
    build's own symlink beside rex-server, or a symlink or a copy made in `tmp_path`."""
    binary = rex_server_path()
    if where == "build-symlink":
        return os.path.dirname(binary)
    made = tmp_path / where
    made.mkdir()
    if where == "temp-symlink":
        os.symlink(binary, made / "swerex-remote")
    else:
        assert where == "temp-copy"
        shutil.copy2(binary, made / "swerex-remote")
    return str(made)


def test_build_makes_swerex_remote_beside_rex_server():
    binary = rex_server_path()
    alias = os.path.join(os.path.dirname(binary), "swerex-remote")
    assert os.path.islink(alias)
    assert os.path.realpath(alias) == os.path.realpath(binary)
    version = subprocess.run([alias, "--version"], capture_output=True, text=True, timeout=10)
    assert version.returncode == 0, version.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n", version.stdout), version.stdout
    combined = subprocess.run([alias, "--version", "--port", "1"], capture_output=True,
                              text=True, timeout=10)
    assert combined.returncode != 0


class ShellStartedServer:
    """`/bin/sh -c COMMAND` whose command starts swerex-remote; reads the address it prints."""

    def __init__(self, command, path_dir):
        env = dict(os.environ, PATH=path_dir + os.pathsep + os.environ.get("PATH", ""))
        self.sh = subprocess.Popen(["/bin/sh", "-c", command], env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        self.lines = []
        found = queue.Queue()

        def drain():
            for raw in iter(self.sh.stdout.readline, b""):
                line = raw.decode("utf-8", "replace")
                self.lines.append(line)
                m = LISTEN_RE.search(line)
                if m:
                    found.put(m.group(1))
            found.put(None)

        self.reader = threading.Thread(target=drain, daemon=True)
        self.reader.start()
        try:
            self.url = found.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.url = None
        if self.url is None:
            self.kill()
            raise AssertionError(f"{command!r} did not start a server: {''.join(self.lines)!r}")
        self.port = int(self.url.rsplit(":", 1)[1])

    def server_pid(self):
        pids = list(children_of(self.sh.pid))
        assert len(pids) == 1, f"expected one child of sh, found {pids}"
        return pids[0]

    def kill(self):
        if self.sh.poll() is None:
            os.killpg(self.sh.pid, signal.SIGKILL)
            self.sh.wait(timeout=STOP_TIMEOUT)
        self.reader.join(timeout=5)


def listens_on_all_interfaces(port):
    """Whether some socket listens on 0.0.0.0:`port` (from /proc/net/tcp)."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return any(r[1] == f"00000000:{port:04X}" and r[3] == "0A" for r in rows)


FALLBACK_EXIT = 97  # the fallback SWE-ReX would run (pip-installing swe-rex) must never run


@pytest.mark.parametrize("where", ["build-symlink", "temp-symlink", "temp-copy"])
def test_started_as_swerex_remote_with_port_flag(tmp_path, where):
    """Modal's and Daytona's form: `swerex-remote --port P --auth-token T || <fallback>`."""
    path_dir = swerex_remote_dir(tmp_path, where)
    token = uuid.uuid4().hex
    command = f"swerex-remote --port 0 --auth-token {token} || exit {FALLBACK_EXIT}"
    started = ShellStartedServer(command, path_dir)
    try:
        # swerex-remote's default --host is 0.0.0.0 (the printed URL names a reachable address).
        assert listens_on_all_interfaces(started.port)
        pid = started.server_pid()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert argv[0] == b"swerex-remote"
        exe = os.readlink(f"/proc/{pid}/exe")
        if where == "temp-copy":
            assert exe == os.path.join(path_dir, "swerex-remote")
        else:
            assert exe == os.path.realpath(rex_server_path())

        async def go():
            rt = RemoteRuntime(auth_token=token, port=started.port)
            await rt.wait_until_alive(timeout=10.0)
            name = await open_session(rt)
            assert (await bash(rt, name, "echo via swerex-remote")).output == \
                "via swerex-remote\n"
            await rt.close_session(CloseBashSessionRequest(session=name))
            assert (await rt.execute(Command(command=["echo", "x"]))).stdout == "x\n"
            wrong = RemoteRuntime(auth_token=token + "x", port=started.port)
            assert not await wrong.is_alive()

        run_async(go())
        os.kill(pid, signal.SIGTERM)
        status = started.sh.wait(timeout=STOP_TIMEOUT)
        assert status == 0, f"sh exited {status}; output: {''.join(started.lines)!r}"
    finally:
        started.kill()


def namespaces_work():
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    try:
        probe = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"],
                               capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def test_started_with_docker_deployments_exact_command(tmp_path):
    """DockerDeployment's own start command, port 8000 and all, in a private network namespace.

    swerex_remote_probe.py builds the command with DockerDeployment._get_swerex_start_cmd
    (fallback replaced), starts it, drives it with RemoteRuntime on port 8000 as the deployment
    does, and stops the server with SIGTERM.
    """
    if not namespaces_work():
        pytest.skip("needs unshare -rn and ip (a private network namespace for port 8000)")
    token = uuid.uuid4().hex
    path_dir = swerex_remote_dir(tmp_path, "temp-symlink")
    probe = os.path.join(HERE, "swerex_remote_probe.py")
    result = subprocess.run(
        ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable,
         probe, token, path_dir],
        capture_output=True, text=True, timeout=90)
    lines = result.stdout.strip().splitlines()
    assert lines, f"no report; stderr: {result.stderr[-3000:]}"
    report = json.loads(lines[-1])
    assert result.returncode == 0, report
    assert report["command"] == ["/bin/sh", "-c",
                                 f"swerex-remote --auth-token {token} || exit {FALLBACK_EXIT}"]
    assert report["output"] == "probe-42\n"
    assert report["server_argv"][0] == "swerex-remote"
    assert report["server_argv"][1:] == ["--auth-token", token]
    assert report["server_exe"] == os.path.realpath(rex_server_path())
    assert report["sh_exit"] == 0
