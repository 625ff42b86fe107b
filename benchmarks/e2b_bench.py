#!/usr/bin/env python3
"""E2B's developer surface on a rex gateway against its floor, in the same run:

- build: E2B's Template.build (Python SDK) of a Dockerfile on a gateway on Docker, against the
  Engine API's build of the same Dockerfile and context straight on the engine. Each round's
  Dockerfile carries a token of its own, so neither path reuses the other's layers past it.
- cached: Template.build of the same recipe again (the gateway's cache: no engine work).
- run_code: E2B's code-interpreter SDK's run_code("1+1") through the gateway's port routing,
  against the same SDK sending it straight to the kernel in the sandbox (its container's address,
  port 49999): the same client work, less the gateway's hop.

The two sides alternate; printed: each side's median and spread over the rounds, and the ratio.

    PYTHON e2b_bench.py REX [--rounds 5] [--calls 50] [--smoke]

PYTHON: build/swerex-env/bin/python (it has e2b and e2b-code-interpreter). Needs Docker with the
project's images (scripts/common.sh: rex_docker_setup).
"""

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "gateway"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from gateway_process import Gateway  # noqa: E402
from swebench_bench import Engine, spread  # noqa: E402

IMAGE = os.environ.get("REX_TEST_IMAGE", "rex-test-bookworm:latest")
KEY = "bench-" + uuid.uuid4().hex[:8]


def dockerfile(token):
    return (f"FROM {IMAGE}\n"
            "ENV BENCH=1\n"
            "WORKDIR /app\n"
            "COPY data/ /app/data/\n"
            f"RUN echo {token} > /app/token && python3 -c 'print(sum(range(10**6)))'\n")


def context_dir(work):
    ctx = work / "ctx"
    (ctx / "data").mkdir(parents=True, exist_ok=True)
    for i in range(20):
        (ctx / "data" / f"f{i}.txt").write_text(f"file {i}\n" * 200)
    return ctx


def floor_build(engine, ctx, token):
    """The Engine API's build of the same Dockerfile and context; the image removed after."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = dockerfile(token).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(ctx / "data", arcname="data")
    tag = f"rex-bench-floor:{token}"
    t0 = time.monotonic()
    out = engine.call("POST", f"/build?t={tag}&rm=1&forcerm=1", raw=buf.getvalue(),
                      headers={"Content-Type": "application/x-tar"})
    took = time.monotonic() - t0
    if b'"error"' in out:
        sys.exit(f"the floor's build failed: {out[-500:]!r}")
    engine.call("DELETE", f"/images/{tag}?force=1")
    return took


def template_build(ctx, token):
    from e2b import Template
    t = Template(file_context_path=str(ctx)).from_dockerfile(dockerfile(token))
    name = f"bench-{token}"
    t0 = time.monotonic()
    Template.build(t, name)
    return time.monotonic() - t0, t, name


def session_url(gw, sid):
    req = urllib.request.Request(f"{gw.url}/api/sessions/{sid}",
                                 headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def kernel_address(gw, sid):
    """The sandbox's own address: its server's host (the container's address on its network)."""
    rec = session_url(gw, sid)
    host = rec.get("url", "").split("//", 1)[-1].split(":", 1)[0]
    if not host or host.startswith("/") or host.startswith("127."):
        sys.exit(f"the sandbox's address is not known from {rec.get('url')!r}")
    return f"http://{host}:49999"


def kernel_sandbox(url):
    """The code-interpreter SDK's Sandbox reaching the kernel at `url` itself (its sandbox_url),
    with no control plane (a port nothing listens on)."""
    from e2b import ConnectionConfig
    from e2b_code_interpreter import Sandbox
    from packaging.version import Version
    config = ConnectionConfig(sandbox_url=url, api_url="http://127.0.0.1:9", api_key="unused")
    return Sandbox(sandbox_id="direct", envd_version=Version("0.4.0"), envd_access_token=None,
                   sandbox_domain=None, connection_config=config)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rex")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="2 rounds, 5 calls")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.calls = 2, 5
    work = Path(tempfile.mkdtemp(prefix="e2b-bench-"))
    gw = Gateway(os.path.abspath(args.rex), str(work / "s"),
                 ["--api-key", f"bench={KEY}", "--python-image", IMAGE],
                 headers={"Authorization": f"Bearer {KEY}"})
    gateway_id = None
    try:
        gateway_id = gw.wait_ready(30)["gateway_id"]
        os.environ.update(E2B_API_URL=gw.url, E2B_SANDBOX_URL=gw.url, E2B_API_KEY=KEY)
        os.environ.pop("E2B_DOMAIN", None)
        engine = Engine()
        ctx = context_dir(work)

        # Builds: a first pair unmeasured (the base's own layers, the template's account).
        template_build(ctx, "warm" + uuid.uuid4().hex[:6])
        floor_build(engine, ctx, "warm" + uuid.uuid4().hex[:6])
        ours, floor, cached = [], [], []
        for i in range(args.rounds):
            token = uuid.uuid4().hex[:12]
            if i % 2 == 0:
                took, recipe, name = template_build(ctx, token)
                ours.append(took)
                floor.append(floor_build(engine, ctx, token + "f"))
            else:
                floor.append(floor_build(engine, ctx, token + "f"))
                took, recipe, name = template_build(ctx, token)
                ours.append(took)
            from e2b import Template
            t0 = time.monotonic()
            Template.build(recipe, name)
            cached.append(time.monotonic() - t0)
        ratio = statistics.median(ours) / statistics.median(floor)
        print(f"build: template {spread(ours)}; engine's build {spread(floor)}; "
              f"ratio {ratio:.2f}x (target 1.2x)")
        print(f"build, the same steps again: {spread([c * 1000 for c in cached]).replace('s', 'ms')}"
              f" (target under 100 ms)")

        # run_code: through the gateway against straight to the kernel.
        from e2b_code_interpreter import Sandbox
        sbx = Sandbox.create(timeout=600)
        try:
            # The same SDK, pointed straight at the kernel's address in the sandbox.
            direct = kernel_sandbox(kernel_address(gw, sbx.sandbox_id))
            sbx.run_code("1+1")
            direct.run_code("1+1")
            through, straight = [], []
            for r in range(args.rounds):
                sides = [("gw", through), ("direct", straight)]
                if r % 2:
                    sides.reverse()
                for side, out in sides:
                    t0 = time.monotonic()
                    client = sbx if side == "gw" else direct
                    for _ in range(args.calls):
                        if client.run_code("1+1").text != "2":
                            sys.exit(f"run_code ({side}) did not answer 2")
                    out.append((time.monotonic() - t0) / args.calls * 1000)
            ratio = statistics.median(through) / statistics.median(straight)
            print(f"run_code(\"1+1\"): through the gateway {spread(through).replace('s', 'ms')}; "
                  f"straight to the kernel {spread(straight).replace('s', 'ms')}; "
                  f"ratio {ratio:.2f}x (target 1.5x)")
        finally:
            sbx.kill()
    finally:
        gw.terminate()
        if gateway_id:
            remove_template_images(gateway_id)
        shutil.rmtree(work, ignore_errors=True)


def remove_template_images(gateway_id):
    engine = Engine()
    query = urllib.request.quote(json.dumps({"label": [f"rex.gateway={gateway_id}"]}))
    for image in json.loads(engine.call("GET", f"/images/json?filters={query}")):
        try:
            engine.call("DELETE", f"/images/{image['Id']}?force=1")
        except RuntimeError as e:
            print(f"left: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
