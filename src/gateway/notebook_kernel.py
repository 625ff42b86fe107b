#!/usr/bin/env python3
"""rex notebook kernel: runs Python cells "the way a notebook does" inside a sandbox.

Stdlib only, Python 3.7+. Two modes:
  serve SOCKET_PATH              The kernel: one persistent __main__ namespace behind a unix
                                 socket (mode 0600), PID in SOCKET_PATH.pid. Cells run one at
                                 a time in the main thread; SIGINT interrupts a running cell and
                                 is ignored while idle; SIGTERM removes the files and exits.
  run SOCKET_PATH [--timeout S]  The client: reads a cell from stdin, prints one JSON line with
                                 stdout, stderr, results, error and execution_count. Exit 0 when
                                 answered, 3 if the kernel is unreachable, 4 if it did not answer
                                 within S seconds plus 5 more after it was sent SIGINT, 5 if it
                                 ended while running the cell (its state is gone).
Wire format: 4-byte big-endian length + UTF-8 JSON; request {"code": ...}, reply as printed.
"""
import argparse, ast, builtins, io, json, linecache, os, queue, signal, socket, struct, sys
import threading, traceback, types

CAP = 8 * 1024 * 1024  # per-stream output limit of a reply, in UTF-8 bytes
THIS = (lambda: 0).__code__.co_filename  # frames of this file are left out of tracebacks
UNREACHABLE, TIMEOUT, DIED = 3, 4, 5


def send_frame(sock, obj):
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8", "backslashreplace")
    sock.sendall(struct.pack(">I", len(data)) + data)


def recv_frame(sock, buf):
    """One frame from sock; `buf` (a bytearray) keeps partial data across timeouts."""
    while True:
        if len(buf) >= 4:
            size = struct.unpack(">I", bytes(buf[:4]))[0]
            if len(buf) >= 4 + size:
                data = bytes(buf[4:4 + size])
                del buf[:4 + size]
                return json.loads(data.decode("utf-8"))
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the connection was closed")
        buf += chunk


class Capture(io.StringIO):
    """sys.stdout/sys.stderr of a cell: keeps at most CAP characters."""
    encoding, truncated = "utf-8", False

    def write(self, s):
        room = CAP - self.tell()
        if isinstance(s, str) and len(s) > room:
            self.truncated = True
            super().write(s[:max(room, 0)])
            return len(s)
        return super().write(s)

    def text(self):
        data = self.getvalue().encode("utf-8", "backslashreplace")  # lone surrogates too
        if self.truncated or len(data) > CAP:
            return data[:CAP].decode("utf-8", "ignore") + "\n[output truncated]"
        return data.decode("utf-8")


def _strip(te, seen):
    """Drop this file's frames from a TracebackException and the exceptions it chains to."""
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != THIS])
        _strip(te.__cause__, seen)
        te = te.__context__


def describe(exc, with_stack=True):
    if with_stack:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _strip(te, set())
        text = "".join(te.format())
    else:  # a cell that does not compile: no frames to show
        text = "".join(traceback.format_exception_only(type(exc), exc))
    try:
        value = str(exc)
    except Exception:
        value = "<unprintable %s>" % type(exc).__name__
    return {"name": type(exc).__name__, "value": value, "traceback": text}


class Kernel:
    def __init__(self):
        main = types.ModuleType("__main__")  # so pickle & co. find what cells define
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        if sys.path:
            sys.path[0] = ""  # cells import from the working directory, like a notebook
        self.ns, self.count, self.busy = main.__dict__, 0, False

    def on_sigint(self, signum, frame):
        if self.busy:  # idle kernels ignore SIGINT
            raise KeyboardInterrupt

    def run(self, code):
        self.count += 1
        name = "<cell %d>" % self.count
        out, err, results, error = Capture(), Capture(), [], None
        try:
            tree = ast.parse(code, name)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = compile(ast.Expression(tree.body.pop().value), name, "eval")
            body = compile(tree, name, "exec")
        except Exception as e:  # SyntaxError, or ValueError for NUL bytes: nothing runs
            error = describe(e, with_stack=False)
        else:
            linecache.cache[name] = (len(code), None, code.splitlines(True), name)
            saved = sys.stdout, sys.stderr, sys.stdin
            sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO()
            try:
                self.busy = True
                exec(body, self.ns)
                if last is not None:
                    value = eval(last, self.ns)
                    if value is not None:
                        self.ns["_"] = value
                        results.append({"type": "text", "text": repr(value)})
            except BaseException as e:  # SystemExit and KeyboardInterrupt included
                self.busy = False
                error = describe(e)
            finally:
                self.busy = False
                sys.stdout, sys.stderr, sys.stdin = saved
        return {"stdout": out.text(), "stderr": err.text(), "results": results, "error": error,
                "execution_count": self.count}


def serve_connection(conn, jobs):
    buf = bytearray()
    with conn:
        while True:
            try:
                request = recv_frame(conn, buf)
            except (OSError, ValueError):
                return
            code = request.get("code") if isinstance(request, dict) else None
            box = {"done": threading.Event()}
            jobs.put((code if isinstance(code, str) else "", box))
            box["done"].wait()
            try:
                send_frame(conn, box["reply"])
            except OSError:
                return


def accept_loop(server, jobs):
    # Signals go to the main thread, where cells run (threads made here inherit the mask).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            threading.Event().wait(0.1)
            continue
        threading.Thread(target=serve_connection, args=(conn, jobs), daemon=True).start()


def serve(path):
    pidfile, staging = path + ".pid", path + ".new"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        sys.exit("notebook_kernel: a kernel already listens on %s" % path)
    except OSError:
        pass  # nothing listens there: a leftover socket file is stale
    finally:
        probe.close()
    for stale in (path, staging):
        if os.path.lexists(stale):
            os.unlink(stale)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        server.bind(staging)  # bound aside, then renamed: the socket appears ready to use
    finally:
        os.umask(umask)
    os.chmod(staging, 0o600)
    server.listen(64)

    def terminate(signum, frame):
        for leftover in (path, staging, pidfile):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        os._exit(0)

    kernel, jobs = Kernel(), queue.Queue()
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, kernel.on_sigint)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # outlive the terminal/parent that started us
    threading.Thread(target=accept_loop, args=(server, jobs), daemon=True).start()
    with open(pidfile + ".new", "w") as f:
        f.write("%d\n" % os.getpid())
    os.replace(pidfile + ".new", pidfile)
    os.replace(staging, path)
    while True:
        code, box = jobs.get()
        try:
            box["reply"] = kernel.run(code)
        except KeyboardInterrupt:  # a SIGINT that landed on the very edge of a cell
            kernel.busy = False
            sys.stdout, sys.stderr, sys.stdin = sys.__stdout__, sys.__stderr__, sys.__stdin__
            box["reply"] = {"stdout": "", "stderr": "", "results": [], "execution_count": kernel.count,
                            "error": {"name": "KeyboardInterrupt", "value": "",
                                      "traceback": "KeyboardInterrupt\n"}}
        box["done"].set()


def emit(obj):
    line = json.dumps(obj, ensure_ascii=False).encode("utf-8", "backslashreplace")
    sys.stdout.buffer.write(line + b"\n")
    sys.stdout.flush()


def interrupt(path):
    try:
        with open(path + ".pid") as f:
            os.kill(int(f.read().strip()), signal.SIGINT)
        return "the kernel was sent SIGINT"
    except (OSError, ValueError) as e:
        return "the kernel could not be interrupted: %s" % e


def client(path, timeout):
    code = sys.stdin.buffer.read().decode("utf-8", "replace")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        emit({"kernel": "unreachable", "message": "cannot connect to %s: %s" % (path, e)})
        return UNREACHABLE
    with sock:
        try:
            send_frame(sock, {"code": code})
            buf = bytearray()
            sock.settimeout(timeout)
            try:
                reply = recv_frame(sock, buf)
            except socket.timeout:
                note = interrupt(path)
                sock.settimeout(5)
                try:
                    reply = recv_frame(sock, buf)
                except socket.timeout:
                    emit({"kernel": "timeout", "message": "no answer within %gs (%s, then "
                          "waited 5s more)" % (timeout, note)})
                    return TIMEOUT
        except (OSError, ValueError) as e:  # the kernel died or answered garbage
            emit({"kernel": "died", "message": "the kernel gave no answer: %s" % e})
            return DIED
    emit(reply)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description="rex notebook kernel (serve) and its client (run)")
    parser.add_argument("mode", choices=["serve", "run"])
    parser.add_argument("socket", help="path of the kernel's unix socket")
    parser.add_argument("--timeout", type=float, help="run: seconds before the cell is interrupted")
    args = parser.parse_args(argv)
    if args.timeout is not None and not args.timeout > 0:
        parser.error("--timeout must be a positive number of seconds")
    if args.mode == "serve":
        serve(args.socket)
    else:
        sys.exit(client(args.socket, args.timeout))


if __name__ == "__main__":
    main()
