#!/usr/bin/env python3
"""A stateful fake of Modal's control plane, for testing clients of Modal's gRPC API on loopback.

Run it with the Python of build/modal-env (scripts/common.sh's rex_modal_env), which has the `modal`
package: the fake serves `modal.client.ModalClient` and `modal.task_command_router.TaskCommandRouter`
by subclassing the grpclib base classes generated into that package (modal_proto.*_grpc), so it
speaks exactly the schema of the pinned SDK, message names and field numbers included.

    build/modal-env/bin/python tests/modal/modal_fake.py --state-dir DIR \
        --token-id ak-test --token-secret as-test [--port 0] [--fail-first N] ...

Once listening (plain-text HTTP/2, i.e. h2c, on 127.0.0.1) it prints one line on stdout,

    READY <grpc-port> <state-dir>/ca.pem

and logs every call on stderr. Point a client at it with MODAL_SERVER_URL=http://127.0.0.1:<port>
and the same token pair. SIGTERM or SIGINT: every sandbox's process group is killed, the state file
is written a last time, and the fake exits with status 0.

What it implements (everything else answers UNIMPLEMENTED, and says so on stderr):
  ClientHello, AuthTokenGet, AppGetOrCreate, EnvironmentGetOrCreate, SecretGetOrCreate,
  ImageGetOrCreate, ImageJoinStreaming, MountBatchedCheckExistence, BlobCreate (+ an HTTP PUT
  endpoint for the upload), MountPutFile, MountGetOrCreate, SandboxCreate / SandboxCreateV2,
  SandboxGetTaskId / V2, SandboxGetTunnels / V2, SandboxWait / V2, SandboxTerminate / V2,
  SandboxList (by app, tags, finished or not), SandboxGetLogs, SandboxGetCommandRouterAccess,
  TaskGetCommandRouterAccess; and, on the same port,
  the task command router's TaskExecStart / TaskExecStdioRead / TaskExecWait / TaskExecPoll and
  SandboxStdioReadV2 (what `Sandbox.exec` and V2's `sandbox.stdout.read()` use).

Metadata it requires (as Modal's SDKs send it):
  - every ModalClient call: x-modal-token-id and x-modal-token-secret equal to --token-id and
    --token-secret (else UNAUTHENTICATED, which the Python SDK raises as modal.exception.AuthError),
    and x-modal-client-type (a number) and x-modal-client-version (else INVALID_ARGUMENT);
  - the V2 sandbox calls (SandboxCreateV2, SandboxGet{TaskId,Tunnels}V2, SandboxWaitV2,
    SandboxTerminateV2, SandboxGetCommandRouterAccess) also x-modal-auth-token: a JWT from this
    fake's AuthTokenGet that has not expired (else UNAUTHENTICATED);
  - router calls: `authorization: Bearer <jwt>` with a JWT from one of the router-access answers.
  The JWTs are HS256-signed with a key made at start; their payload carries `exp` (the Python SDK
  decodes it to know when to fetch a new one; --auth-token-ttl sets the lifetime).

What a "sandbox" is here. No container, no image: the image's registry tag is only recorded (and
"built" instantly, with one log line, by ImageJoinStreaming; an image whose commands name
"fake-fail" fails to build). SandboxCreate(V2) starts the
definition's entrypoint_args on this host as a real process, in its own session and so its own
process group, with:
  - its own directory <state-dir>/sandboxes/<sandbox-id>/: root/ stands for the container's "/",
    stdout.log and stderr.log collect the entrypoint's output (SandboxGetLogs and the router serve
    them). The working directory is root/ plus the definition's workdir, if any.
  - the environment: PATH and LANG of the fake, HOME=root/root, then the definition's
    environment_variables, then the secrets (V1: definition.secret_ids; V2: secret_sources, inline
    `env` maps and secret ids alike). Nothing else of the fake's environment is passed on.
  - the files of its mounts (definition.mount_ids) written under root/, with their mode, e.g. the
    MountFile "/rex/rex-server" becomes <dir>/root/rex/rex-server.
  - its own loopback address, 127.a.b.c (from 127.R.0.2 up, R random for each fake so that fakes
    running side by side keep apart, one per sandbox, chosen so that every open port is free on
    it): the sandbox's servers keep their container ports, on that address.
Because it is the host's file system and network, the entrypoint's argv is REWRITTEN before the
exec, and only in these two ways (nothing else is: not paths inside a `sh -c` string, not paths
the program opens by itself, not a server's default listening address):
  1. every argument that is exactly the path of a mounted file (e.g. argv[0] "/rex/rex-server")
     becomes that file's path under root/;
  2. if the definition has open ports, the value of `--host X` / `--host=X` (whatever X is:
     0.0.0.0, ::, localhost, ...) becomes the sandbox's own address. A server that takes no --host
     and listens on 0.0.0.0 still works (until two sandboxes want the same port); one that listens
     only on 127.0.0.1 is not reachable through its tunnel.
The rewritten argv, the address and the directory are in sandboxes.json (below) and on stderr.

Tunnels. For each open port (definition.open_ports, i.e. `encrypted_ports=` / `unencrypted_ports=`
in the Python SDK) the fake starts a TLS-terminating forwarder on 127.0.0.1:<ephemeral> that pipes
each connection, as plain TCP, to <sandbox address>:<container port>, the way Modal's edge
terminates TLS and forwards to the container. The certificate is issued by a CA generated (with the
openssl command, an EC P-256 key) at every start into the state directory: <state-dir>/ca.pem (key and leaf in <state-dir>/tls/); the leaf's
subjectAltName is IP:127.0.0.1 and DNS:localhost. TunnelData{host "127.0.0.1", port <forwarder>,
container_port}, i.e. tunnel URL https://127.0.0.1:<forwarder>. Unencrypted ports get, besides,
a raw TCP forwarder as unencrypted_host/unencrypted_port. SandboxGetTunnels(V2) answers at once
(result SUCCESS) while the sandbox runs; once it has finished it fails with FAILED_PRECONDITION
"Sandbox has already terminated" (what Modal's own test servicer answers for a finished sandbox's
stdin; the real service's answer could not be checked). With --create-returns-tunnels,
SandboxCreateV2's answer carries the tunnels too (the Python SDK then skips SandboxGetTunnelsV2).

Lifecycle. The entrypoint exiting ends the sandbox: result SUCCESS (exit code 0) or FAILURE (its
exit code; 128+N for a signal N), and what is left of its process group is killed. timeout_secs
(300 when 0, as Modal's default) is enforced: past it the process group is killed and the result
is TIMEOUT (the Python SDK's returncode 124). SandboxTerminate(V2) kills it: TERMINATED (137).
SandboxWait(V2) honours its `timeout` (0 = poll; capped at 60 s) and answers an empty result while
the sandbox runs. V1's SandboxGetTaskId answers no task id for --task-id-delay seconds (the SDK
polls), then "ta-..."; V2's SandboxCreateV2 returns the task id at once. Sandbox ids have the
shapes the Python SDK tells apart: V1 "sb-" + 22 base62 characters, V2 "sb-" + a 26-character ULID.

Debugging without RPCs: <state-dir>/sandboxes.json is rewritten on every change (create, exit,
terminate, timeout, shutdown, and shortly after each kill) with, per sandbox: id, version, state
("running" or "finished"), status, exit code, pid, pgid, the pids still alive in its process group,
address, rewritten argv, directory, tunnels.

Test hooks: --fail-first N makes the first N SandboxCreate/SandboxCreateV2 calls (counted
together, after authentication) fail with UNAVAILABLE, which clients should retry.
--task-id-delay, --auth-token-ttl and --create-returns-tunnels as above. --list-delay SECONDS holds
each SandboxList that long before answering; sandboxes.json counts the SandboxList calls begun
("lists_begun") and those whose answer reached a client still connected ("lists_answered").

Uploads: BlobCreate hands out http://127.0.0.1:<port>/blob/<id> (plain HTTP, served here; Modal
hands out presigned HTTPS URLs of S3 or R2) in both the current (blob_ids + upload_urls) and the
older (blob_id + upload_url) fields; a PUT there must carry exactly the announced length and MD5,
and is answered with ETag "<md5 hex>". Content is kept in memory, addressed by SHA-256.

Not modelled (know this before trusting a green run): no isolation at all (the entrypoint runs as
the fake's user, sees the host's files, network and the image's programs are the host's: a
command must exist on this host or come from a mount); resources, block_network, network access
lists, idle_timeout_secs, GPUs, volumes, PTYs are ignored; error texts are the fake's own (Modal's
wording of e.g. UNAUTHENTICATED could not be checked); state lives in memory, so a restarted fake
knows no apps, images or mounts; if the fake itself is SIGKILLed, only each sandbox's main process
dies with it (PR_SET_PDEATHSIG), not the rest of its process group.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ctypes
import hashlib
import hmac
import json
import os
import random
import secrets as pysecrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import traceback

from aiohttp import web
from grpclib import GRPCError, Status
from grpclib.server import Server

from modal_proto import api_grpc, api_pb2
from modal_proto import task_command_router_grpc as router_grpc
from modal_proto import task_command_router_pb2 as router_pb2

GR = api_pb2.GenericResult
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
STATUS_NAMES = {
    GR.GENERIC_STATUS_SUCCESS: "success",
    GR.GENERIC_STATUS_FAILURE: "failure",
    GR.GENERIC_STATUS_TERMINATED: "terminated",
    GR.GENERIC_STATUS_TIMEOUT: "timeout",
}
DEFAULT_SANDBOX_TIMEOUT = 300  # Modal's default when the definition says 0
MAX_WAIT = 60.0  # cap on a SandboxWait / streaming long poll

_libc = ctypes.CDLL(None, use_errno=True)


def log(msg: str) -> None:
    t = time.strftime("%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"
    print(f"[modal-fake {t}] {msg}", file=sys.stderr, flush=True)


def modal_id(prefix: str) -> str:
    return f"{prefix}-" + "".join(pysecrets.choice(BASE62) for _ in range(22))


def ulid() -> str:
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def summary(msg) -> str:
    """One line of a request for the log, without the bytes of an upload."""
    if msg is None:
        return ""
    if isinstance(msg, api_pb2.MountPutFileRequest) and msg.WhichOneof("data_oneof") == "data":
        return f'sha256_hex: "{msg.sha256_hex}" data: <{len(msg.data)} bytes>'
    # Secret values stay out of the log.
    if isinstance(msg, (api_pb2.SecretGetOrCreateRequest, api_pb2.SandboxCreateV2Request)):
        copy = type(msg)()
        copy.CopyFrom(msg)
        maps = [copy.env_dict] if isinstance(copy, api_pb2.SecretGetOrCreateRequest) else (
            [copy.ephemeral_secrets.contents] + [s.env.contents for s in copy.secret_sources])
        for m in maps:
            for k in list(m.keys()):
                m[k] = "***"
        msg = copy
    text = " ".join(str(msg).split())
    return text if len(text) <= 600 else text[:600] + " ..."


def child_setup() -> None:
    # In the child, after setsid: die with the fake even if it is SIGKILLed (PR_SET_PDEATHSIG).
    _libc.prctl(1, signal.SIGKILL)


def alive_pids(pgid: int | None) -> list[int]:
    """Processes of process group pgid that have not exited (zombies excluded)."""
    if not pgid:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(entry))
    return sorted(pids)


def kill_group(pgid: int | None) -> None:
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def make_tls(state_dir: str) -> tuple[str, ssl.SSLContext]:
    """A fresh CA (<state-dir>/ca.pem) and a leaf for 127.0.0.1/localhost signed by it."""
    tls = os.path.join(state_dir, "tls")
    shutil.rmtree(tls, ignore_errors=True)
    os.makedirs(tls)
    ca_key, ca_pem = os.path.join(tls, "ca.key"), os.path.join(state_dir, "ca.pem")
    key, csr, crt = (os.path.join(tls, n) for n in ("tunnel.key", "tunnel.csr", "tunnel.pem"))
    ext = os.path.join(tls, "leaf.ext")
    with open(ext, "w") as f:
        f.write(
            "basicConstraints = critical, CA:FALSE\n"
            "keyUsage = critical, digitalSignature\n"
            "extendedKeyUsage = serverAuth\n"
            "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
            "subjectKeyIdentifier = hash\n"
            "authorityKeyIdentifier = keyid\n"
        )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", ca_pem, "-days", "30",
         "-subj", "/CN=rex modal-fake tunnel CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["openssl", "req", "-new", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
         "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "30",
         "-extfile", ext, "-out", crt],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"modal-fake: {' '.join(cmd[:3])} failed: {done.stderr.strip()}")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    return ca_pem, ctx


class Forwarder:
    """Listens on 127.0.0.1:<ephemeral> (TLS when ssl_ctx is given) and pipes each connection to
    target as plain TCP."""

    def __init__(self, target: tuple[str, int], ssl_ctx: ssl.SSLContext | None):
        self.target, self.ssl_ctx = target, ssl_ctx
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_ctx)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader, writer) -> None:
        self.writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError as e:
            log(f"tunnel 127.0.0.1:{self.port} -> {self.target[0]}:{self.target[1]}: {e}")
            writer.close()
            self.writers.discard(writer)
            return
        self.writers.add(up_writer)

        async def pipe(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
                pass
            finally:
                try:
                    if dst.can_write_eof():
                        dst.write_eof()
                    else:
                        dst.close()
                except (OSError, RuntimeError):
                    pass

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        for w in (writer, up_writer):
            w.close()
            self.writers.discard(w)

    def close(self) -> None:
        if self.server:
            self.server.close()
        for w in list(self.writers):
            w.close()
        self.writers.clear()


class Exec:
    """A command run through the task command router, inside a sandbox's directory."""

    def __init__(self, exec_id: str, sandbox: "Sandbox"):
        self.id, self.sandbox = exec_id, sandbox
        self.proc: asyncio.subprocess.Process | None = None
        self.returncode: int | None = None
        self.done = asyncio.Event()
        self.out = os.path.join(sandbox.dir, f"exec-{exec_id}.stdout")
        self.err = os.path.join(sandbox.dir, f"exec-{exec_id}.stderr")


class Sandbox:
    def __init__(self, fake: "Fake", version: int, app_id: str, definition: api_pb2.Sandbox, env: dict):
        self.fake, self.version, self.app_id, self.definition = fake, version, app_id, definition
        self.id = modal_id("sb") if version == 1 else "sb-" + ulid()
        self.task_id = modal_id("ta")
        self.env = env
        self.dir = os.path.join(fake.state_dir, "sandboxes", self.id)
        self.root = os.path.join(self.dir, "root")
        self.address = ""
        self.argv: list[str] = []
        self.cwd = self.root
        self.proc: asyncio.subprocess.Process | None = None
        self.pgid: int | None = None
        self.result: api_pb2.GenericResult | None = None
        self.done = asyncio.Event()
        self.created = time.time()
        self.finished_at: float | None = None
        self.timeout = definition.timeout_secs or DEFAULT_SANDBOX_TIMEOUT
        self.forwarders: list[Forwarder] = []
        self.tunnels: list[api_pb2.TunnelData] = []
        self.execs: dict[str, Exec] = {}
        self.tasks: list[asyncio.Task] = []
        self.deadline_task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self.result is None

    def _materialize_mounts(self) -> set[str]:
        paths = set()
        for mount_id in self.definition.mount_ids:
            for f in self.fake.mounts[mount_id]:
                name = f.filename if f.filename.startswith("/") else "/" + f.filename
                dest = self.root + name
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as out:
                    out.write(self.fake.files[f.sha256_hex])
                os.chmod(dest, f.mode & 0o7777 if f.HasField("mode") else 0o644)
                paths.add(name)
        return paths

    def _rewrite(self, args: list[str], mounted: set[str]) -> list[str]:
        out = []
        has_ports = bool(self.definition.open_ports.ports)
        i = 0
        while i < len(args):
            a = args[i]
            if a in mounted:
                out.append(self.root + a)
            elif has_ports and a == "--host" and i + 1 < len(args):
                out += ["--host", self.address]
                i += 1
            elif has_ports and a.startswith("--host="):
                out.append("--host=" + self.address)
            else:
                out.append(a)
            i += 1
        return out

    def _environment(self) -> dict:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": os.path.join(self.root, "root"),
        }
        env.update(self.definition.environment_variables.contents)
        env.update(self.env)
        return env

    async def start(self) -> None:
        os.makedirs(os.path.join(self.root, "root"), exist_ok=True)
        mounted = self._materialize_mounts()
        ports = [p.port for p in self.definition.open_ports.ports]
        self.address = self.fake.allocate_address(ports)
        args = list(self.definition.entrypoint_args) or ["sleep", "infinity"]
        self.argv = self._rewrite(args, mounted)
        if self.definition.HasField("workdir") and self.definition.workdir:
            self.cwd = self.root + "/" + self.definition.workdir.lstrip("/")
            os.makedirs(self.cwd, exist_ok=True)
        for spec in self.definition.open_ports.ports:
            target = (self.address, spec.port)
            tls = Forwarder(target, self.fake.tls_ctx)
            await tls.start()
            self.forwarders.append(tls)
            tunnel = api_pb2.TunnelData(host="127.0.0.1", port=tls.port, container_port=spec.port)
            if spec.unencrypted:
                raw = Forwarder(target, None)
                await raw.start()
                self.forwarders.append(raw)
                tunnel.unencrypted_host, tunnel.unencrypted_port = "127.0.0.1", raw.port
            self.tunnels.append(tunnel)
        log(f"sandbox {self.id} (v{self.version}) at {self.address}, cwd {self.cwd}: runs {self.argv}")
        with open(os.path.join(self.dir, "stdout.log"), "wb") as out, open(
            os.path.join(self.dir, "stderr.log"), "wb"
        ) as err:
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv, cwd=self.cwd, env=self._environment(), stdin=subprocess.DEVNULL,
                    stdout=out, stderr=err, start_new_session=True, preexec_fn=child_setup,
                )
            except OSError as e:
                # What a container whose entrypoint cannot be executed does: it fails at once.
                err.write(f"modal-fake: cannot execute {self.argv[0]}: {e}\n".encode())
                code = 126 if isinstance(e, PermissionError) else 127
                self._finish(api_pb2.GenericResult(status=GR.GENERIC_STATUS_FAILURE, exitcode=code,
                                                   exception=f"cannot execute {args[0]}: {e.strerror}"))
                return
        self.pgid = self.proc.pid
        self.tasks.append(asyncio.create_task(self._watch()))
        self.deadline_task = asyncio.create_task(self._deadline())

    async def _watch(self) -> None:
        rc = await self.proc.wait()
        code = rc if rc >= 0 else 128 - rc
        status = GR.GENERIC_STATUS_SUCCESS if code == 0 else GR.GENERIC_STATUS_FAILURE
        self._finish(api_pb2.GenericResult(status=status, exitcode=code))

    async def _deadline(self) -> None:
        await asyncio.sleep(self.timeout)
        if self.running:
            log(f"sandbox {self.id}: timeout of {self.timeout} s reached")
            self._finish(api_pb2.GenericResult(status=GR.GENERIC_STATUS_TIMEOUT,
                                               exception=f"Sandbox timed out after {self.timeout} s"))

    def terminate(self) -> None:
        if self.running:
            self._finish(api_pb2.GenericResult(status=GR.GENERIC_STATUS_TERMINATED, exitcode=-1))

    def _finish(self, result: api_pb2.GenericResult) -> None:
        """The first result wins; whatever is left of the sandbox is killed."""
        if self.result is None:
            self.result = result
            self.finished_at = time.time()
            log(f"sandbox {self.id}: {STATUS_NAMES.get(result.status, result.status)}, exit code {result.exitcode}")
        kill_group(self.pgid)
        for ex in self.execs.values():
            if ex.proc and ex.proc.returncode is None:
                kill_group(ex.proc.pid)
        for f in self.forwarders:
            f.close()
        if self.deadline_task and self.deadline_task is not asyncio.current_task():
            self.deadline_task.cancel()
        self.done.set()
        self.fake.write_state()
        self.fake.write_state_soon()  # once the killed processes are gone

    def info(self) -> dict:
        status = "running" if self.running else STATUS_NAMES.get(self.result.status, str(self.result.status))
        return {
            "id": self.id,
            "version": self.version,
            "app_id": self.app_id,
            "task_id": self.task_id,
            "state": "running" if self.running else "finished",
            "status": status,
            "exitcode": None if self.running else self.result.exitcode,
            "created": round(self.created, 3),
            "finished": None if self.finished_at is None else round(self.finished_at, 3),
            "timeout_secs": self.timeout,
            "pid": self.proc.pid if self.proc else None,
            "pgid": self.pgid,
            "alive_pids": alive_pids(self.pgid) + [p for e in self.execs.values() if e.proc for p in alive_pids(e.proc.pid)],
            "address": self.address,
            "argv": self.argv,
            "cwd": self.cwd,
            "dir": self.dir,
            "tunnels": [
                {"container_port": t.container_port, "url": f"https://{t.host}:{t.port}",
                 **({"tcp": f"{t.unencrypted_host}:{t.unencrypted_port}"} if t.HasField("unencrypted_port") else {})}
                for t in self.tunnels
            ],
        }


class Fake:
    def __init__(self, args):
        self.args = args
        self.state_dir = os.path.abspath(args.state_dir)
        self.jwt_key = os.urandom(32)
        self.apps: dict[tuple[str, str], str] = {}  # (environment, name) -> app id
        self.app_ids: set[str] = set()
        self.secrets: dict[str, dict] = {}  # secret id -> env
        self.named_secrets: dict[tuple[str, str], str] = {}
        self.images: dict[str, dict] = {}  # image id -> {"built": bool, "tag": str}
        self.image_keys: dict[bytes, str] = {}
        self.files: dict[str, bytes] = {}  # sha256 hex -> content
        self.blobs: dict[str, dict] = {}  # blob id -> {"md5", "length", "data"}
        self.mounts: dict[str, list] = {}  # mount id -> [MountFile]
        self.sandboxes: dict[str, Sandbox] = {}
        self.by_task: dict[str, Sandbox] = {}
        self.create_calls = 0
        self.lists_begun = 0
        self.lists_answered = 0
        # 127.R.0.2 up, R random: another fake running beside this one (tests run in parallel)
        # starts elsewhere in 127/8.
        self.next_address = (random.randrange(16, 240) << 16) + 2
        self.grpc_port = 0
        self.http_port = 0
        self.tls_ctx: ssl.SSLContext | None = None
        self.ca_path = ""
        self._state_pending = False

    # --- state file -------------------------------------------------------------------------------
    def write_state(self) -> None:
        path = os.path.join(self.state_dir, "sandboxes.json")
        data = {"updated": round(time.time(), 3), "grpc_port": self.grpc_port, "ca": self.ca_path,
                "lists_begun": self.lists_begun, "lists_answered": self.lists_answered,
                "sandboxes": [sb.info() for sb in self.sandboxes.values()]}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)

    def write_state_soon(self, delay: float = 0.3) -> None:
        if self._state_pending:
            return
        self._state_pending = True

        def later():
            self._state_pending = False
            self.write_state()

        asyncio.get_running_loop().call_later(delay, later)

    # --- helpers ----------------------------------------------------------------------------------
    def allocate_address(self, ports: list[int]) -> str:
        """The next 127.a.b.c (not .0, .255, 127.0.0.1) on which every port can be bound."""
        in_use = {sb.address for sb in self.sandboxes.values() if sb.running}
        while True:
            n = self.next_address
            self.next_address += 1
            a, b, c = (n >> 16) & 255, (n >> 8) & 255, n & 255
            if c in (0, 255) or n >= 1 << 24:
                continue
            address = f"127.{a}.{b}.{c}"
            if address in in_use:
                continue
            free = True
            for port in ports:
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        s.bind((address, port))
                    except OSError as e:
                        if e.errno == 98:  # EADDRINUSE
                            free = False
                            break
            if free:
                return address

    def make_jwt(self, ttl: int, **claims) -> str:
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        now = int(time.time())
        payload = b64url(json.dumps({"iat": now, "exp": now + ttl, "iss": "modal-fake", **claims}).encode())
        sig = hmac.new(self.jwt_key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{b64url(sig)}"

    def check_jwt(self, token: str | None, what: str) -> dict:
        try:
            header, payload, sig = (token or "").split(".")
            want = hmac.new(self.jwt_key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(want, unb64url(sig)):
                raise ValueError("bad signature")
            claims = json.loads(unb64url(payload))
        except (ValueError, json.JSONDecodeError) as e:
            raise GRPCError(Status.UNAUTHENTICATED, f"Invalid {what}") from e
        if claims.get("exp", 0) < time.time():
            raise GRPCError(Status.UNAUTHENTICATED, f"Expired {what}")
        return claims

    def check_client(self, md) -> None:
        token_id, token_secret = md.get("x-modal-token-id"), md.get("x-modal-token-secret")
        if not token_id or not token_secret:
            raise GRPCError(Status.UNAUTHENTICATED, "Token missing. Could not authenticate client.")
        if not (hmac.compare_digest(token_id, self.args.token_id)
                and hmac.compare_digest(token_secret, self.args.token_secret)):
            raise GRPCError(Status.UNAUTHENTICATED, "Token ID or secret is invalid")
        client_type, version = md.get("x-modal-client-type", ""), md.get("x-modal-client-version", "")
        if not client_type.isdigit() or not version:
            raise GRPCError(Status.INVALID_ARGUMENT,
                            "x-modal-client-type (a number) and x-modal-client-version metadata are required")

    def sandbox(self, sandbox_id: str, version: int | None = None) -> Sandbox:
        sb = self.sandboxes.get(sandbox_id)
        if sb is None or (version is not None and sb.version != version):
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return sb

    def secret_env(self, secret_id: str) -> dict:
        if secret_id not in self.secrets:
            raise GRPCError(Status.NOT_FOUND, f"Secret {secret_id} not found")
        return self.secrets[secret_id]


def rpc(kind: str = "client", v2: bool = False, streaming: bool = False):
    """Makes a grpclib handler of `impl(self, req, stream)`: receives the request, logs it, checks
    the metadata (kind "client": the token pair and client headers, plus the auth JWT when v2;
    kind "router": the router JWT), and sends what impl returns (unless streaming: then impl
    sends its own messages)."""

    def wrap(impl):
        async def handler(self, stream):
            name = impl.__name__
            req = await stream.recv_message()
            log(f"{name} {summary(req)}")
            try:
                md = stream.metadata
                if kind == "client":
                    self.fake.check_client(md)
                    if v2:
                        self.fake.check_jwt(md.get("x-modal-auth-token"), "auth token (x-modal-auth-token)")
                else:
                    auth = md.get("authorization", "")
                    self.fake.check_jwt(auth[7:] if auth.startswith("Bearer ") else None,
                                        "command router token")
                resp = await impl(self, req, stream)
                if not streaming:
                    await stream.send_message(resp)
            except GRPCError as e:
                log(f"{name} -> {e.status.name}: {e.message}")
                raise
            except Exception as e:  # a bug of the fake: say so, on both sides
                log(f"{name} -> INTERNAL:\n{traceback.format_exc()}")
                raise GRPCError(Status.INTERNAL, f"modal-fake: {type(e).__name__}: {e}") from e

        handler.__name__ = impl.__name__
        return handler

    return wrap


async def tail_file(path: str, offset: int, done: asyncio.Event, send, deadline: float | None = None) -> bool:
    """Sends what path holds from offset on, as it grows, until done is set and all is sent (True)
    or the deadline passes (False)."""
    while True:
        finished = done.is_set()
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(1 << 16)
        except FileNotFoundError:
            data = b""
        if data:
            await send(offset, data)
            offset += len(data)
            continue
        if finished:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)


class ControlPlane(api_grpc.ModalClientBase):
    def __init__(self, fake: Fake):
        self.fake = fake

    @rpc()
    async def ClientHello(self, req, stream):
        return api_pb2.ClientHelloResponse(image_builder_version=self.fake.args.image_builder_version)

    @rpc()
    async def AuthTokenGet(self, req, stream):
        return api_pb2.AuthTokenGetResponse(token=self.fake.make_jwt(self.fake.args.auth_token_ttl, sub=self.fake.args.token_id))

    @rpc()
    async def AppGetOrCreate(self, req, stream):
        key = (req.environment_name, req.app_name)
        if key not in self.fake.apps:
            if req.object_creation_type not in (api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING,
                                                api_pb2.OBJECT_CREATION_TYPE_CREATE_FAIL_IF_EXISTS):
                raise GRPCError(Status.NOT_FOUND, f"App '{req.app_name}' not found")
            self.fake.apps[key] = modal_id("ap")
            self.fake.app_ids.add(self.fake.apps[key])
        elif req.object_creation_type == api_pb2.OBJECT_CREATION_TYPE_CREATE_FAIL_IF_EXISTS:
            raise GRPCError(Status.ALREADY_EXISTS, f"App '{req.app_name}' already exists")
        return api_pb2.AppGetOrCreateResponse(app_id=self.fake.apps[key])

    @rpc()
    async def EnvironmentGetOrCreate(self, req, stream):
        return api_pb2.EnvironmentGetOrCreateResponse(
            environment_id="en-" + hashlib.sha256(req.deployment_name.encode()).hexdigest()[:22],
            metadata=api_pb2.EnvironmentMetadata(
                name=req.deployment_name or "main",
                settings=api_pb2.EnvironmentSettings(image_builder_version=self.fake.args.image_builder_version),
            ),
        )

    @rpc()
    async def SecretGetOrCreate(self, req, stream):
        named = bool(req.deployment_name)
        key = (req.environment_name, req.deployment_name)
        if named and key in self.fake.named_secrets and req.object_creation_type != api_pb2.OBJECT_CREATION_TYPE_OVERWRITE_IF_EXISTS:
            return api_pb2.SecretGetOrCreateResponse(secret_id=self.fake.named_secrets[key])
        if named and req.object_creation_type == api_pb2.OBJECT_CREATION_TYPE_UNSPECIFIED:
            raise GRPCError(Status.NOT_FOUND, f"Secret '{req.deployment_name}' not found")
        secret_id = modal_id("st")
        self.fake.secrets[secret_id] = dict(req.env_dict)
        if named:
            self.fake.named_secrets[key] = secret_id
        return api_pb2.SecretGetOrCreateResponse(secret_id=secret_id)

    @rpc()
    async def ImageGetOrCreate(self, req, stream):
        key = req.image.SerializeToString(deterministic=True) + b"\0" + req.builder_version.encode()
        image_id = self.fake.image_keys.get(key)
        if image_id is None:
            image_id = modal_id("im")
            self.fake.image_keys[key] = image_id
            self.fake.images[image_id] = {"built": False, "commands": list(req.image.dockerfile_commands)}
        if self.fake.images[image_id]["built"]:  # cached: no join needed
            return api_pb2.ImageGetOrCreateResponse(
                image_id=image_id, result=api_pb2.GenericResult(status=GR.GENERIC_STATUS_SUCCESS),
                metadata=api_pb2.ImageMetadata(image_builder_version=req.builder_version))
        return api_pb2.ImageGetOrCreateResponse(image_id=image_id)

    @rpc(streaming=True)
    async def ImageJoinStreaming(self, req, stream):
        image = self.fake.images.get(req.image_id)
        if image is None:
            raise GRPCError(Status.NOT_FOUND, f"Image {req.image_id} not found")
        if not image["built"] or req.include_logs_for_finished:
            text = "".join(f"modal-fake: {c}\n" for c in image["commands"]) + "modal-fake: nothing to build\n"
            await stream.send_message(api_pb2.ImageJoinStreamingResponse(
                task_logs=[api_pb2.TaskLogs(data=text, file_descriptor=api_pb2.FILE_DESCRIPTOR_STDOUT)],
                entry_id="1"))
        if any("fake-fail" in c for c in image["commands"]):  # a test's image that cannot build
            await stream.send_message(api_pb2.ImageJoinStreamingResponse(
                result=api_pb2.GenericResult(status=GR.GENERIC_STATUS_FAILURE, exitcode=1,
                                             exception="fake-fail in the image: the build failed"),
                entry_id="2", eof=True))
            return
        image["built"] = True
        await stream.send_message(api_pb2.ImageJoinStreamingResponse(
            result=api_pb2.GenericResult(status=GR.GENERIC_STATUS_SUCCESS), entry_id="2", eof=True,
            metadata=api_pb2.ImageMetadata(image_builder_version=self.fake.args.image_builder_version)))

    @rpc()
    async def MountBatchedCheckExistence(self, req, stream):
        return api_pb2.MountBatchedCheckExistenceResponse(
            missing_sha256_hex_hashes=[h for h in req.sha256_hex_hashes if h not in self.fake.files])

    @rpc()
    async def BlobCreate(self, req, stream):
        if req.content_length <= 0 or not req.content_md5:
            raise GRPCError(Status.INVALID_ARGUMENT, "content_length and content_md5 are required")
        blob_id = modal_id("bl")
        self.fake.blobs[blob_id] = {"md5": req.content_md5, "length": req.content_length, "data": None}
        url = f"http://127.0.0.1:{self.fake.http_port}/blob/{blob_id}"
        return api_pb2.BlobCreateResponse(blob_id=blob_id, upload_url=url, blob_ids=[blob_id],
                                          upload_urls=api_pb2.UploadUrlList(items=[url]))

    @rpc()
    async def MountPutFile(self, req, stream):
        which = req.WhichOneof("data_oneof")
        if which is None:
            return api_pb2.MountPutFileResponse(exists=req.sha256_hex in self.fake.files)
        if which == "data":
            data = req.data
        else:
            blob = self.fake.blobs.get(req.data_blob_id)
            if blob is None or blob["data"] is None:
                raise GRPCError(Status.NOT_FOUND, f"Blob {req.data_blob_id} not found or not uploaded")
            data = blob["data"]
        if hashlib.sha256(data).hexdigest() != req.sha256_hex:
            raise GRPCError(Status.INVALID_ARGUMENT, "sha256_hex does not match the content")
        self.fake.files[req.sha256_hex] = data
        return api_pb2.MountPutFileResponse(exists=True)

    @rpc()
    async def MountGetOrCreate(self, req, stream):
        for f in req.files:
            if f.sha256_hex not in self.fake.files:
                raise GRPCError(Status.FAILED_PRECONDITION, f"{f.filename}: content {f.sha256_hex} was not uploaded")
        mount_id = modal_id("mo")
        self.fake.mounts[mount_id] = list(req.files)
        return api_pb2.MountGetOrCreateResponse(mount_id=mount_id)

    # --- sandboxes --------------------------------------------------------------------------------
    async def _create(self, version: int, req, env: dict) -> Sandbox:
        self.fake.create_calls += 1
        if self.fake.create_calls <= self.fake.args.fail_first:
            raise GRPCError(Status.UNAVAILABLE,
                            f"modal-fake: SandboxCreate throttled ({self.fake.create_calls} of --fail-first {self.fake.args.fail_first})")
        if req.app_id not in self.fake.app_ids:
            raise GRPCError(Status.NOT_FOUND, f"App {req.app_id} not found")
        d = req.definition
        if d.image_id and d.image_id not in self.fake.images:
            raise GRPCError(Status.NOT_FOUND, f"Image {d.image_id} not found")
        for mount_id in d.mount_ids:
            if mount_id not in self.fake.mounts:
                raise GRPCError(Status.NOT_FOUND, f"Mount {mount_id} not found")
        sb = Sandbox(self.fake, version, req.app_id, d, env)
        sb.tags = {t.tag_name: t.tag_value for t in req.tags}
        self.fake.sandboxes[sb.id] = sb
        self.fake.by_task[sb.task_id] = sb
        await sb.start()
        self.fake.write_state()
        return sb

    @rpc()
    async def SandboxCreate(self, req, stream):
        env = {}
        for secret_id in req.definition.secret_ids:
            env.update(self.fake.secret_env(secret_id))
        sb = await self._create(1, req, env)
        return api_pb2.SandboxCreateResponse(sandbox_id=sb.id,
                                             metadata=api_pb2.SandboxHandleMetadata(app_id=sb.app_id))

    @rpc(v2=True)
    async def SandboxCreateV2(self, req, stream):
        env = dict(req.ephemeral_secrets.contents)
        for secret_id in req.definition.secret_ids:
            env.update(self.fake.secret_env(secret_id))
        for source in req.secret_sources:
            if source.WhichOneof("source") == "env":
                env.update(source.env.contents)
            elif source.WhichOneof("source") == "secret_id":
                env.update(self.fake.secret_env(source.secret_id))
        sb = await self._create(2, req, env)
        resp = api_pb2.SandboxCreateV2Response(
            sandbox_id=sb.id, task_id=sb.task_id,
            metadata=api_pb2.SandboxHandleMetadata(app_id=sb.app_id),
            command_router_access=self._router_access(sb))
        if self.fake.args.create_returns_tunnels:
            resp.tunnels.extend(sb.tunnels)
        return resp

    def _task_id(self, sb: Sandbox):
        resp = api_pb2.SandboxGetTaskIdResponse()
        scheduled = time.time() >= sb.created + self.fake.args.task_id_delay
        if scheduled and (sb.running or sb.finished_at >= sb.created + self.fake.args.task_id_delay):
            resp.task_id = sb.task_id
        elif not sb.running:
            resp.task_result.CopyFrom(sb.result)
        return resp

    @rpc()
    async def SandboxGetTaskId(self, req, stream):
        return self._task_id(self.fake.sandbox(req.sandbox_id, 1))

    @rpc(v2=True)
    async def SandboxGetTaskIdV2(self, req, stream):
        return self._task_id(self.fake.sandbox(req.sandbox_id, 2))

    def _tunnels(self, sb: Sandbox):
        if not sb.running:
            raise GRPCError(Status.FAILED_PRECONDITION, "Sandbox has already terminated")
        return api_pb2.SandboxGetTunnelsResponse(result=api_pb2.GenericResult(status=GR.GENERIC_STATUS_SUCCESS),
                                                 tunnels=sb.tunnels)

    @rpc()
    async def SandboxGetTunnels(self, req, stream):
        return self._tunnels(self.fake.sandbox(req.sandbox_id, 1))

    @rpc(v2=True)
    async def SandboxGetTunnelsV2(self, req, stream):
        return self._tunnels(self.fake.sandbox(req.sandbox_id, 2))

    async def _wait(self, sb: Sandbox, timeout: float):
        if sb.running and timeout > 0:
            try:
                await asyncio.wait_for(sb.done.wait(), min(timeout, MAX_WAIT))
            except asyncio.TimeoutError:
                pass
        resp = api_pb2.SandboxWaitResponse(metadata=api_pb2.SandboxHandleMetadata(app_id=sb.app_id))
        if not sb.running:
            resp.result.CopyFrom(sb.result)
            resp.metadata.result.CopyFrom(sb.result)
        return resp

    @rpc()
    async def SandboxWait(self, req, stream):
        return await self._wait(self.fake.sandbox(req.sandbox_id, 1), req.timeout)

    @rpc(v2=True)
    async def SandboxWaitV2(self, req, stream):
        return await self._wait(self.fake.sandbox(req.sandbox_id, 2), req.timeout)

    def _terminate(self, sb: Sandbox):
        resp = api_pb2.SandboxTerminateResponse()
        if not sb.running:
            resp.existing_result.CopyFrom(sb.result)
        sb.terminate()
        return resp

    @rpc()
    async def SandboxTerminate(self, req, stream):
        return self._terminate(self.fake.sandbox(req.sandbox_id, 1))

    @rpc(v2=True)
    async def SandboxTerminateV2(self, req, stream):
        return self._terminate(self.fake.sandbox(req.sandbox_id, 2))

    @rpc(streaming=True)
    async def SandboxList(self, req, stream):
        # Newest first, at most 100 a page; before_timestamp pages on (as Modal's SDK does); only
        # the sandboxes carrying every tag asked for; finished ones only with include_finished.
        self.fake.lists_begun += 1
        self.fake.write_state()
        if self.fake.args.list_delay > 0:
            await asyncio.sleep(self.fake.args.list_delay)
        want = {t.tag_name: t.tag_value for t in req.tags}
        found = [sb for sb in self.fake.sandboxes.values()
                 if (not req.app_id or sb.app_id == req.app_id)
                 and (req.include_finished or sb.running)
                 and (not req.before_timestamp or sb.created < req.before_timestamp)
                 and all(sb.tags.get(k) == v for k, v in want.items())]
        found.sort(key=lambda sb: sb.created, reverse=True)
        resp = api_pb2.SandboxListResponse()
        for sb in found[:100]:
            info = resp.sandboxes.add(id=sb.id, created_at=sb.created, app_id=sb.app_id,
                                      timeout_secs=int(sb.timeout))
            info.task_info.id = sb.task_id
            if not sb.running:
                info.task_info.result.CopyFrom(sb.result)
            for k, v in sb.tags.items():
                info.tags.add(tag_name=k, tag_value=v)
        await stream.send_message(resp)  # raises when the client has gone
        self.fake.lists_answered += 1
        self.fake.write_state()

    @rpc(streaming=True)
    async def SandboxGetLogs(self, req, stream):
        sb = self.fake.sandbox(req.sandbox_id)
        fd = req.file_descriptor
        if fd not in (api_pb2.FILE_DESCRIPTOR_STDOUT, api_pb2.FILE_DESCRIPTOR_STDERR):
            raise GRPCError(Status.INVALID_ARGUMENT, "file_descriptor must be STDOUT or STDERR")
        path = os.path.join(sb.dir, "stdout.log" if fd == api_pb2.FILE_DESCRIPTOR_STDOUT else "stderr.log")
        offset = int(req.last_entry_id) if req.last_entry_id.isdigit() else 0

        async def send(at, data):
            await stream.send_message(api_pb2.TaskLogsBatch(
                task_id=sb.task_id, sandbox_id=sb.id, entry_id=str(at + len(data)),
                items=[api_pb2.TaskLogs(data=data.decode("utf-8", "replace"), file_descriptor=fd)]))

        # Until the sandbox has finished and everything is sent (then a batch with eof), or until
        # the request's timeout (then the client asks again from the last entry id).
        deadline = time.monotonic() + min(req.timeout or 55, MAX_WAIT)
        if await tail_file(path, offset, sb.done, send, deadline):
            end = os.path.getsize(path) if os.path.exists(path) else 0
            await stream.send_message(api_pb2.TaskLogsBatch(task_id=sb.task_id, sandbox_id=sb.id,
                                                            entry_id=str(max(end, offset)), eof=True))

    def _router_access(self, sb: Sandbox):
        return api_pb2.CommandRouterAccess(url=f"http://127.0.0.1:{self.fake.grpc_port}",
                                           jwt=self.fake.make_jwt(3600, task_id=sb.task_id))

    @rpc(v2=True)
    async def SandboxGetCommandRouterAccess(self, req, stream):
        if req.WhichOneof("target") == "task_id":
            sb = self.fake.by_task.get(req.task_id)
            if sb is None:
                raise GRPCError(Status.NOT_FOUND, f"Task {req.task_id} not found")
        else:
            sb = self.fake.sandbox(req.sandbox_id)
        access = self._router_access(sb)
        return api_pb2.SandboxGetCommandRouterAccessResponse(jwt=access.jwt, url=access.url)

    @rpc()
    async def TaskGetCommandRouterAccess(self, req, stream):
        sb = self.fake.by_task.get(req.task_id)
        if sb is None:
            raise GRPCError(Status.NOT_FOUND, f"Task {req.task_id} not found")
        access = self._router_access(sb)
        return api_pb2.TaskGetCommandRouterAccessResponse(jwt=access.jwt, url=access.url)


class Router(router_grpc.TaskCommandRouterBase):
    def __init__(self, fake: Fake):
        self.fake = fake

    def _sandbox(self, task_id: str) -> Sandbox:
        sb = self.fake.by_task.get(task_id)
        if sb is None:
            raise GRPCError(Status.NOT_FOUND, f"Task {task_id} not found")
        return sb

    def _exec(self, task_id: str, exec_id: str) -> Exec:
        ex = self._sandbox(task_id).execs.get(exec_id)
        if ex is None:
            raise GRPCError(Status.NOT_FOUND, f"Exec {exec_id} not found")
        return ex

    @rpc(kind="router")
    async def TaskExecStart(self, req, stream):
        sb = self._sandbox(req.task_id)
        if not sb.running:
            raise GRPCError(Status.FAILED_PRECONDITION, "Sandbox has already terminated")
        ex = Exec(req.exec_id, sb)
        sb.execs[req.exec_id] = ex
        env = sb._environment()
        for source in req.secret_sources:
            if source.WhichOneof("source") == "env":
                env.update(source.env.contents)
            elif source.WhichOneof("source") == "secret_id":
                env.update(self.fake.secret_env(source.secret_id))
        env.update(req.env)
        cwd = sb.cwd
        if req.HasField("workdir") and req.workdir:
            cwd = sb.root + "/" + req.workdir.lstrip("/")
            os.makedirs(cwd, exist_ok=True)
        with open(ex.out, "wb") as out, open(ex.err, "wb") as err:
            try:
                ex.proc = await asyncio.create_subprocess_exec(
                    *req.command_args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, preexec_fn=child_setup)
            except OSError as e:
                err.write(f"modal-fake: cannot execute {req.command_args[0]}: {e}\n".encode())
                ex.returncode = 127
                ex.done.set()
                return router_pb2.TaskExecStartResponse()

        async def reap():
            rc = await ex.proc.wait()
            ex.returncode = rc
            ex.done.set()

        sb.tasks.append(asyncio.create_task(reap()))
        return router_pb2.TaskExecStartResponse()

    @rpc(kind="router", streaming=True)
    async def TaskExecStdioRead(self, req, stream):
        ex = self._exec(req.task_id, req.exec_id)
        path = ex.out if req.file_descriptor == router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT else ex.err

        async def send(at, data):
            await stream.send_message(router_pb2.TaskExecStdioReadResponse(data=data))

        await tail_file(path, req.offset, ex.done, send)

    def _exit(self, ex: Exec, resp):
        if ex.returncode is not None:
            if ex.returncode < 0:
                resp.signal = -ex.returncode
            else:
                resp.code = ex.returncode
        return resp

    @rpc(kind="router")
    async def TaskExecWait(self, req, stream):
        ex = self._exec(req.task_id, req.exec_id)
        await ex.done.wait()
        return self._exit(ex, router_pb2.TaskExecWaitResponse())

    @rpc(kind="router")
    async def TaskExecPoll(self, req, stream):
        return self._exit(self._exec(req.task_id, req.exec_id), router_pb2.TaskExecPollResponse())

    @rpc(kind="router", streaming=True)
    async def SandboxStdioReadV2(self, req, stream):
        sb = self._sandbox(req.task_id)
        name = "stdout.log" if req.file_descriptor == router_pb2.SANDBOX_STDIO_FILE_DESCRIPTOR_STDOUT else "stderr.log"

        async def send(at, data):
            await stream.send_message(router_pb2.SandboxStdioReadV2Response(data=data, starting_offset=at))

        await tail_file(os.path.join(sb.dir, name), req.offset, sb.done, send)


def unimplemented(cls, label: str) -> None:
    """Every abstract RPC not implemented above answers UNIMPLEMENTED (and is logged)."""

    def make(name):
        async def handler(self, stream):
            await stream.recv_message()
            log(f"{label}{name}: not implemented by the fake")
            raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not implemented by modal-fake")

        return handler

    for name in list(cls.__abstractmethods__):
        setattr(cls, name, make(name))
    cls.__abstractmethods__ = frozenset()


unimplemented(ControlPlane, "")
unimplemented(Router, "router ")


async def blob_put(fake: Fake, request: web.Request) -> web.Response:
    blob = fake.blobs.get(request.match_info["blob_id"])
    if blob is None:
        return web.Response(status=404, text="no such blob\n")
    data = await request.read()
    md5 = hashlib.md5(data)
    if len(data) != blob["length"] or base64.b64encode(md5.digest()).decode() != blob["md5"]:
        log(f"PUT {request.path}: {len(data)} bytes do not match BlobCreate's length/md5")
        return web.Response(status=400, text="content does not match the announced length and MD5\n")
    blob["data"] = data
    log(f"PUT {request.path}: {len(data)} bytes")
    return web.Response(status=200, headers={"ETag": f'"{md5.hexdigest()}"'})


async def main(args) -> int:
    fake = Fake(args)
    os.makedirs(os.path.join(fake.state_dir, "sandboxes"), exist_ok=True)
    fake.ca_path, fake.tls_ctx = make_tls(fake.state_dir)

    app = web.Application(client_max_size=1 << 31)
    app.router.add_put("/blob/{blob_id}", lambda r: blob_put(fake, r))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    http_sock = socket.create_server(("127.0.0.1", 0))
    fake.http_port = http_sock.getsockname()[1]
    await web.SockSite(runner, http_sock).start()

    sock = socket.create_server(("127.0.0.1", args.port))
    fake.grpc_port = sock.getsockname()[1]
    server = Server([ControlPlane(fake), Router(fake)])
    await server.start(sock=sock)
    fake.write_state()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log(f"listening on 127.0.0.1:{fake.grpc_port} (gRPC, h2c), blob uploads on 127.0.0.1:{fake.http_port}, "
        f"tunnel CA {fake.ca_path}, state {fake.state_dir}")
    print(f"READY {fake.grpc_port} {fake.ca_path}", flush=True)
    await stop.wait()

    log("stopping: killing every sandbox")
    for sb in fake.sandboxes.values():
        sb.terminate()
        kill_group(sb.pgid)
    procs = [p for sb in fake.sandboxes.values() for p in [sb.proc, *(e.proc for e in sb.execs.values())] if p]
    if procs:
        await asyncio.wait([asyncio.ensure_future(p.wait()) for p in procs], timeout=5)
    server.close()
    try:
        await asyncio.wait_for(server.wait_closed(), 3)
    except asyncio.TimeoutError:
        pass
    await runner.cleanup()
    fake.write_state()
    log("stopped")
    return 0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="A fake of Modal's control plane (gRPC, h2c) on 127.0.0.1.")
    p.add_argument("--port", type=int, default=0, help="gRPC port (0: a free one; see the READY line)")
    p.add_argument("--state-dir", required=True, help="CA, sandbox directories and sandboxes.json go here")
    p.add_argument("--token-id", required=True, help="the x-modal-token-id every call must carry")
    p.add_argument("--token-secret", required=True, help="the x-modal-token-secret every call must carry")
    p.add_argument("--fail-first", type=int, default=0, metavar="N",
                   help="the first N SandboxCreate(V2) calls fail with UNAVAILABLE")
    p.add_argument("--task-id-delay", type=float, default=0.0, metavar="SECONDS",
                   help="V1 SandboxGetTaskId answers no task id for this long after the create")
    p.add_argument("--auth-token-ttl", type=int, default=3600, metavar="SECONDS",
                   help="lifetime of the JWTs AuthTokenGet hands out")
    p.add_argument("--list-delay", type=float, default=0.0, metavar="SECONDS",
                   help="each SandboxList waits this long before it answers")
    p.add_argument("--create-returns-tunnels", action="store_true",
                   help="SandboxCreateV2's answer carries the tunnels")
    p.add_argument("--image-builder-version", default="2025.06")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
