#!/usr/bin/env python3
"""Checks tests/modal/modal_fake.py against Modal's official Python SDK (the `modal` package), on
loopback only: what rex's Modal deployment does, done by the SDK, must work against the fake, in
both sandbox flavours (V2, the SDK's default, and V1 with MODAL_SANDBOX_V2=0).

    build/modal-env/bin/python tests/modal/client_check.py --rex-server build/release/rex-server

It starts the fake (with --fail-first 1, so the SDK's retry of a throttled create is exercised),
then, per flavour, in a child process with MODAL_SERVER_URL=http://127.0.0.1:<port> and the token
pair in the environment:
  - App.lookup(create_if_missing=True); Image.from_registry("python:3.12") plus
    add_local_file(<rex-server>, "/rex/rex-server"); Sandbox.create("/rex/rex-server", "--host",
    "0.0.0.0", "--port", "8000", encrypted_ports=[8000], timeout=600, secrets=[Secret.from_dict(
    {"REX_AUTH_TOKEN": token})]); sb.tunnels()[8000].url; an HTTPS GET of <url>/is_alive with
    X-API-Key verified against the fake's CA (200, {"is_alive": true}) and one without the key
    (401/403: the secret reached the server); sb.exec("echo", ...) through the task command router;
    sb.terminate(); sb.wait(raise_on_termination=False) (returncode 137);
  - a rex-server that exits at once (a bad flag): wait() gives its exit code, its stderr is
    readable, tunnels() fails with ConflictError;
  - a sandbox past its timeout (timeout=2): SandboxTimeoutError, returncode 124;
then a wrong token secret (AuthError); a settings file (MODAL_CONFIG_PATH, no token or server in
the environment) whose active profile names the fake (App.lookup works) and whose other profile,
picked by MODAL_PROFILE (the server from MODAL_SERVER_URL), has a wrong token (AuthError); the fake's sandboxes.json (nothing running, no process
left), and a SIGTERM to the fake (exit status 0). Exits non-zero, saying what failed, on any
failure; --keep leaves the state directory (the fake's log is fake.log in it).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


class CheckFailed(Exception):
    pass


def check(cond, what: str) -> None:
    if not cond:
        raise CheckFailed(what)
    print(f"  ok: {what}", flush=True)


def https_get(url: str, ca: str, headers: dict) -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# --- the scenarios, run in a child process with the SDK configured by the environment ----------

def scenario_main(rex_server: str, ca: str, flavour: str) -> None:
    import modal
    import modal.exception

    token = "rex-" + secrets.token_hex(8)
    app = modal.App.lookup("rex-client-check", create_if_missing=True)
    check(app.app_id.startswith("ap-"), f"App.lookup(create_if_missing=True) -> {app.app_id}")
    image = modal.Image.from_registry("python:3.12").add_local_file(rex_server, "/rex/rex-server")
    sb = modal.Sandbox.create(
        "/rex/rex-server", "--host", "0.0.0.0", "--port", "8000",
        app=app, image=image, timeout=600, encrypted_ports=[8000],
        secrets=[modal.Secret.from_dict({"REX_AUTH_TOKEN": token})],
    )
    check(sb.object_id.startswith("sb-"), f"Sandbox.create -> {sb.object_id}")
    print(f"SANDBOX {sb.object_id}", flush=True)
    url = sb.tunnels()[8000].url
    check(url.startswith("https://127.0.0.1:"), f"tunnels()[8000].url = {url}")
    deadline = time.monotonic() + 30
    while True:
        try:
            status, body = https_get(url + "/is_alive", ca, {"X-API-Key": token})
            break
        except (urllib.error.URLError, ConnectionError, ssl.SSLError) as e:
            if time.monotonic() > deadline:
                raise CheckFailed(f"GET {url}/is_alive never answered: {e}")
            time.sleep(0.2)
    check(status == 200 and json.loads(body).get("is_alive") is True,
          f"GET {url}/is_alive with X-API-Key (CA-verified TLS) -> {status} {body.decode().strip()}")
    status, _ = https_get(url + "/is_alive", ca, {})
    check(status in (401, 403), f"GET /is_alive without the key -> {status} (REX_AUTH_TOKEN came from the secret)")
    p = sb.exec("echo", "hello from", flavour)
    out = p.stdout.read()
    p.wait()
    check(out == f"hello from {flavour}\n" and p.returncode == 0, f"exec echo -> {out!r}, rc {p.returncode}")
    check(sb.poll() is None, "poll() while running -> None")
    sb.terminate()
    sb.wait(raise_on_termination=False)
    check(sb.returncode == 137, f"terminate(); wait(raise_on_termination=False) -> returncode {sb.returncode}")

    # An entrypoint that exits at once.
    bad = modal.Sandbox.create("/rex/rex-server", "--no-such-flag", app=app, image=image, timeout=60,
                               encrypted_ports=[8000], secrets=[modal.Secret.from_dict({"REX_AUTH_TOKEN": token})])
    bad.wait(raise_on_termination=False)
    err = bad.stderr.read()
    check(bad.returncode not in (None, 0, 137), f"early exit: wait() -> returncode {bad.returncode}")
    check("no-such-flag" in err, f"early exit: stderr read back ({err.strip().splitlines()[0][:80]!r})")
    try:
        bad.tunnels()
        raise CheckFailed("early exit: tunnels() did not fail")
    except modal.exception.ConflictError as e:
        check(True, f"early exit: tunnels() -> ConflictError({e})")

    # A sandbox past its timeout.
    slow = modal.Sandbox.create("sleep", "300", app=app, image=image, timeout=2)
    try:
        slow.wait(raise_on_termination=False)
        raise CheckFailed("timeout: wait() returned instead of raising SandboxTimeoutError")
    except modal.exception.SandboxTimeoutError:
        pass
    check(slow.returncode == 124, f"timeout=2: SandboxTimeoutError, returncode {slow.returncode}")


def scenario_auth() -> None:
    import modal
    import modal.exception

    try:
        modal.App.lookup("rex-client-check", create_if_missing=True)
    except modal.exception.AuthError as e:
        check(True, f"wrong token secret -> modal.exception.AuthError: {e}")
        return
    raise CheckFailed("wrong token secret: App.lookup succeeded")


def scenario_profile() -> None:
    import modal

    app = modal.App.lookup("rex-client-check", create_if_missing=True)
    check(bool(app.app_id), f"token and server from the settings file's active profile: app {app.app_id}")


# --- the driver --------------------------------------------------------------------------------

def run_child(args, state: str, env_extra: dict, what: str, *child_args) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env["MODAL_CONFIG_PATH"] = os.path.join(state, "modal.toml")  # never the user's ~/.modal.toml
    env.update(env_extra)
    print(f"{what}:", flush=True)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *child_args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    lines = proc.stdout.splitlines()
    for line in lines:
        if not line.startswith("SANDBOX "):
            print(line)
    if proc.returncode != 0:
        raise CheckFailed(f"{what} failed (exit status {proc.returncode})")
    return lines


def read_state(state: str) -> dict:
    with open(os.path.join(state, "sandboxes.json")) as f:
        return json.load(f)


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def drive(args) -> None:
    rex_server = os.path.abspath(args.rex_server)
    if not os.path.isfile(rex_server) or not os.stat(rex_server).st_mode & 0o111:
        raise CheckFailed(f"{rex_server} is not an executable file")
    state = tempfile.mkdtemp(prefix="modal-fake-")
    args.state = state
    token_id, token_secret = "ak-" + secrets.token_hex(8), "as-" + secrets.token_hex(8)
    log = open(os.path.join(state, "fake.log"), "w")
    fake = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "modal_fake.py"), "--state-dir", state, "--token-id", token_id,
         "--token-secret", token_secret, "--fail-first", "1"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    args.fake = fake
    ready = fake.stdout.readline().split()
    if len(ready) < 2 or ready[0] != "READY":
        raise CheckFailed(f"the fake did not start: {ready}")
    port, ca = int(ready[1]), os.path.join(state, "ca.pem")
    print(f"fake: READY on 127.0.0.1:{port}, CA {ca}, state {state}")
    base = {"MODAL_SERVER_URL": f"http://127.0.0.1:{port}", "MODAL_TOKEN_ID": token_id,
            "MODAL_TOKEN_SECRET": token_secret}

    ids = []
    for flavour, v2 in (("V2", "1"), ("V1", "0")):
        lines = run_child(args, state, {**base, "MODAL_SANDBOX_V2": v2}, f"{flavour} (MODAL_SANDBOX_V2={v2})",
                          "--scenario", "main", "--rex-server", rex_server, "--ca", ca, "--flavour", flavour)
        ids += [line.split()[1] for line in lines if line.startswith("SANDBOX ")]
    run_child(args, state, {**base, "MODAL_TOKEN_SECRET": "as-wrong"}, "wrong token", "--scenario", "auth")
    # The settings file as rex's test of it writes one (tests/modal/test_modal.cpp): the active
    # profile gives the token and the server; MODAL_PROFILE picks another, whose token is refused.
    profiles = os.path.join(state, "profiles.toml")
    with open(profiles, "w") as f:
        f.write(f'[other]\ntoken_id = "ak-other"\ntoken_secret = "as-other"\n\n[fake]\n'
                f'token_id = "{token_id}"\ntoken_secret = "{token_secret}"\n'
                f'server_url = "{base["MODAL_SERVER_URL"]}"\nactive = true\n')
    run_child(args, state, {"MODAL_CONFIG_PATH": profiles}, "the active profile of a settings file",
              "--scenario", "profile")
    run_child(args, state, {"MODAL_CONFIG_PATH": profiles, "MODAL_PROFILE": "other",
                            "MODAL_SERVER_URL": base["MODAL_SERVER_URL"]},
              "MODAL_PROFILE=other (its token is wrong)", "--scenario", "auth")

    print("fake's state and log:")
    with open(os.path.join(state, "fake.log")) as f:
        fake_log = f.read()
    throttled = fake_log.count("SandboxCreateV2 -> UNAVAILABLE")
    creates = {sb["id"]: sb for sb in read_state(state)["sandboxes"]}
    check(throttled == 1 and ids and ids[0] in creates,
          "--fail-first 1: the first SandboxCreateV2 answered UNAVAILABLE, the SDK's retry created the sandbox")
    check(all(i in creates for i in ids) and {creates[i]["version"] for i in ids} == {1, 2},
          f"sandboxes.json lists the rex sandboxes of both flavours ({', '.join(ids)})")
    deadline = time.monotonic() + 5
    while True:
        sandboxes = read_state(state)["sandboxes"]
        running = [sb["id"] for sb in sandboxes if sb["state"] == "running"]
        alive = [p for sb in sandboxes for p in sb["alive_pids"]]
        if not running and not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    check(not running and not alive,
          f"sandboxes.json: {len(sandboxes)} sandboxes, none running, no process alive "
          f"(statuses: {sorted({sb['status'] for sb in sandboxes})})")
    leftover = [sb["pid"] for sb in sandboxes if sb["pid"] and pid_alive(sb["pid"])]
    check(not leftover, "no sandbox entrypoint process left on the host")
    fake.send_signal(signal.SIGTERM)
    rc = fake.wait(timeout=15)
    check(rc == 0, f"SIGTERM: the fake exited with status {rc}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rex-server", help="a rex-server binary (e.g. build/release/rex-server)")
    p.add_argument("--keep", action="store_true", help="keep the fake's state directory")
    p.add_argument("--scenario", help=argparse.SUPPRESS)
    p.add_argument("--ca", help=argparse.SUPPRESS)
    p.add_argument("--flavour", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.scenario:  # a child: report failures as a non-zero status with the reason
        try:
            if args.scenario == "main":
                scenario_main(args.rex_server, args.ca, args.flavour)
            elif args.scenario == "profile":
                scenario_profile()
            else:
                scenario_auth()
        except CheckFailed as e:
            print(f"  FAIL: {e}", flush=True)
            return 1
        except Exception as e:  # the SDK raised: say where and what, without the SDK's frames
            here = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == os.path.abspath(__file__)]
            where = f" at line {here[-1].lineno} ({here[-1].line})" if here else ""
            print(f"  FAIL{where}: {type(e).__module__}.{type(e).__name__}: {e}", flush=True)
            return 1
        return 0
    if not args.rex_server:
        p.error("--rex-server is required")
    args.fake, args.state = None, None
    try:
        drive(args)
        print("client_check: all checks passed")
        return 0
    except (CheckFailed, subprocess.TimeoutExpired) as e:
        print(f"client_check: FAILED: {e}", file=sys.stderr)
        if args.state and os.path.exists(os.path.join(args.state, "fake.log")):
            with open(os.path.join(args.state, "fake.log")) as f:
                tail = f.read().splitlines()[-25:]
            print("the end of the fake's log:\n  " + "\n  ".join(tail), file=sys.stderr)
        args.keep = True
        return 1
    finally:
        if args.fake and args.fake.poll() is None:
            args.fake.send_signal(signal.SIGTERM)
            try:
                args.fake.wait(timeout=15)
            except subprocess.TimeoutExpired:
                args.fake.kill()
        if args.state:
            if args.keep:
                print(f"state kept in {args.state}", file=sys.stderr)
            else:
                shutil.rmtree(args.state, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
