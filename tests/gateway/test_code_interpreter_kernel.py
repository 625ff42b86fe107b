#!/usr/bin/env python3
"""E2B's Python code-interpreter SDK (e2b-code-interpreter, pinned in
tests/swerex/requirements.txt), unchanged, against src/gateway/notebook_kernel.py's `http` mode
on a free loopback port.

The SDK reaches a sandbox's port 49999 at ConnectionConfig(sandbox_url=...) when that is set (as
E2B_SANDBOX_URL), so a Sandbox made with that config and no control plane talks to this server.

Usage: test_code_interpreter_kernel.py [--kernel-python PYTHON]. The server (and so its kernels)
runs under PYTHON: --kernel-python, else $REX_KERNEL_PYTHON, else python3 on PATH, which is what a
sandbox runs it with; it must be able to import matplotlib (the test fails saying so if not).
Each step runs under a deadline; exit status 0 means every step passed.
"""
import argparse
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.join(HERE, "..", "..", "src", "gateway", "notebook_kernel.py")
STEP_DEADLINE = 60  # seconds any one step may take
CAP = 8 * 1024 * 1024  # the kernel's output limit per stream and execution

# On connection errors the SDKs ask the control plane whether the sandbox still runs: nothing
# listens here, so they cannot, and report the original error.
NO_CONTROL_PLANE = "http://127.0.0.1:9"
server = None  # the http-mode process, killed by PID at the end (or when a step overruns)
work = None  # the server's working directory, made by start_server()


def stop_server():
    if server is not None and server.poll() is None:
        os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, signal.SIGKILL)
            server.wait()


def stop_server_and_children(at_least):
    """Stops the server, checking it ends the kernels and shells it started (call in a step)."""
    children = subprocess.run(["pgrep", "-P", str(server.pid)], stdout=subprocess.PIPE,
                              text=True).stdout.split()
    check(len(children) >= at_least, children)
    stop_server()
    check(server.returncode == 0, server.returncode)
    while True:  # reaped by init once the server is gone; bounded by the step's deadline
        left = [pid for pid in children if os.path.exists(f"/proc/{pid}")]
        if not left:
            return
        time.sleep(0.05)


def server_log():
    if work is None:
        return ""
    try:
        with open(os.path.join(work, "server.log"), encoding="utf-8", errors="replace") as f:
            return f.read()[-4000:]
    except OSError:
        return ""


def fail(message):
    print(f"FAIL: {message}", flush=True)
    log = server_log()
    if log:
        print("--- server log (tail) ---\n" + log, flush=True)
    stop_server()
    os._exit(1)


@contextmanager
def step(name, deadline=STEP_DEADLINE):
    """A step of the test: its failure (or overrunning `deadline`) ends the test with status 1."""
    timer = threading.Timer(deadline, fail, [f"{name}: no end within {deadline}s"])
    timer.daemon = True
    timer.start()
    started = time.monotonic()
    try:
        yield
    except BaseException as e:  # noqa: B902 - every failure is reported the same way
        timer.cancel()
        import traceback
        traceback.print_exc()
        fail(f"{name}: {type(e).__name__}: {e}")
    timer.cancel()
    print(f"ok: {name} ({time.monotonic() - started:.1f}s)", flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def start_server(python):
    global server, work
    work = tempfile.mkdtemp(prefix="rex-ci-test-")
    log = open(os.path.join(work, "server.log"), "wb")
    server = subprocess.Popen([python, KERNEL, "http", "--host", "127.0.0.1", "--port", "0"],
                              cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=log)
    line = server.stdout.readline().decode()
    check(line.startswith("rex code interpreter listening on http://"),
          f"the server did not start: {line!r} ({server.poll()})")
    return "http://127.0.0.1:" + line.strip().rsplit(":", 1)[1]


def kernel_python_option(parser):
    parser.add_argument("--kernel-python",
                        default=os.environ.get("REX_KERNEL_PYTHON") or shutil.which("python3"),
                        help="the python running the server and its kernels")


def sandbox(url):
    from packaging.version import Version
    from e2b import ConnectionConfig
    from e2b_code_interpreter import Sandbox

    config = ConnectionConfig(sandbox_url=url, api_url=NO_CONTROL_PLANE,
                              api_key="e2b_unused_by_this_server")
    return Sandbox(sandbox_id="rex-local", envd_version=Version("0.4.0"), envd_access_token=None,
                   sandbox_domain=None, connection_config=config)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kernel_python_option(parser)
    args = parser.parse_args()
    try:
        from e2b import NotFoundException, SandboxException, TimeoutException
    except ImportError as e:
        sys.exit(f"FAIL: E2B's code-interpreter SDK is not importable by {sys.executable} ({e}): "
                 "run this with build/swerex-env/bin/python (scripts/common.sh installs "
                 "tests/swerex/requirements.txt there)")

    with step("server starts"):
        url = start_server(args.kernel_python)
        sbx = sandbox(url)

    with step("state across cells, execution count, last expression"):
        first = sbx.run_code("x = 41")
        check(first.error is None and first.results == [], first)
        second = sbx.run_code("x += 1\nx")
        check(second.text == "42", second)
        check(second.execution_count == first.execution_count + 1, second.execution_count)
        main_results = [r for r in second.results if r.is_main_result]
        check(len(main_results) == 1, second.results)
        check(sbx.run_code("'hello'").text == "hello", "a string's quotes are E2B's: none")
        check(sbx.run_code("x;").results == [], "a trailing ; hides the value, as IPython")
        indented = sbx.run_code("\n    y = 2\n    y * 3\n    ")
        check(indented.text == "6", indented)  # IPython's leading indentation removal

    with step("stdout and stderr stream line by line"):
        seen, errors = [], []
        # The cell prints its second line only once this side has seen the first (a file it
        # waits for): the first came while the cell still ran, not with the second at its end.
        heard = os.path.join(work, "heard-first")

        def on_stdout(m):
            seen.append(m.line)
            if m.line == "first\n":
                open(heard, "w").close()
        execution = sbx.run_code(
            "import os, sys, time\nprint('first')\nprint('warn', file=sys.stderr)\n"
            "for _ in range(600):\n    if os.path.exists(%r): break\n    time.sleep(0.05)\n"
            "print('second' if os.path.exists(%r) else 'not streamed', end='')" % (heard, heard),
            on_stdout=on_stdout, on_stderr=lambda m: errors.append(m.line))
        check(seen == ["first\n", "second"], seen)
        check(execution.logs.stdout == ["first\n", "second"], execution.logs)
        check(errors == ["warn\n"] and execution.logs.stderr == ["warn\n"], errors)
        once = []
        sbx.run_code("print('Hello from e2b')", on_stdout=once.append)
        check([m.line for m in once] == ["Hello from e2b\n"], once)

    with step("an exception gives name, value and traceback"):
        errors = []
        execution = sbx.run_code("print('before')\ndef f():\n    return 1 / 0\nf()",
                                 on_error=errors.append)
        error = execution.error
        check(error is not None and errors == [error], execution)
        check((error.name, error.value) == ("ZeroDivisionError", "division by zero"), error)
        check(error.traceback.startswith("Traceback (most recent call last):"), error.traceback)
        check('line 3, in f' in error.traceback and "return 1 / 0" in error.traceback,
              error.traceback)
        check("notebook_kernel" not in error.traceback, error.traceback)
        check(execution.logs.stdout == ["before\n"], execution.logs)
        check(sbx.run_code("x").text == "42", "the state outlives the error")
        syntax = sbx.run_code("def (:").error
        check(syntax is not None and syntax.name == "SyntaxError", syntax)

    with step("rich results: HTML, markdown, JSON, LaTeX, SVG, PNG, display()"):
        png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
        sbx.run_code(
            "class Rich:\n"
            "    def __repr__(self): return 'Rich()'\n"
            "    def _repr_html_(self): return '<b>rich</b>'\n"
            "    def _repr_markdown_(self): return '**rich**'\n"
            "    def _repr_json_(self): return {'rich': [1, 2]}\n"
            "    def _repr_latex_(self): return r'$\\rho$'\n"
            "    def _repr_svg_(self): return '<svg></svg>'\n"
            "    def _repr_png_(self): return b'\\x89PNG\\r\\n\\x1a\\nfake'\n")
        result = sbx.run_code("Rich()").results
        check(len(result) == 1 and result[0].is_main_result, result)
        r = result[0]
        check((r.text, r.html, r.markdown, r.json, r.latex, r.svg, r.png) ==
              ("Rich()", "<b>rich</b>", "**rich**", {"rich": [1, 2]}, "$\\rho$", "<svg></svg>",
               png), vars(r))
        check(sbx.run_code("{'a': [1, 2.5, None]}").results[0].json == {"a": [1, 2.5, None]},
              "a dict's JSON, as E2B's formatter")
        shown = []
        execution = sbx.run_code("display(Rich())\ndisplay(1, 2)\n3", on_result=shown.append)
        check([(r.text, r.is_main_result) for r in execution.results] ==
              [("Rich()", False), ("1", False), ("2", False), ("3", True)], execution.results)
        check(shown == execution.results, shown)
        raw = sbx.run_code("from IPython.display import display, HTML\n"
                           "display({'text/latex': r'\\text{CustomReprObject}'}, raw=True)\n"
                           "display(HTML('<i>h</i>'))")
        check(raw.error is None, raw.error)
        check(list(raw.results[0].formats()) == ["latex"], list(raw.results[0].formats()))
        check(raw.results[1].html == "<i>h</i>", vars(raw.results[1]))

    with step("matplotlib figures become PNG results"):
        probe = sbx.run_code("import matplotlib")
        if probe.error is not None:
            raise AssertionError(
                f"matplotlib is not importable by the kernel's python ({args.kernel_python}): "
                f"{probe.error.name}: {probe.error.value}. Install it there, or pass "
                "--kernel-python / REX_KERNEL_PYTHON naming a python that has it")
        shown = sbx.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
        check(shown.error is None, shown.error)
        check(len(shown.results) == 1, shown.results)
        figure = shown.results[0]
        check(figure.png and base64.b64decode(figure.png).startswith(b"\x89PNG\r\n\x1a\n"),
              "not a PNG")
        check(figure.text.startswith("<Figure size") and not figure.is_main_result, figure.text)
        left_open = sbx.run_code("fig = plt.figure()\nplt.plot([3, 1])\nx")
        check([(bool(r.png), r.is_main_result) for r in left_open.results] ==
              [(False, True), (True, False)], left_open.results)  # flushed at the cell's end
        check(sbx.run_code("plt.get_fignums()").text == "[]", "shown figures are closed")

    with step("contexts: create, list, independence, restart, remove"):
        sub = os.path.join(work, "sub dir")
        os.mkdir(sub)
        ctx = sbx.create_code_context(cwd=sub, language="python")
        check((ctx.language, ctx.cwd) == ("python", sub), ctx)
        listed = sbx.list_code_contexts()
        check(listed[-1].id == ctx.id and listed[-1].cwd == sub, listed)
        check([c.language for c in listed].count("python") >= 2, listed)
        check(sbx.run_code("import os; os.getcwd()", context=ctx).text == sub, "cwd")
        error = sbx.run_code("x", context=ctx).error
        check(error is not None and error.value == "name 'x' is not defined", error)
        sbx.run_code("z = 1", context=ctx)
        check(sbx.run_code("z", context=ctx).text == "1", "state in a context")
        sbx.restart_code_context(ctx)
        error = sbx.run_code("z", context=ctx).error
        check(error is not None and error.name == "NameError", "a restart loses the state")
        sbx.remove_code_context(ctx.id)
        check(ctx.id not in [c.id for c in sbx.list_code_contexts()], "removed")
        try:
            sbx.run_code("1", context=ctx)
            raise AssertionError("a removed context still runs code")
        except NotFoundException as e:
            check(ctx.id in str(e), e)
        try:
            sbx.create_code_context(cwd=os.path.join(work, "missing"))
            raise AssertionError("a context in a missing directory")
        except SandboxException as e:
            check("not a directory" in str(e), e)

    with step("bash: a persistent shell, streamed output, exit codes"):
        out = []
        first = sbx.run_code(f"cd '{sub}'\nexport KEPT=yes\necho one\necho two >&2\nfalse",
                             language="bash", on_stdout=out.append)
        check(first.logs.stdout == ["one\n"] and first.logs.stderr == ["two\n"], first.logs)
        check([m.line for m in out] == ["one\n"], out)
        check(first.error is not None and first.error.value == "1", first.error)
        second = sbx.run_code("pwd; echo $KEPT", language="bash")
        check(second.error is None and second.logs.stdout == [sub + "\n", "yes\n"], second)
        check(second.execution_count == first.execution_count + 1, second.execution_count)
        ended = sbx.run_code("exit 3", language="bash")
        check(ended.error is not None and ended.error.name == "ShellExited", ended.error)
        check(sbx.run_code("echo again", language="bash").logs.stdout == ["again\n"],
              "a new shell after exit")
        bash = sbx.create_code_context(language="bash", cwd=sub)
        check(sbx.run_code("pwd", context=bash).logs.stdout == [sub + "\n"], "bash context cwd")
        sbx.remove_code_context(bash)

    with step("env_vars apply to one execution"):
        check(sbx.run_code("import os; os.getenv('FOO')", envs={"FOO": "bar"}).text == "bar",
              "python env")
        check(sbx.run_code("os.getenv('FOO', 'default')").text == "default", "python restore")
        check(sbx.run_code("echo $FOO", envs={"FOO": "bar"}, language="bash").logs.stdout ==
              ["bar\n"], "bash env")
        check(sbx.run_code("echo ${FOO:-default}", language="bash").logs.stdout ==
              ["default\n"], "bash restore")

    with step("a timed-out cell is interrupted and the context keeps its state"):
        sbx.run_code("kept = 'still here'")
        sbx.run_code(f"cd '{sub}'", language="bash")
        started = time.monotonic()
        try:
            sbx.run_code("import time; time.sleep(100)", timeout=2)
            raise AssertionError("no timeout")
        except TimeoutException as e:
            check("timed out" in str(e), e)
        check(time.monotonic() - started < 30, "the SDK's timeout")
        after = sbx.run_code("kept", timeout=20)
        check(after.text == "still here", after)
        try:
            sbx.run_code("sleep 100", language="bash", timeout=2)
            raise AssertionError("no timeout")
        except TimeoutException:
            pass
        check(sbx.run_code("pwd", language="bash", timeout=20).logs.stdout == [sub + "\n"],
              "the shell outlives the interrupt")

    with step("output that is not UTF-8, and huge output"):
        raw = sbx.run_code("import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok\\n')")
        check(raw.error is None and raw.logs.stdout == ["\ufffd\ufffd ok\n"], raw)
        huge = sbx.run_code("for _ in range(9000): print('x' * 1000)")
        check(huge.error is None and huge.logs.stdout[-1] == "[output truncated]\n",
              huge.logs.stdout[-2:])
        total = sum(len(line) for line in huge.logs.stdout)
        check(CAP - 2000 < total <= CAP + 100, total)
        check(sbx.run_code("print('small')").logs.stdout == ["small\n"], "the cap is per cell")
        fd = sbx.run_code("import subprocess\nsubprocess.run(['echo', 'from a child'])\n"
                          "subprocess.run('printf \"\\\\377 raw\\\\n\" >&2', shell=True)\n")
        check(fd.logs.stdout == ["from a child\n"] and fd.logs.stderr == ["\ufffd raw\n"], fd.logs)

    with step("one context queues its executions; contexts run in parallel"):
        sbx.run_code("order = []")
        results = {}

        def run(key, code, **kwargs):
            results[key] = sbx.run_code(code, **kwargs)

        started = os.path.join(work, "started")
        slow = threading.Thread(target=run, args=(
            "slow", "import time\norder.append('a')\nopen(%r, 'w').close()\ntime.sleep(1)\n"
            "order.append('b')" % started))
        slow.start()
        while not os.path.exists(started):  # bounded by the step's deadline
            time.sleep(0.02)
        # The slow cell holds the turn; this one waits for it, then runs.
        run("queued", "order.append('c')\norder")
        slow.join()
        check(results["queued"].text == "['a', 'b', 'c']", results["queued"].text)
        flag = os.path.join(work, "flag")
        other = sbx.create_code_context()
        waiter = threading.Thread(target=run, args=(
            "waiter", "import os, time\nfor _ in range(600):\n    if os.path.exists(%r): break\n"
            "    time.sleep(0.05)\nos.path.exists(%r)" % (flag, flag)), kwargs={"context": other})
        waiter.start()
        sbx.run_code("open(%r, 'w').close()" % flag)  # runs while the waiter's context waits
        waiter.join()
        check(results["waiter"].text == "True", results["waiter"])

    with step("other languages are refused, naming the language"):
        try:
            sbx.run_code("console.log(1)", language="js")
            raise AssertionError("javascript ran")
        except SandboxException as e:
            check("400" in str(e) and "'js'" in str(e), e)

    with step("the server ends its kernels and shells"):
        stop_server_and_children(3)  # two Python kernels and a shell at least
    shutil.rmtree(work, ignore_errors=True)
    print("PASS: E2B's Python code-interpreter SDK against notebook_kernel.py http", flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_server()
