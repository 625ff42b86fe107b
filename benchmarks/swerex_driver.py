"""SWE-ReX's own code, timed for rex's benchmarks (rex_bench, rex_server_bench).

Runs with the Python of an environment that holds swe-rex (tests/swerex/requirements.txt) and
uses SWE-ReX as a library, unchanged:

  swerex_driver.py local    SWE-ReX's LocalRuntime (swerex.runtime.local) in this process
  swerex_driver.py client   SWE-ReX's Python client (swerex.runtime.remote.RemoteRuntime)
  swerex_driver.py server --host H --port P --auth-token T
                            SWE-ReX's server (swerex.server:main, what swerex-remote runs)

`local` and `client` answer requests from the benchmark: one JSON object per line on stdin, one
JSON answer per line on stdout. The first line out says whether SWE-ReX could be imported:
{"ready": true, "swerex_version": ...} or {"ready": false, "error": ...}. Requests:

  local:  {"op": "echo", "n": N}            run_in_session("echo hi"), check=raise
          {"op": "output_1mb", "n": N}      1 MB of output through run_in_session
          {"op": "create_close", "n": N}    create_session, then close_session, timed apart
          {"op": "execute_true", "n": N}    execute(["true"])
          {"op": "throughput", "sessions": S, "commands": C}
                                            S sessions, C `echo`s each, all at once (gather)
  client: {"op": "echo", "url": U, "token": T, "n": N}      run_in_session("echo hi")
          {"op": "is_alive", "url": U, "token": T, "n": N}  is_alive()

Answers: {"ok": true, "samples_ms": [...], ...} (times of each call, measured around the await
with time.perf_counter), or {"ok": false, "error": "..."}. Each session is created on first use
and closed at the end of stdin. Every mode ends with the benchmark that started it.
"""

import asyncio
import ctypes
import json
import os
import signal
import sys
import time
import traceback

PR_SET_PDEATHSIG = 1


def end_with_parent():
    """Killed when the benchmark ends, even when it is killed itself."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        sys.exit(1)


def ms_since(t0):
    return (time.perf_counter() - t0) * 1000


class LocalDriver:
    """SWE-ReX's LocalRuntime, called as SWE-agent calls it."""

    def __init__(self):
        from swerex.runtime.local import LocalRuntime

        self.runtime = LocalRuntime()
        self.sessions = set()

    async def session(self, name):
        from swerex.runtime.abstract import CreateBashSessionRequest

        if name not in self.sessions:
            request = CreateBashSessionRequest(session=name, startup_timeout=30)
            await self.runtime.create_session(request)
            self.sessions.add(name)
        return name

    async def run(self, session, command):
        from swerex.runtime.abstract import BashAction

        action = BashAction(command=command, session=session, timeout=30, check="raise")
        return await self.runtime.run_in_session(action)

    async def commands(self, session, command, n, check):
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            obs = await self.run(session, command)
            samples.append(ms_since(t0))
            check(obs.output)
        return {"samples_ms": samples}

    async def op_echo(self, req):
        session = await self.session("bench-echo")
        return await self.commands(session, "echo hi", req["n"], expect_hi)

    async def op_output_1mb(self, req):
        def check(output):
            if output.count("a") != 1000000:
                raise RuntimeError(f"1 MB of output came back as {output.count('a')} bytes of it")

        session = await self.session("bench-output")
        command = "head -c 1000000 /dev/zero | tr '\\0' a"
        return await self.commands(session, command, req["n"], check)

    async def op_create_close(self, req):
        from swerex.runtime.abstract import CloseBashSessionRequest, CreateBashSessionRequest

        create_ms, close_ms = [], []
        for _ in range(req["n"]):
            t0 = time.perf_counter()
            request = CreateBashSessionRequest(session="bench-create", startup_timeout=30)
            await self.runtime.create_session(request)
            create_ms.append(ms_since(t0))
            t0 = time.perf_counter()
            await self.runtime.close_session(CloseBashSessionRequest(session="bench-create"))
            close_ms.append(ms_since(t0))
        return {"samples_ms": create_ms, "close_ms": close_ms}

    async def op_execute_true(self, req):
        from swerex.runtime.abstract import Command

        samples = []
        for _ in range(req["n"]):
            t0 = time.perf_counter()
            response = await self.runtime.execute(Command(command=["true"]))
            samples.append(ms_since(t0))
            if response.exit_code != 0:
                raise RuntimeError(f"`true` exited with {response.exit_code}")
        return {"samples_ms": samples}

    async def op_throughput(self, req):
        names = [await self.session(f"bench-tp-{i}") for i in range(req["sessions"])]
        latencies = []

        async def worker(session):
            for k in range(req["commands"]):
                t0 = time.perf_counter()
                obs = await self.run(session, f"echo {k}")
                latencies.append(ms_since(t0))
                if obs.output.strip() != str(k):
                    raise RuntimeError(f"`echo {k}` answered {obs.output!r}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(s) for s in names))
        seconds = ms_since(t0) / 1000
        return {"samples_ms": latencies, "commands_per_s": len(latencies) / seconds}

    async def close(self):
        from swerex.runtime.abstract import CloseBashSessionRequest

        for name in sorted(self.sessions):
            await self.runtime.close_session(CloseBashSessionRequest(session=name))
        self.sessions.clear()


class ClientDriver:
    """SWE-ReX's RemoteRuntime against any server that speaks its protocol."""

    def __init__(self):
        self.runtimes = {}  # (url, token) -> RemoteRuntime
        self.sessions = set()  # (url, token, session)

    def runtime(self, req):
        from swerex.runtime.remote import RemoteRuntime

        key = (req["url"], req["token"])
        if key not in self.runtimes:
            self.runtimes[key] = RemoteRuntime(host=req["url"], auth_token=req["token"], timeout=30)
        return self.runtimes[key]

    async def op_echo(self, req):
        from swerex.runtime.abstract import BashAction, CreateBashSessionRequest

        runtime = self.runtime(req)
        key = (req["url"], req["token"], "py-bench-echo")
        if key not in self.sessions:
            request = CreateBashSessionRequest(session=key[2], startup_timeout=30)
            await runtime.create_session(request)
            self.sessions.add(key)
        samples = []
        for _ in range(req["n"]):
            action = BashAction(command="echo hi", session=key[2], timeout=30, check="raise")
            t0 = time.perf_counter()
            obs = await runtime.run_in_session(action)
            samples.append(ms_since(t0))
            expect_hi(obs.output)
        return {"samples_ms": samples}

    async def op_is_alive(self, req):
        runtime = self.runtime(req)
        samples = []
        for _ in range(req["n"]):
            t0 = time.perf_counter()
            answer = await runtime.is_alive(timeout=30)
            samples.append(ms_since(t0))
            if not answer.is_alive:
                raise RuntimeError(f"is_alive answered {answer.message!r}")
        return {"samples_ms": samples}

    async def close(self):
        from swerex.runtime.abstract import CloseBashSessionRequest

        for url, token, session in sorted(self.sessions):
            runtime = self.runtime({"url": url, "token": token})
            await runtime.close_session(CloseBashSessionRequest(session=session))
        self.sessions.clear()


def expect_hi(output):
    # SWE-ReX's sessions answer "\r\nhi\n\r\n\r\n" where rex's answer "hi\n".
    if output.strip() != "hi":
        raise RuntimeError(f"`echo hi` answered {output!r}")


def serve_requests(make_driver):
    # Answers go to the real stdout; anything the library prints goes to stderr instead.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def answer(obj):
        answers.write(json.dumps(obj) + "\n")

    os.environ.setdefault("SWE_REX_LOG_STREAM_LEVEL", "WARNING")
    try:
        import swerex

        driver = make_driver()
    except Exception as e:  # noqa: BLE001 - any failure to load SWE-ReX is reported
        answer({"ready": False, "error": f"{type(e).__name__}: {e}"})
        return 3
    version = getattr(swerex, "__version__", "?")
    answer({"ready": True, "swerex_version": version, "python": sys.version.split()[0]})

    loop = asyncio.new_event_loop()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            handler = getattr(driver, "op_" + req["op"], None)
            if handler is None:
                raise ValueError(f"no operation {req['op']!r}")
            result = loop.run_until_complete(handler(req))
            answer({"ok": True, **result})
        except Exception as e:  # noqa: BLE001 - the benchmark reports it
            traceback.print_exc()
            answer({"ok": False, "error": f"{type(e).__name__}: {e}"})
    loop.run_until_complete(driver.close())
    loop.close()
    return 0


def main(argv):
    if len(argv) < 2 or argv[1] not in ("local", "client", "server"):
        print(__doc__, file=sys.stderr)
        return 2
    end_with_parent()
    mode = argv[1]
    if mode == "server":
        from swerex.server import main as swerex_remote

        sys.argv = ["swerex-remote", *argv[2:]]
        swerex_remote()
        return 0
    return serve_requests(LocalDriver if mode == "local" else ClientDriver)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
