"""SWE-ReX's own Docker deployment (swe-rex 1.4's `DockerDeployment`, unchanged) on an image that
has rex-server installed as `swerex-remote`: SWE-ReX runs `docker run ... /bin/sh -c
"swerex-remote --auth-token T || (pip install pipx && pipx run swe-rex ...)"`, rex-server answers,
a session runs through it, and `stop()` leaves no container behind.

On `rex-test-nopython` (busybox and a static bash, nothing else) the fallback could not even
start, so a working session there shows that rex needs no Python in the image; on
`rex-test-bookworm` (python3 present) the test checks that the fallback was not taken either.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pytest
from swerex.deployment.docker import DockerDeployment
from swerex.exceptions import NonZeroExitCodeError
from swerex.runtime.abstract import (
    BashAction,
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)
from swerex.runtime.remote import RemoteRuntime

from conftest import run_async
from swerex_image import (
    SWEREX_REMOTE,
    SwerexImage,
    containers_of,
    docker,
    scratch,  # noqa: F401 (a fixture)
    swerex_image,
    wait_until_gone,
)

BASES = {"nopython": "rex-test-nopython:latest", "bookworm": "rex-test-bookworm:latest"}


@pytest.fixture(scope="module", params=list(BASES))
def image(request) -> tuple[str, SwerexImage]:
    """(flavour, image): the base image plus rex-server as swerex-remote; removed afterwards."""
    with swerex_image(BASES[request.param]) as built:
        yield request.param, built


class Sandbox:
    """Short calls onto SWE-ReX's runtime API; commands are bounded on the server side too."""

    def __init__(self, runtime: RemoteRuntime):
        self.runtime = runtime

    async def bash(self, command: str, **kwargs):
        action = BashAction(command=command, session="main", timeout=20, **kwargs)
        return await self.runtime.run_in_session(action)

    async def execute(self, command: str | list[str], **kwargs):
        return await self.runtime.execute(Command(command=command, timeout=20, **kwargs))

    async def read(self, path: str) -> str:
        return (await self.runtime.read_file(ReadFileRequest(path=path))).content

    async def processes(self) -> list[tuple[str, str]]:
        """(executable, command line) of every process in the container, read from /proc."""
        script = (
            'for d in /proc/[0-9]*; do [ -r "$d/cmdline" ] || continue; '
            'printf "%s\\t%s\\n" "$(readlink "$d/exe")" "$(tr "\\000" " " < "$d/cmdline")"; done'
        )
        listing = await self.execute(["/bin/sh", "-c", script])
        assert listing.exit_code == 0, listing
        return [tuple(line.split("\t", 1)) for line in listing.stdout.splitlines() if "\t" in line]


async def _assert_rex_serves(box: Sandbox, flavour: str, server_sha256: str) -> None:
    """The server SWE-ReX talks to is the rex-server built into the image, started by the first
    half of SWE-ReX's command; nothing of its pip/pipx fallback ran."""
    installed = await box.execute(["sha256sum", SWEREX_REMOTE])
    assert installed.stdout.split()[0] == server_sha256, installed
    processes = await box.processes()
    servers = [cmd for exe, cmd in processes if exe == SWEREX_REMOTE]
    assert len(servers) == 1 and servers[0].startswith("swerex-remote --auth-token "), processes
    fallback = [cmd for exe, cmd in processes if Path(exe).name.startswith(("python", "pip"))]
    assert fallback == [], f"SWE-ReX's pip/pipx fallback is running: {fallback}"
    python = await box.execute("command -v python3 python pip pipx", shell=True)
    if flavour == "nopython":
        assert python.stdout == "" and python.exit_code != 0, f"a Python in the image: {python}"


async def _session_round(box: Sandbox, scratch: Path) -> None:
    """A session as an agent drives one, through every call of SWE-ReX's runtime API."""
    runtime = box.runtime
    created = await runtime.create_session(
        CreateBashSessionRequest(session="main", startup_timeout=20)
    )
    assert created.session_type == "bash"

    # The directory, variables and functions of one command are there for the next.
    assert (await box.bash("cd /tmp && export GREETING=hello && count=41")).exit_code == 0
    obs = await box.bash('count=$((count + 1)); echo "$GREETING $count from $PWD"')
    assert (obs.output.strip(), obs.exit_code) == ("hello 42 from /tmp", 0)
    await box.bash('greet() { echo "hi $1"; }')
    assert (await box.bash("greet rex")).output.strip() == "hi rex"
    # Exit codes, and SWE-ReX's error for check="raise" rebuilt from rex-server's answer.
    assert (await box.bash("false", check="silent")).exit_code == 1
    with pytest.raises(NonZeroExitCodeError):
        await box.bash("ls /no/such/path", check="raise")

    # Processes outside the session: argv and shell forms, separate streams, cwd.
    out = await box.execute(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (out.stdout, out.stderr, out.exit_code) == ("out\n", "err\n", 3)
    out = await box.execute("echo $((6 * 7)) > answer && cat answer", shell=True, cwd="/tmp")
    assert (out.stdout, out.exit_code) == ("42\n", 0)
    assert (await box.bash("cat answer")).output.strip() == "42"

    # Files: written (parents created) and read back with UTF-8 intact; the session sees them.
    text = "héllo\nwörld ✓\n"
    await runtime.write_file(WriteFileRequest(path="/tmp/rex/notes/hello.txt", content=text))
    assert await box.read("/tmp/rex/notes/hello.txt") == text
    assert (await box.bash("wc -l < /tmp/rex/notes/hello.txt")).output.strip() == "2"

    # Uploads: a directory (the client zips it, the server unpacks it) and a single binary file.
    tree = scratch / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha\n")
    (tree / "sub" / "b.txt").write_text("beta\n")
    await runtime.upload(UploadRequest(source_path=str(tree), target_path="/tmp/uploaded"))
    assert await box.read("/tmp/uploaded/sub/b.txt") == "beta\n"
    obs = await box.bash("cd /tmp/uploaded && find . -type f | sort && cat a.txt")
    assert obs.output.split() == ["./a.txt", "./sub/b.txt", "alpha"]
    blob = bytes(range(256)) * 512
    (scratch / "blob.bin").write_bytes(blob)
    await runtime.upload(
        UploadRequest(source_path=str(scratch / "blob.bin"), target_path="/tmp/single/copy.bin")
    )
    out = await box.execute(["sha256sum", "/tmp/single/copy.bin"])
    assert out.stdout.split()[0] == hashlib.sha256(blob).hexdigest()

    await runtime.close_session(CloseBashSessionRequest(session="main"))


def test_session_through_swerex_docker_deployment(
    image: tuple[str, SwerexImage], scratch: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flavour, (tag, server_sha256) = image
    # SWE-ReX's own logger does not propagate; this one does, so its warnings reach caplog (a
    # `docker kill` that failed is only a warning there).
    logger = logging.getLogger(f"rex.tests.swerex_docker.{flavour}")
    deployment = DockerDeployment(image=tag, pull="never", startup_timeout=30, logger=logger)
    stopped = False
    try:
        run_async(deployment.start(), 45)
        name = deployment.container_name
        assert name is not None and name.startswith("rex-test-swerex")

        # The container runs SWE-ReX's own command line (fallback included); rex adds nothing.
        (container,) = json.loads(docker("inspect", name).stdout)
        assert container["State"]["Running"], container["State"]
        assert container["Config"]["Entrypoint"] is None
        shell, dash_c, script = container["Config"]["Cmd"]
        assert (shell, dash_c) == ("/bin/sh", "-c")
        assert script.startswith("swerex-remote --auth-token "), script
        assert "|| (python3 -m pip install pipx" in script, script

        assert run_async(deployment.is_alive(timeout=10), 15).is_alive
        box = Sandbox(deployment.runtime)
        run_async(_assert_rex_serves(box, flavour, server_sha256), 30)
        run_async(_session_round(box, scratch), 60)

        # Nothing of the fallback in the container's output either (`python3: not found`, pip).
        logs = docker("logs", name)
        output = logs.stdout + logs.stderr
        assert "pip" not in output and "not found" not in output, output

        run_async(deployment.stop(), 30)
        stopped = True
        complaints = [
            r.getMessage()
            for r in caplog.records
            if r.name == logger.name and r.levelno >= logging.WARNING
        ]
        assert complaints == [], complaints
        assert wait_until_gone(name), f"container {name} still in `docker ps -a` after stop()"
        assert containers_of(tag) == []
    finally:
        if not stopped:
            run_async(deployment.stop(), 30)
