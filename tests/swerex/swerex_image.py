"""Images for SWE-ReX's Docker deployment: a local base image with rex-server installed as
`swerex-remote`, the way a user of SWE-ReX or mini-swe-agent gets rex into a container.

Built at test time from the static binary in $REX_SERVER, offline (the base is a local image, no
registry is contacted), under a tag of its own per binary and process, and removed, with every
container made from it, by the `swerex_image` context manager, also when a test fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from conftest import rex_server_path

# The client SWE-ReX runs (`docker` on PATH); the helpers here use the same one.
DOCKER = shutil.which("docker") or "docker"
# The images built here; the tag says from which base, binary and process.
REPOSITORY = "rex-test-swerex"
# Each image built here holds its own tag in this label, which its containers inherit: they are
# found by it. (It also gives each build an id of its own; by the id that identical builds would
# share, an `ancestor=` filter would find the containers of a parallel test too.)
IMAGE_LABEL = "rex.test.swerex-image"
# Where rex-server lands in the image: first on the PATH of both base images.
SWEREX_REMOTE = "/usr/local/bin/swerex-remote"


def docker(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs the docker CLI, bounded by `timeout`; with `check`, a failure raises with its stderr."""
    # The legacy builder: what every client has (buildx may be missing, as on Debian's docker.io).
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    done = subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(
            f"`docker {' '.join(args)}` exited with {done.returncode}: {done.stderr.strip()}"
        )
    return done


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A host directory for a test's own files, removed afterwards (pytest's tmp_path keeps the
    last runs' directories)."""
    with tempfile.TemporaryDirectory(prefix="rex-swerex-test-") as path:
        yield Path(path)


def require_engine_and_image(base: str) -> None:
    """Fails the test, saying how to fix it, unless the engine answers and holds `base`."""
    try:
        version = docker("version", "--format", "{{.Server.Version}}", timeout=30, check=False)
    except FileNotFoundError:
        pytest.fail("no docker CLI on PATH (scripts/common.sh's rex_docker_setup installs one)")
    if version.returncode != 0:
        pytest.fail(
            "the Docker engine does not answer (scripts/common.sh's rex_docker_setup starts it): "
            + version.stderr.strip()
        )
    if docker("image", "inspect", base, check=False).returncode != 0:
        pytest.fail(f"image {base} is missing (scripts/common.sh's rex_docker_setup builds it)")


def containers_of(image: str) -> list[str]:
    """Every container, in any state, made from `image` (one of `swerex_image`'s, whose label it
    inherits): "id name state status" lines."""
    out = docker(
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        f"label={IMAGE_LABEL}={image}",
        "--format",
        "{{.ID}} {{.Names}} {{.State}} {{.Status}}",
    ).stdout
    return out.splitlines()


def container_exists(name: str) -> bool:
    """Whether a container of exactly this name exists, in any state (`docker ps -a`)."""
    out = docker("ps", "-a", "--filter", f"name=^/{name}$", "--format", "{{.Names}}").stdout
    return name in out.split()


def wait_until_gone(name: str, timeout: float = 20) -> bool:
    """Polls `docker ps -a` until no container is named `name` (`--rm` removes it only after it
    exited, asynchronously); False if it is still there after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while container_exists(name):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _remove(image: str) -> list[str]:
    """Removes the containers made from `image`, then the tag; returns what went wrong."""
    problems = []
    for container in containers_of(image):
        container = container.split()[0]
        done = docker("rm", "-f", container, check=False)
        if done.returncode != 0:
            problems.append(f"docker rm -f {container}: {done.stderr.strip()}")
    if docker("image", "inspect", image, check=False).returncode != 0:
        return problems  # never built
    done = docker("rmi", image, check=False)
    if done.returncode != 0:
        problems.append(f"docker rmi {image}: {done.stderr.strip()}")
    return problems


class SwerexImage(NamedTuple):
    tag: str
    server_sha256: str  # of the rex-server inside, which $REX_SERVER may no longer be


@contextlib.contextmanager
def swerex_image(base: str) -> Iterator[SwerexImage]:
    """Builds `base` + rex-server as swerex-remote, yields it, then removes it and its
    containers. The tag holds the binary's hash and this process's id, so parallel test files
    (and work trees) never touch each other's image or containers. Each build makes its own
    layers (--no-cache): with a layer shared, removing one test's image could delete the layer
    another test's build had just taken from the cache, failing that build ("failed to get
    digest"). The layer is one copied file."""
    server = Path(rex_server_path())
    require_engine_and_image(base)
    flavour = base.split(":", 1)[0].removeprefix("rex-test-")
    tag = None
    try:
        # A context of two files: FROM a local image builds offline.
        with tempfile.TemporaryDirectory(prefix="rex-swerex-image-") as context:
            binary = Path(context) / "swerex-remote"
            shutil.copyfile(server, binary)
            binary.chmod(0o755)
            digest = hashlib.sha256(binary.read_bytes()).hexdigest()
            tag = f"{REPOSITORY}:{flavour}-{digest[:16]}-{os.getpid()}"
            (Path(context) / "Dockerfile").write_text(
                f"FROM {base}\nCOPY swerex-remote {SWEREX_REMOTE}\nLABEL {IMAGE_LABEL}={tag}\n"
            )
            docker("build", "--quiet", "--force-rm", "--no-cache", "--tag", tag, context,
                   timeout=120)
        yield SwerexImage(tag, digest)
    finally:
        problems = _remove(tag) if tag else []
        if problems:
            raise RuntimeError("cleaning up after the test failed: " + "; ".join(problems))
