#!/usr/bin/env python3
"""rex notebook kernel: runs Python cells "the way a notebook does" inside a sandbox.

Stdlib only, Python 3.7+. Three modes:
  serve SOCKET_PATH              The kernel: one persistent __main__ namespace behind a unix
                                 socket (mode 0600), PID in SOCKET_PATH.pid. Cells run one at
                                 a time in the main thread; SIGINT interrupts a running cell and
                                 is ignored while idle; SIGTERM removes the files and exits.
                                 --exit-on-stdin-eof: also exit when stdin closes (the parent
                                 that started it ended).
  run SOCKET_PATH [--timeout S]  The client: reads a cell from stdin, prints one JSON line with
                                 stdout, stderr, results, error and execution_count. Exit 0 when
                                 answered, 3 if the kernel is unreachable, 4 if it did not answer
                                 within S seconds plus 5 more after it was sent SIGINT, 5 if it
                                 ended while running the cell (its state is gone).
  http [--host H] [--port P]     E2B's code-interpreter HTTP API (what the e2b-code-interpreter
                                 SDKs call on a sandbox's port 49999): contexts, each a `serve`
                                 kernel (Python) or a bash process, and /execute streaming NDJSON.
                                 Port 0 picks a free one; the first line on stdout names the URL.
Wire format: 4-byte big-endian length + UTF-8 JSON; request {"code": ...}, reply as printed.
A request with "stream": true (and optional "env_vars", "fd_mark") is answered instead by
E2B's NDJSON objects, one a frame, as they happen, the last {"type": "end_of_execution"}.
"""
import argparse, ast, base64, builtins, codecs, collections, datetime, io, json, linecache, math
import os, queue, re, select, shlex, shutil, signal, socket, struct, subprocess, sys, tempfile
import threading, time, traceback, types, uuid
import http.server
import importlib.abc, importlib.util

CAP = 8 * 1024 * 1024  # per-stream output limit of a reply (or a streamed cell), in UTF-8 bytes
LINE_CHUNK = 64 * 1024  # a streamed line longer than this goes out in pieces
THIS = (lambda: 0).__code__.co_filename  # frames of this file are left out of tracebacks
UNREACHABLE, TIMEOUT, DIED = 3, 4, 5
TRUNCATED = "[output truncated]"


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


def timestamp():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class BytesToText:
    """sys.stdout.buffer of a cell: bytes decoded as UTF-8, invalid sequences replaced by U+FFFD."""

    def __init__(self, text):
        self.text, self.decoder = text, codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, data):
        self.text.write(self.decoder.decode(bytes(data)))
        return len(data)

    def finish(self):  # a sequence cut short at the end of the cell is replaced too
        self.text.write(self.decoder.decode(b"", True))

    def flush(self):
        self.text.flush()

    def writable(self):
        return True

    def isatty(self):
        return False


class Capture(io.StringIO):
    """sys.stdout/sys.stderr of a cell. Without `stream`, keeps at most CAP characters for the
    reply. With `stream(text)`, hands on each line as it is completed (a partial one on flush()
    or at the end of the cell), at most CAP bytes a cell, then the TRUNCATED line once."""
    encoding, errors, truncated = "utf-8", "strict", False

    def __init__(self, stream=None):
        super().__init__()
        self.stream, self.pending, self.sent = stream, "", 0
        self.buffer = BytesToText(self)

    def write(self, s):
        if self.stream is None:
            room = CAP - self.tell()
            if isinstance(s, str) and len(s) > room:
                self.truncated = True
                super().write(s[:max(room, 0)])
                return len(s)
            return super().write(s)
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self.pending += s
        cut = self.pending.rfind("\n") + 1
        if cut == 0 and len(self.pending) >= LINE_CHUNK:
            cut = len(self.pending)
        if cut:
            self._send(self.pending[:cut])
            self.pending = self.pending[cut:]
        return len(s)

    def _send(self, text):
        if self.truncated:
            return
        for line in text.splitlines(True):
            size = len(line.encode("utf-8", "backslashreplace"))
            if self.sent + size > CAP:
                self.truncated = True
                self.stream(TRUNCATED + "\n")
                return
            self.sent += size
            self.stream(line)

    def flush(self):
        if self.stream is not None and self.pending:
            self._send(self.pending)
            self.pending = ""

    def finish(self):
        self.buffer.finish()
        self.flush()

    def text(self):
        data = self.getvalue().encode("utf-8", "backslashreplace")  # lone surrogates too
        if self.truncated or len(data) > CAP:
            return data[:CAP].decode("utf-8", "ignore") + "\n" + TRUNCATED
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


def dedent_cell(code):
    """A cell whose first line is indented loses that indentation on every line, as IPython's."""
    lines = code.splitlines(True)
    first = next((line for line in lines if line.strip()), "")
    indent = first[:len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return code
    return "".join(line[len(indent):] if line.startswith(indent) else line for line in lines)


# ---- Rich display: objects as E2B's result fields (Jupyter MIME bundles) ----

MIME_FIELDS = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown",
               "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
               "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
               "application/javascript": "javascript", "e2b/data": "data", "e2b/chart": "chart"}
REPR_METHODS = [("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
                ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_"),
                ("image/jpeg", "_repr_jpeg_"), ("application/pdf", "_repr_pdf_"),
                ("text/latex", "_repr_latex_"), ("application/json", "_repr_json_"),
                ("application/javascript", "_repr_javascript_")]
BINARY_FIELDS = {"png", "jpeg", "pdf"}


def plain_json(value, depth=0):
    """`value` as plain JSON data (numpy scalars and arrays too, NaN as null); TypeError if not."""
    if depth > 100:
        raise TypeError("nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v, depth + 1) for v in value]
    for method in ("tolist", "item"):  # numpy
        if type(value).__module__.startswith("numpy") and hasattr(value, method):
            return plain_json(getattr(value, method)(), depth + 1)
    raise TypeError("not JSON data: %s" % type(value).__name__)


def safe_repr(obj):
    try:
        return repr(obj)
    except Exception as e:
        return "<unprintable %s object: %s>" % (type(obj).__name__, type(e).__name__)


def mime_data(obj):
    """The MIME bundle of an object, as IPython's display formatter (with E2B's additions)."""
    data = {"text/plain": safe_repr(obj)}
    if isinstance(obj, type) or hasattr(obj, "_ipython_canary_method_should_not_exist_"):
        return data  # classes, and objects that answer every attribute, show as text
    for mime, name in REPR_METHODS:
        try:
            method = getattr(obj, name, None)
            value = method() if callable(method) else None
        except Exception:
            continue
        if isinstance(value, tuple) and len(value) == 2:  # (data, metadata)
            value = value[0]
        if value is not None:
            data[mime] = value
    modules = sys.modules
    if "matplotlib.figure" in modules and isinstance(obj, modules["matplotlib.figure"].Figure):
        png = io.BytesIO()
        obj.savefig(png, format="png", bbox_inches="tight")
        data["image/png"] = png.getvalue()
    if "pandas" in modules and isinstance(obj, getattr(modules["pandas"], "DataFrame", ())):
        try:
            data["e2b/data"] = plain_json({k: [v.isoformat() if hasattr(v, "isoformat") else v
                                               for v in column]
                                           for k, column in obj.to_dict(orient="list").items()})
        except Exception:
            pass
    if isinstance(obj, (list, dict)) and "application/json" not in data:
        try:
            data["application/json"] = plain_json(obj)
        except (TypeError, ValueError, RecursionError):
            pass
    try:
        method = getattr(obj, "_repr_mimebundle_", None)
        bundle = method(include=None, exclude=None) if callable(method) else None
    except Exception:
        bundle = None
    if isinstance(bundle, tuple) and len(bundle) == 2:
        bundle = bundle[0]
    if isinstance(bundle, dict):
        data.update(bundle)
    return data


def result_fields(data):
    """E2B's result object for a MIME bundle: known types as fields, the rest in `extra`."""
    fields, extra = {}, {}
    for mime, value in data.items():
        field = MIME_FIELDS.get(mime)
        try:
            if isinstance(value, (bytes, bytearray)):
                value = (base64.b64encode(value).decode("ascii") if field in BINARY_FIELDS
                         else bytes(value).decode("utf-8", "replace"))
            elif field in ("json", "data", "chart") or not isinstance(value, str):
                value = plain_json(value)
        except (TypeError, ValueError, RecursionError):
            continue
        if field is None:
            extra[mime] = value
        else:
            fields[field] = value
    text = fields.get("text")
    if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        fields["text"] = text[1:-1]  # as E2B's server: the value of a string without its quotes
    if extra:
        fields["extra"] = extra
    return fields


def _display_object(kind):
    """IPython.display's HTML, Markdown, ... for when IPython is not installed."""

    class DisplayObject:
        def __init__(self, data=None, url=None, filename=None, metadata=None, **kwargs):
            if data is None and filename is not None:
                with open(filename, "rb" if kind in BINARY_FIELDS else "r") as f:
                    data = f.read()
            self.data, self.url, self.filename, self.metadata = data, url, filename, metadata

    DisplayObject.__name__ = DisplayObject.__qualname__ = kind
    return DisplayObject


def ipython_shim(display):
    """Modules IPython and IPython.display with display() and the common display objects."""
    top, shim = types.ModuleType("IPython"), types.ModuleType("IPython.display")
    # What libraries probe (matplotlib, tqdm): an old version outside any IPython shell.
    top.version_info, top.__version__, top.get_ipython = (0, 0, 0, "rex"), "0.0.0", lambda: None
    top.__path__, top.display = [], shim
    shim.display, shim.clear_output = display, lambda wait=False: None
    for name, method in (("HTML", "_repr_html_"), ("Markdown", "_repr_markdown_"),
                         ("Latex", "_repr_latex_"), ("SVG", "_repr_svg_"),
                         ("JSON", "_repr_json_"), ("Javascript", "_repr_javascript_")):
        cls = _display_object(name)
        setattr(cls, method, lambda self: self.data)
        setattr(shim, name, cls)

    class Image(_display_object("png")):
        def __init__(self, data=None, url=None, filename=None, format=None, **kwargs):
            super().__init__(data, url, filename)
            if isinstance(self.data, str) and format is None and filename is None:
                with open(self.data, "rb") as f:  # Image("plot.png")
                    self.filename, self.data = self.data, f.read()
            name = (self.filename or "").lower()
            self.format = format or ("jpeg" if name.endswith((".jpg", ".jpeg")) or
                                     (self.data or b"")[:2] == b"\xff\xd8" else "png")

        def _repr_png_(self):
            return self.data if self.format == "png" else None

        def _repr_jpeg_(self):
            return self.data if self.format in ("jpeg", "jpg") else None

    shim.Image, shim.DisplayObject = Image, _display_object("DisplayObject")
    shim.Pretty = _display_object("Pretty")
    shim.Pretty.__repr__ = lambda self: str(self.data)
    core = types.ModuleType("IPython.core")
    core.__path__ = []
    modules = {"IPython": top, "IPython.display": shim, "IPython.core": core}
    for name in ("IPython.core.display", "IPython.core.display_functions"):
        modules[name] = types.ModuleType(name)
        modules[name].__dict__.update((k, v) for k, v in vars(shim).items()
                                      if not k.startswith("__"))
    return modules


class IPythonShim(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """ipython_shim()'s modules for a cell that imports IPython where it is not installed: the
    last finder asked, so an installed IPython wins, and nothing is there until imported."""

    def __init__(self, display):
        self.display, self.modules = display, None

    def find_spec(self, name, path=None, target=None):
        if name not in ("IPython", "IPython.display", "IPython.core", "IPython.core.display",
                        "IPython.core.display_functions"):
            return None
        return importlib.util.spec_from_loader(name, self,
                                               is_package=name in ("IPython", "IPython.core"))

    def create_module(self, spec):
        if self.modules is None:
            self.modules = ipython_shim(self.display)
        return self.modules[spec.name]

    def exec_module(self, module):
        pass


class PatchingLoader(importlib.abc.Loader):
    """Runs a module as its own loader would, then hands it to `patch`."""

    def __init__(self, inner, patch):
        self.inner, self.patch = inner, patch

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.patch(module)

    def __getattr__(self, name):  # get_source, get_resource_reader, ...
        return getattr(self.inner, name)


class IPythonDisplayHook(importlib.abc.MetaPathFinder):
    """An installed IPython's display() prints when no IPython shell runs: this makes it the
    kernel's display() as its module is imported."""
    TARGETS = ("IPython.core.display_functions", "IPython.core.display")

    def __init__(self, display):
        self.display = display

    def find_spec(self, name, path=None, target=None):
        if name not in self.TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is not self and not isinstance(finder, IPythonShim) and \
                    hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = PatchingLoader(spec.loader, self.patch)
                    return spec
        return None

    def patch(self, module):
        if hasattr(module, "display"):
            module.display = self.display


# The matplotlib backend of the http mode's kernels (MPLBACKEND=module://rex_inline_backend):
# plt.show() and the end of a cell show each open figure as a PNG result and close it, as
# Jupyter's inline backend does. Outside a kernel (no display builtin) it draws nothing.
BACKEND_MODULE = "rex_inline_backend"
BACKEND_SOURCE = '''"""rex code-interpreter kernel's matplotlib backend (notebook_kernel.py)."""
import builtins

from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

FigureCanvas, FigureManager = FigureCanvasAgg, FigureManagerBase


def new_figure_manager(num, *args, FigureClass=Figure, **kwargs):
    return new_figure_manager_given_figure(num, FigureClass(*args, **kwargs))


def new_figure_manager_given_figure(num, figure):
    return FigureManagerBase(FigureCanvasAgg(figure), num)


def show(*args, **kwargs):
    flush_figures()


def flush_figures():
    display = getattr(builtins, "display", None)
    try:
        for manager in Gcf.get_all_fig_managers():
            if display is not None:
                display(manager.canvas.figure)
    finally:
        Gcf.destroy_all()
'''


class Kernel:
    def __init__(self):
        main = types.ModuleType("__main__")  # so pickle & co. find what cells define
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        if sys.path:
            sys.path[0] = ""  # cells import from the working directory, like a notebook
        self.ns, self.count, self.busy = main.__dict__, 0, False
        self.emit, self.results = None, None  # of the running cell
        builtins.display = self.display
        sys.meta_path.insert(0, IPythonDisplayHook(self.display))
        sys.meta_path.append(IPythonShim(self.display))

    def on_sigint(self, signum, frame):
        if self.busy:  # idle kernels ignore SIGINT
            raise KeyboardInterrupt

    def display(self, *objs, raw=False, **kwargs):
        """display(obj, ...): each object as a result of the running cell (not its main one)."""
        for obj in objs:
            data = obj if raw and isinstance(obj, dict) else mime_data(obj)
            if self.emit is not None:
                self.emit(dict(type="result", is_main_result=False, **result_fields(data)))
            elif self.results is not None and isinstance(data.get("text/plain"), str):
                self.results.append({"type": "text", "text": data["text/plain"]})

    def run(self, code, emit=None, env_vars=None, fd_mark=None):
        """Runs a cell. Without `emit`, answers the `run` client's reply; with it, hands E2B's
        NDJSON objects to emit() as they happen (all but the closing end_of_execution)."""
        self.count += 1
        name = "<cell %d>" % self.count
        if emit is not None:
            emit({"type": "number_of_executions", "execution_count": self.count})
            out = Capture(lambda text: emit({"type": "stdout", "text": text,
                                             "timestamp": timestamp()}))
            err = Capture(lambda text: emit({"type": "stderr", "text": text,
                                             "timestamp": timestamp()}))
        else:
            out, err = Capture(), Capture()
        results, error = [], None
        self.emit, self.results = emit, results
        code = dedent_cell(code)
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
            saved_env = {k: os.environ.get(k) for k in env_vars or {}}
            sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO()
            try:
                os.environ.update(env_vars or {})
                self.busy = True
                exec(body, self.ns)
                if last is not None:
                    value = eval(last, self.ns)
                    if value is not None:
                        self.ns["_"] = value
                        if emit is None:
                            results.append({"type": "text", "text": repr(value)})
                        elif not code.rstrip().endswith(";"):  # IPython's way to hide it
                            emit(dict(type="result", is_main_result=True,
                                      **result_fields(mime_data(value))))
                backend = sys.modules.get(BACKEND_MODULE)
                if emit is not None and backend is not None:
                    backend.flush_figures()  # figures left open, as the inline backend
            except BaseException as e:  # SystemExit and KeyboardInterrupt included
                self.busy = False
                error = describe(e)
            finally:
                self.busy = False
                out.finish()
                err.finish()
                sys.stdout, sys.stderr, sys.stdin = saved
                for key, value in saved_env.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
        self.emit = self.results = None
        if emit is not None:
            if error is not None:
                emit(dict(type="error", **error))
            if fd_mark:  # after what the cell wrote to the file descriptors themselves
                for stream, fd in ((sys.__stdout__, 1), (sys.__stderr__, 2)):
                    try:
                        if stream is not None:
                            stream.flush()
                        os.write(fd, ("%s\n" % fd_mark).encode())
                    except (OSError, ValueError):
                        pass
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
            if not isinstance(request, dict):
                request = {}
            box = {"done": threading.Event()}
            if request.get("stream"):
                box["events"] = queue.Queue()
            jobs.put((request, box))
            if "events" in box:  # relayed as the cell goes; a client gone just stops hearing
                alive = True
                while True:
                    event = box["events"].get()
                    if alive:
                        try:
                            send_frame(conn, event)
                        except OSError:
                            alive = False
                    if event["type"] == "end_of_execution":
                        break
                box["done"].wait()
                if not alive:
                    return
                continue
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


def exit_on_stdin_eof(terminate):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    try:
        while os.read(0, 1 << 16):
            pass
    except OSError:
        pass
    terminate(None, None)


def serve(path, exit_with_stdin=False):
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
    if exit_with_stdin:
        threading.Thread(target=exit_on_stdin_eof, args=(terminate,), daemon=True).start()
    with open(pidfile + ".new", "w") as f:
        f.write("%d\n" % os.getpid())
    os.replace(pidfile + ".new", pidfile)
    os.replace(staging, path)
    while True:
        request, box = jobs.get()
        code, events = request.get("code"), box.get("events")
        env_vars = request.get("env_vars") if events is not None else None
        try:
            box["reply"] = kernel.run(code if isinstance(code, str) else "",
                                      events.put if events is not None else None,
                                      env_vars if isinstance(env_vars, dict) else None,
                                      request.get("fd_mark") if events is not None else None)
        except KeyboardInterrupt:  # a SIGINT that landed on the very edge of a cell
            kernel.busy, kernel.emit, kernel.results = False, None, None
            sys.stdout, sys.stderr, sys.stdin = sys.__stdout__, sys.__stderr__, sys.__stdin__
            error = {"name": "KeyboardInterrupt", "value": "", "traceback": "KeyboardInterrupt\n"}
            box["reply"] = {"stdout": "", "stderr": "", "results": [], "execution_count": kernel.count,
                            "error": error}
            if events is not None:
                events.put(dict(type="error", **error))
        if events is not None:
            events.put({"type": "end_of_execution"})
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


# ---- mode http: E2B's code-interpreter API ----
#
# Threads: the HTTP server runs each request in its own thread. A context's executions take
# turns (Turn, first come first served); its process fields change under Context.lock. Each
# process output pipe has a reader thread that hands lines to the running execution's queue.

KEEPALIVE = 5.0  # seconds without a line before {"type": "keepalive"} (E2B's server: the same)
REINTERRUPT = 2.0  # seconds between SIGINTs to a cell whose client went away
BASH_GIVE_UP = 10.0  # seconds after the first SIGINT before an unresponsive shell is killed
FD_GRACE = 2.0  # seconds to wait for a kernel's fd marks after its cell ended
START_TIMEOUT = 30.0
LANGUAGES = {"python": "python", "python3": "python", "py": "python",
             "bash": "bash", "sh": "bash", "shell": "bash"}


class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def exited_status(proc):
    rc = proc.poll()
    if rc is None:
        return "still running"
    return "killed by signal %d" % -rc if rc < 0 else "exit code %d" % rc


class Turn:
    """First come, first served mutual exclusion: a context runs one execution at a time."""

    def __init__(self):
        self.cond, self.waiting = threading.Condition(), collections.deque()

    def acquire(self, give_up):
        """True once it is this caller's turn; False if give_up() said so while it waited."""
        me = object()
        with self.cond:
            self.waiting.append(me)
            while self.waiting[0] is not me:
                self.cond.wait(0.5)
                if self.waiting[0] is not me and give_up():
                    self.waiting.remove(me)
                    self.cond.notify_all()
                    return False
        return True

    def release(self):
        with self.cond:
            self.waiting.popleft()
            self.cond.notify_all()


class Execution:
    """One /execute's NDJSON response, written as HTTP chunks; notices the client leaving."""

    def __init__(self, handler):
        self.handler, self.gone, self.last = handler, False, time.monotonic()
        self.sent = {"stdout": 0, "stderr": 0}
        self.out = queue.Queue()  # (kind, ...) from the context's reader threads

    def send(self, obj):
        if self.gone:
            return
        line = json.dumps(obj, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"
        try:
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.handler.wfile.flush()
            self.last = time.monotonic()
        except OSError:
            self.gone = True

    def output(self, kind, text):
        """A line of a process's own output, at most CAP bytes a stream an execution."""
        size = len(text.encode("utf-8", "backslashreplace"))
        if self.sent[kind] >= CAP:
            return
        self.sent[kind] += size
        if self.sent[kind] > CAP:
            text = TRUNCATED + "\n"
        self.send({"type": kind, "text": text, "timestamp": timestamp()})

    def error(self, name, value, trace=""):
        self.send({"type": "error", "name": name, "value": value, "traceback": trace})

    def keepalive(self):
        if time.monotonic() - self.last >= KEEPALIVE:
            self.send({"type": "keepalive"})

    def client_gone(self):
        if not self.gone:
            sock = self.handler.connection
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable and not sock.recv(1, socket.MSG_PEEK):
                    self.gone = True
            except (OSError, ValueError):
                self.gone = True
        return self.gone

    def finish(self):
        self.send({"type": "end_of_execution"})
        if not self.gone:
            try:
                self.handler.wfile.write(b"0\r\n\r\n")
                self.handler.wfile.flush()
            except OSError:
                self.gone = True
        if self.gone:
            self.handler.close_connection = True


def pump(ctx, proc, stream, kind):
    """Reader thread of one output pipe of a context's process: lines to the running execution
    (or to this server's stderr between executions); ctx.mark in a line ends the turn."""
    while True:
        raw = stream.readline(LINE_CHUNK)
        if not raw:
            break
        text = raw.decode("utf-8", "replace")
        items = []
        if ctx.mark in text:
            before, _, rest = text.partition(ctx.mark)
            if before:
                items.append(("line", kind, before))
            items.append(("mark", kind, rest.strip()))
        else:
            items.append(("line", kind, text))
        with ctx.lock:
            out = ctx.out if ctx.proc is proc else None
        for item in items:
            if out is not None:
                out.put(item)
            elif item[0] == "line":
                ctx.log(item[2])
    stream.close()
    with ctx.lock:
        out = ctx.out if ctx.proc is proc else None
    if out is not None:
        out.put(("eof", kind))


class Context:
    """A code context: its language, working directory and the process that keeps its state."""

    def __init__(self, service, language, cwd):
        self.service, self.language, self.cwd = service, language, cwd
        self.id = str(uuid.uuid4())
        # turn: executions; life: starting and stopping the process; lock: the fields below.
        self.turn, self.life, self.lock = Turn(), threading.Lock(), threading.Lock()
        self.proc, self.out, self.removed = None, None, False
        self.mark = "__rex_end_%s:" % uuid.uuid4().hex  # in the process's output: a turn ended
        self.tail = collections.deque(maxlen=20)  # the last lines it wrote between executions

    def info(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def log(self, text):
        self.tail.append(text)
        sys.stderr.write("[%s %s] %s" % (self.language, self.id[:8], text))
        sys.stderr.flush()

    def spawn(self, argv, env):
        proc = subprocess.Popen(argv, cwd=self.cwd, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        for stream, kind in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            threading.Thread(target=pump, args=(self, proc, stream, kind), daemon=True).start()
        return proc

    def stop(self):
        """Ends the process (a running execution then reports it); the next turn starts anew."""
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is not None:
            self.kill(proc)
            proc.wait()
            try:
                proc.stdin.close()
            except OSError:
                pass

    def restart(self):
        with self.life:
            self.stop()
            self.start()

    def current(self, proc):
        """The running process, started anew if `proc` (what the caller saw) has ended."""
        with self.life:
            with self.lock:
                if self.proc is not None and self.proc is not proc:
                    return self.proc
            if proc is None or proc.poll() is not None:
                self.stop()
                self.start()
            with self.lock:
                return self.proc

    def replaced(self, proc):
        with self.lock:
            return self.proc is not proc

    def kill(self, proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def execute(self, run, code, env_vars):
        if not self.turn.acquire(give_up=run.client_gone):
            run.finish()
            return
        try:
            if self.removed:
                run.error("ContextNotFound", "context %s was removed" % self.id)
            else:
                self.run_turn(run, code, env_vars)
        except HttpError as e:
            run.error("ContextError", str(e))
        finally:
            with self.lock:
                if self.out is run.out:
                    self.out = None
            self.turn.release()
        run.finish()


class PythonContext(Context):
    """A Python context: a `serve` kernel of this very file, its fds 1 and 2 on pipes."""

    def start(self):
        sock = os.path.join(self.service.state, "k-%s.sock" % self.id[:8])
        env = dict(os.environ, MPLBACKEND="module://" + BACKEND_MODULE,
                   PYTHONPATH=os.pathsep.join(
                       p for p in (self.service.state, os.environ.get("PYTHONPATH")) if p))
        proc = self.spawn([sys.executable, os.path.abspath(__file__), "serve", sock,
                           "--exit-on-stdin-eof"], env)
        deadline = time.monotonic() + START_TIMEOUT
        while not (os.path.exists(sock) and os.path.exists(sock + ".pid")):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill(proc)
                proc.wait()
                raise HttpError(500, "the Python kernel did not start (%s): %s"
                                % (exited_status(proc), "".join(self.tail).strip()))
            time.sleep(0.01)
        with self.lock:
            self.proc, self.sock = proc, sock

    def run_turn(self, run, code, env_vars):
        with self.lock:
            proc = self.proc
        proc = self.current(proc)  # a kernel that died is replaced by one without state
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.sock)
            with self.lock:
                self.out = run.out
            send_frame(conn, {"code": code, "stream": True, "env_vars": env_vars or {},
                              "fd_mark": self.mark})
        except OSError as e:
            conn.close()
            self.stop()
            run.error("KernelDied", "the Python kernel could not be reached: %s" % e)
            return
        threading.Thread(target=self.read_frames, args=(conn, run.out), daemon=True).start()
        ended, marks, interrupted = None, set(), None
        while True:
            try:
                item = run.out.get(timeout=0.2)
            except queue.Empty:
                item = None
            if item is not None and item[0] == "frame":
                if item[1].get("type") == "end_of_execution":
                    ended = time.monotonic()
                else:
                    run.send(item[1])
            elif item is not None and item[0] == "line":
                run.output(item[1], item[2])
            elif item is not None and item[0] == "mark":
                marks.add(item[1])
            elif item is not None and item[0] == "closed" and ended is None:
                if self.replaced(proc):
                    run.error("ContextRestarting", "Context was restarted")
                else:
                    proc.wait()
                    run.error("KernelDied", "the Python kernel ended while running the cell (%s); "
                              "the next execution starts a new one, without the state of "
                              "earlier ones" % exited_status(proc))
                return
            if ended is not None and (len(marks) == 2 or time.monotonic() - ended > FD_GRACE):
                return
            if run.client_gone() and ended is None:
                now = time.monotonic()
                if interrupted is None or now - interrupted >= REINTERRUPT:
                    interrupted = now  # the cell stops; the kernel and its state stay
                    try:
                        os.kill(proc.pid, signal.SIGINT)
                    except OSError:
                        pass
            run.keepalive()

    @staticmethod
    def read_frames(conn, out):
        buf = bytearray()
        with conn:
            while True:
                try:
                    frame = recv_frame(conn, buf)
                except (OSError, ValueError):
                    out.put(("closed",))
                    return
                out.put(("frame", frame))
                if frame.get("type") == "end_of_execution":
                    return

    def kill(self, proc):
        try:
            proc.terminate()  # the kernel removes its socket files
            proc.wait(2)
        except subprocess.TimeoutExpired:
            pass
        super().kill(proc)  # and what its cells started


BASH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class BashContext(Context):
    """A bash context: one interactive bash (no rc files, no prompt) fed on its stdin; cells are
    sourced from a file, so a SIGINT ends the cell and the shell with its state stays."""

    def start(self):
        self.cell_file = os.path.join(self.service.state, "cell-%s.sh" % self.id[:8])
        env = dict(os.environ, PS1="", PS2="", PS0="", PROMPT_COMMAND="", HISTFILE="/dev/null")
        try:
            proc = self.spawn(["bash", "--norc", "--noprofile", "--noediting", "-i"], env)
        except OSError as e:
            raise HttpError(500, "bash could not be started: %s" % e)
        init = queue.Queue()
        with self.lock:
            self.proc, self.out, self.count = proc, init, 0
        try:
            self.greet(proc, init)
        finally:
            with self.lock:
                if self.out is init:
                    self.out = None

    def greet(self, proc, init):
        self.send_line(proc, "set +H; trap - INT; " + self.end_line("0"))
        marks, deadline = set(), time.monotonic() + START_TIMEOUT
        while len(marks) < 2:  # its greeting ("no job control in this shell") is dropped
            try:
                item = init.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                item = ("eof",)
            if item[0] == "eof":
                self.stop()
                raise HttpError(500, "bash did not start (%s)" % exited_status(proc))
            if item[0] == "mark":
                marks.add(item[1])

    def end_line(self, status):
        return "printf '%%s%%s\\n' %s %s; printf '%%s\\n' %s >&2" % (
            shlex.quote(self.mark), status, shlex.quote(self.mark))

    @staticmethod
    def send_line(proc, line):
        try:
            proc.stdin.write(line.encode("utf-8", "surrogateescape") + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it ended: its readers report that

    def run_turn(self, run, code, env_vars):
        for key in env_vars or {}:
            if not BASH_NAME.match(key):
                run.error("InvalidEnvVar", "%r is not a valid bash variable name" % key)
                return
        with self.lock:
            proc = self.proc
        proc = self.current(proc)
        self.count += 1
        run.send({"type": "number_of_executions", "execution_count": self.count})
        with open(self.cell_file, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(code)
        keys = sorted(env_vars or {})
        save = "; ".join("__rex_env_%s=$(declare -p %s 2>/dev/null); export %s=%s"
                         % (k, k, k, shlex.quote(env_vars[k])) for k in keys)
        restore = "".join("unset %s; if [ -n \"$__rex_env_%s\" ]; then eval \"$__rex_env_%s\"; "
                          "fi; unset __rex_env_%s; " % (k, k, k, k) for k in keys)
        with self.lock:
            self.out = run.out
        if save:
            self.send_line(proc, save)
        # On lines of their own: a SIGINT abandons the line that runs, not the ones after it.
        self.send_line(proc, ". %s < /dev/null" % shlex.quote(self.cell_file))
        self.send_line(proc, "__rex_status=$?; %s%s" % (restore, self.end_line("$__rex_status")))
        marks, status, eof = set(), None, set()
        first_sigint = last_sigint = None  # once the client went away
        while len(marks) < 2:
            try:
                item = run.out.get(timeout=0.2)
            except queue.Empty:
                item = None
            if item is not None and item[0] == "line":
                run.output(item[1], item[2])
            elif item is not None and item[0] == "mark":
                marks.add(item[1])
                if item[1] == "stdout":
                    status = item[2]
            elif item is not None and item[0] == "eof":
                eof.add(item[1])
                if len(eof) == 2:
                    proc.wait()
                    run.error("ShellExited", "bash ended (%s); the next execution starts a "
                              "new shell in %s" % (exited_status(proc), self.cwd))
                    return
            if self.replaced(proc):
                run.error("ContextRestarting", "Context was restarted")
                return
            if run.client_gone():
                now = time.monotonic()
                if first_sigint is not None and now - first_sigint > BASH_GIVE_UP:
                    with self.life:
                        if not self.replaced(proc):
                            self.stop()  # it ignores SIGINT: its state goes
                    return
                if last_sigint is None or now - last_sigint >= REINTERRUPT:
                    first_sigint = first_sigint or now
                    last_sigint = now
                    try:
                        os.killpg(proc.pid, signal.SIGINT)
                    except OSError:
                        pass
            run.keepalive()
        if status not in (None, "", "0"):
            run.error("ExitCodeError", status)  # the value is the exit code, as E2B's bash kernel

    def kill(self, proc):
        super().kill(proc)  # the shell's process group: what the cell started too


class CodeInterpreter:
    """The contexts of one sandbox and the default one of each language."""

    def __init__(self, cwd):
        self.cwd = cwd
        self.state = tempfile.mkdtemp(prefix="rex-ci-")  # sockets, cell files, the mpl backend
        with open(os.path.join(self.state, BACKEND_MODULE + ".py"), "w") as f:
            f.write(BACKEND_SOURCE)
        self.lock = threading.Lock()
        self.contexts, self.defaults = collections.OrderedDict(), {}

    @staticmethod
    def language(name):
        key = (name or "python").strip().lower()
        if key not in LANGUAGES:
            raise HttpError(400, "unsupported language %r: this code interpreter runs python "
                            "and bash" % name)
        return LANGUAGES[key]

    def create(self, language, cwd=None):
        language, cwd = self.language(language), cwd or self.cwd
        if not os.path.isdir(cwd):
            raise HttpError(400, "cwd %r is not a directory" % cwd)
        ctx = (PythonContext if language == "python" else BashContext)(self, language, cwd)
        ctx.start()
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def default(self, language):
        language = self.language(language)
        with self.lock:
            ctx = self.contexts.get(self.defaults.get(language, ""))
        if ctx is None:
            ctx = self.create(language)
            with self.lock:
                if self.defaults.get(language) in self.contexts:  # a racing request made one
                    other = self.contexts[self.defaults[language]]
                else:
                    self.defaults[language], other = ctx.id, None
            if other is not None:
                self.remove(ctx.id)
                ctx = other
        return ctx

    def get(self, context_id):
        with self.lock:
            ctx = self.contexts.get(context_id)
        if ctx is None:
            raise HttpError(404, "Context %s not found" % context_id)
        return ctx

    def remove(self, context_id):
        ctx = self.get(context_id)
        with self.lock:
            self.contexts.pop(context_id, None)
        ctx.removed = True
        with ctx.life:
            ctx.stop()

    def close(self):
        with self.lock:
            contexts = list(self.contexts.values())
        for ctx in contexts:
            ctx.stop()
        shutil.rmtree(self.state, ignore_errors=True)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # An answer is several small writes (its head, then each NDJSON line): without this,
        # Nagle's algorithm holds each write for the client's delayed ACK, 40 ms a time.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    server_version = "rex-code-interpreter"

    def log_message(self, format, *args):  # requests are not logged; failures are
        pass

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def do_OPTIONS(self):  # CORS preflight, as E2B's server allows every origin
        self.reply(204, b"", None)

    def route(self, method):
        service, self.streaming = self.server.service, False
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        parts = path.strip("/").split("/")
        try:
            if path == "/health" and method == "GET":
                return self.json(200, "OK")
            if path == "/execute" and method == "POST":
                return self.execute(service, self.body())
            if path == "/contexts" and method == "GET":
                with service.lock:
                    listed = [ctx.info() for ctx in service.contexts.values()]
                return self.json(200, listed)
            if path == "/contexts" and method == "POST":
                body = self.body()
                return self.json(200, service.create(self.field(body, "language"),
                                                     self.field(body, "cwd")).info())
            if len(parts) == 3 and parts[0] == "contexts" and parts[2] == "restart" and \
                    method == "POST":
                service.get(parts[1]).restart()
                return self.json(200, None)
            if len(parts) == 2 and parts[0] == "contexts" and method == "DELETE":
                service.remove(parts[1])
                return self.json(200, None)
            known = path in ("/health", "/execute", "/contexts") or parts[0] == "contexts"
            raise HttpError(405 if known else 404, "Method Not Allowed" if known else "Not Found")
        except HttpError as e:
            self.reply(e.status, str(e).encode("utf-8"), "text/plain; charset=utf-8")
        except Exception as e:  # a bug: said, logged, and the server goes on
            traceback.print_exc()
            if not self.streaming:
                self.reply(500, ("%s: %s" % (type(e).__name__, e)).encode("utf-8"),
                           "text/plain; charset=utf-8")
            self.close_connection = True

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not data.strip():
            return {}
        try:
            body = json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise HttpError(422, "the body is not JSON: %s" % e)
        if not isinstance(body, dict):
            raise HttpError(422, "the body must be a JSON object")
        return body

    @staticmethod
    def field(body, name, kind=str):
        value = body.get(name)
        if value is not None and not isinstance(value, kind):
            raise HttpError(422, "%s must be a %s" % (name, "string" if kind is str else "object"))
        return value

    def execute(self, service, body):
        code = self.field(body, "code")
        if code is None:
            raise HttpError(422, "code is required")
        env_vars = self.field(body, "env_vars", dict) or {}
        if not all(isinstance(k, str) and isinstance(v, str) and k and "=" not in k and
                   "\x00" not in k + v for k, v in env_vars.items()):
            raise HttpError(422, "env_vars must map names to strings")
        context_id, language = self.field(body, "context_id"), self.field(body, "language")
        if context_id and language:
            raise HttpError(400, "Only one of context_id or language can be provided")
        ctx = service.get(context_id) if context_id else service.default(language)
        self.streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.flush()
        ctx.execute(Execution(self), code, env_vars)

    def json(self, status, value):
        self.reply(status, json.dumps(value).encode("utf-8"), "application/json")

    def reply(self, status, data, content_type):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.end_headers()
        self.wfile.write(data)


def serve_http(host, port):
    service = CodeInterpreter(os.getcwd())
    httpd = http.server.ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads, httpd.service = True, service

    def terminate(signum, frame):
        service.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    try:
        service.default("python")  # ready before the first request, as E2B's server
    except HttpError as e:
        service.close()
        sys.exit("notebook_kernel: %s" % e)
    sys.stdout.write("rex code interpreter listening on http://%s:%d\n"
                     % (host, httpd.server_address[1]))
    sys.stdout.flush()
    httpd.serve_forever()


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="rex notebook kernel (serve), its client (run), and E2B's "
                    "code-interpreter API (http)")
    parser.add_argument("mode", choices=["serve", "run", "http"])
    parser.add_argument("socket", nargs="?", help="serve, run: path of the kernel's unix socket")
    parser.add_argument("--timeout", type=float, help="run: seconds before the cell is interrupted")
    parser.add_argument("--exit-on-stdin-eof", action="store_true",
                        help="serve: exit when stdin is closed")
    parser.add_argument("--host", default="0.0.0.0", help="http: address to listen on")
    parser.add_argument("--port", type=int, default=49999, help="http: port (0: a free one)")
    args = parser.parse_args(argv)
    if args.timeout is not None and not args.timeout > 0:
        parser.error("--timeout must be a positive number of seconds")
    if args.mode != "http" and not args.socket:
        parser.error("%s needs the kernel's socket path" % args.mode)
    if args.mode == "serve":
        serve(args.socket, args.exit_on_stdin_eof)
    elif args.mode == "run":
        sys.exit(client(args.socket, args.timeout))
    else:
        serve_http(args.host, args.port)


if __name__ == "__main__":
    main()
