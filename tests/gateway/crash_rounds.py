#!/usr/bin/env python3
"""Rounds of load on a `rex gateway`, each ended by `kill -9`, each followed by a restart on the
same storage and a check of every promise the gateway makes about a crash.

Usage: crash_rounds.py PATH/TO/rex [--rounds N] [--provider local|docker] [--seed S]
                       [--image IMAGE] [--clients N] [--ready-limit SECONDS] [--slowdown F]
                       [--points A,B] [--no-kill-points]
                       [--checkpoints] [--json FILE] [--keep]

A round: client threads create sessions (each with an Idempotency-Key, some sent again with the
same body), run commands, write files and destroy sessions (with --checkpoints also: take
checkpoints, start sessions from them two at a time, rewind, pause with and without memory,
resume), until the gateway is killed: at a
random moment, or, on every other round, by itself at one of its crash points
(REX_CRASH_AT, taken in turn: before and after each write and each start of a create).
The gateway is started again on the same storage, and then, looking at the API and, directly,
at the processes, containers and files:
- lost: a session whose create was answered 201, and that nobody asked to destroy, is not
  `ready`, or no longer has a file whose write was answered (or a file as the checkpoint it was
  started from or rewound to had it), or does not run a command;
- resurrected: a session whose DELETE was answered is not `destroyed`;
- duplicates: one Idempotency-Key answered with two sessions, or, after the restart, the same key
  and body answer another session, or the key with another body is not refused (422);
- orphans: after the drift check has had its time (orphan_grace + drift_interval + 2 s), a
  sandbox server process or container of this gateway that no active session or spare owns, or a
  sandbox directory without its server;
- readiness: /readyz answered 200 later than --ready-limit (a release build's figure) times
  --slowdown (the build's: tests/CMakeLists.txt, REX_TEST_SLOWDOWN) after the restart began;
- checkpoints (--checkpoints): an acknowledged checkpoint nobody deleted is not listed ready, a
  listed one is not ready (half-made), a session paused or resumed when the gateway died does not
  resume and run a command, or an image (docker) or a copy (local) of a checkpoint is left that no
  listed checkpoint owns.
Every active session is then destroyed through the API, and that too must leave nothing.

Exit status 0 when every round kept every promise; 1 otherwise, naming each broken promise.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_process import (Gateway, is_spare, processes_naming,  # noqa: E402
                             read_sandbox_json)

NET_ERRORS = (OSError, http.client.HTTPException)  # the gateway went away mid-request

# Where the gateway kills itself (src/core/crash_point.hpp; the calls name each).
CRASH_POINTS = [
    "create.recorded",          # the session's record committed, nothing started
    "local.dir_made",           # local: the sandbox's directory made, sandbox.json not written
    "local.file_written",       # local: sandbox.json written (no pid), the server not started
    "local.server_started",     # local: the server spawned, its pid not yet in sandbox.json
    "local.pid_written",        # local: sandbox.json names the server's pid
    "local.spare_handed",       # local: a spare's sandbox.json names its new session
    "docker.container_created",  # docker: the container made, not started
    "docker.container_started",  # docker: the container started, its server not yet answering
    "create.sandbox_up",        # the sandbox answers; the record still says creating
    "create.ready",             # the record committed as ready, the answer not sent
    "destroy.stopping",         # the record committed as stopping, the sandbox not removed
    "destroy.removed",          # the sandbox removed, the record still stopping
]
# Where it kills itself with --checkpoints as well.
CHECKPOINT_POINTS = [
    "checkpoint.recorded",      # the checkpoint recorded as creating, its image not made
    "checkpoint.saved",         # its image made, the record still creating
    "replace.sandbox_up",       # a rewind's or resume's new sandbox runs, the record names the old
    "replace.recorded",         # the record names the new one, the old runs, the answer not sent
    "pause.recorded",           # a pause recorded, the sandbox not yet frozen or removed
]

ENVIRONMENT = {"local": "local", "docker": "Python3"}

# In Round.files: the file may not exist (a rewind cut off by the crash may have taken the
# session back to a checkpoint without it).
ABSENT = "(no such file)"


class Round:
    """What the clients of one round were told, and what they sent."""

    def __init__(self):
        self.lock = threading.Lock()
        self.created = {}          # sid -> {"key", "body"} (answered 201)
        self.keys = {}             # key -> set of sids it was answered with
        self.key_bodies = {}       # key -> body
        self.unanswered_keys = []  # keys whose create got no answer
        self.files = {}            # sid -> {path: [content of the last write answered, and of
                                   #                 each one sent after it, or of a rewind's
                                   #                 checkpoint when its answer was cut off]}
        self.checkpoint_files = {}  # checkpoint id -> {path: content}: its session's files then
        self.destroy_sent = set()
        self.destroyed = set()     # DELETE answered 200
        self.checkpoints = {}      # checkpoint id -> the session it was taken of (answered 201)
        self.paused = {}           # sid -> "sent", "memory" or "disk" (a pause sent or answered)
        self.ops = 0
        self.unexpected = []       # answers that are neither right nor a lost connection


class Checker:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.tmp = tempfile.mkdtemp(prefix="gwc-", dir="/tmp")
        self.storage = os.path.join(self.tmp, "s")
        self.sandboxes = os.path.join(self.storage, "sandboxes")
        self.config = os.path.join(self.tmp, "gateway.yaml")
        with open(self.config, "w") as f:
            f.write("orphan_grace: 1\ndrift_interval: 1\nsweep_interval: 0.2\n")
        self.gw = None
        self.gateway_id = None
        self.failures = []
        self.stats = {"rounds": 0, "creates_acknowledged": 0, "lost": 0, "duplicates": 0,
                      "orphans": 0, "resurrected": 0, "ready_s": [], "kill_points": {},
                      "operations": 0, "checkpoints_acknowledged": 0}
        self.provider = args.provider
        self.environment = ENVIRONMENT[args.provider]
        self.points = [p for p in args.points or
                       CRASH_POINTS + (CHECKPOINT_POINTS if args.checkpoints else [])
                       if not p.startswith(("local.", "docker."))
                       or p.startswith(self.provider + ".")]
        if not self.points:
            raise SystemExit(f"no crash point of --points applies to {self.provider}")

    # --- the gateway ----------------------------------------------------------------------------

    def start(self, crash_at=None):
        env = dict(os.environ)
        env.pop("REX_CRASH_AT", None)
        if crash_at:
            env["REX_CRASH_AT"] = crash_at
        args = ["--config", self.config]
        if self.provider == "docker":
            args += ["--python-image", self.args.image]
        self.gw = Gateway(self.args.rex, self.storage, args, env=env)
        began = time.monotonic()
        try:
            ready = self.gw.wait_ready(30)
        except AssertionError:
            # An armed point may be reached before readiness (a spare's start, say).
            if crash_at and self.gw.proc.poll() == -signal.SIGKILL:
                return None
            raise
        took = time.monotonic() - began
        if self.gateway_id is None:
            self.gateway_id = ready["gateway_id"]
        return took

    # --- the clients ----------------------------------------------------------------------------

    def body(self, n):
        return {"provider": self.provider, "environment": self.environment,
                "metadata": {"n": str(n)}, "timeout": 900, "max_lifetime": 3600}

    def client(self, rnd, rng, stop):
        gw = self.gw
        mine = []  # sessions this client created and may use
        n = 0
        while not stop.is_set():
            n += 1
            roll = rng.random()
            try:
                if self.args.checkpoints and mine and roll < 0.3:
                    self.checkpoint_op(gw, rnd, rng, mine)
                    roll = 1.0  # nothing else this turn
                if roll == 1.0:
                    pass
                elif roll < 0.35 or not mine:
                    self.create(gw, rnd, rng, mine, n)
                elif roll < 0.6:
                    self.command(gw, rnd, rng.choice(mine))
                elif roll < 0.85:
                    self.write(gw, rnd, rng, rng.choice(mine))
                else:
                    sid = mine.pop(rng.randrange(len(mine)))
                    self.destroy(gw, rnd, sid)
            except NET_ERRORS:
                # The gateway is gone: this client is done.
                if not gw.running():
                    return
            with rnd.lock:
                rnd.ops += 1

    def create(self, gw, rnd, rng, mine, n):
        with rnd.lock:
            retry = rnd.unanswered_keys and rng.random() < 0.3
            if retry:
                key = rnd.unanswered_keys.pop()
                body = rnd.key_bodies[key]
            else:
                key = uuid.uuid4().hex
                body = self.body(n)
                rnd.key_bodies[key] = body
        try:
            status, data = gw.json("POST", "/api/sessions", body,
                                   headers={"Idempotency-Key": key}, timeout=60)
        except NET_ERRORS:
            with rnd.lock:
                rnd.unanswered_keys.append(key)
            raise
        with rnd.lock:
            if status == 201:
                sid = data["session_id"]
                rnd.created[sid] = {"key": key, "body": body}
                rnd.keys.setdefault(key, set()).add(sid)
                mine.append(sid)
            else:
                rnd.unexpected.append(("create", status, data))

    def checkpoint_op(self, gw, rnd, rng, mine):
        """One of: a checkpoint, two sessions from one, a rewind, a pause, a resume."""
        sid = rng.choice(mine)
        kind = rng.choice(["checkpoint", "fork", "rewind", "pause", "resume"])
        with rnd.lock:
            ours = [c for c, owner in rnd.checkpoints.items() if owner == sid]
            any_cp = list(rnd.checkpoints)
            paused = rnd.paused.get(sid)
        if paused and kind not in ("resume", "checkpoint", "fork"):
            kind = "resume"
        if kind == "checkpoint" or (kind == "fork" and not any_cp) or \
                (kind == "rewind" and not ours):
            status, data = gw.json("POST", f"/api/sessions/{sid}/checkpoints", {}, timeout=60)
            with rnd.lock:
                if status == 201:
                    rnd.checkpoints[data["checkpoint_id"]] = sid
                    # A client's calls on a session come one after another: every write sent
                    # before the checkpoint was answered.
                    rnd.checkpoint_files[data["checkpoint_id"]] = {
                        path: contents[0] for path, contents in rnd.files.get(sid, {}).items()
                        if contents[0] is not None}
                elif status != 409:  # busy with another operation
                    rnd.unexpected.append(("checkpoint", sid, status, data))
        elif kind == "fork":
            cid = rng.choice(any_cp)
            status, data = gw.json("POST", "/api/sessions", {"checkpoint": cid, "count": 2},
                                   timeout=90)
            with rnd.lock:
                if status == 201:
                    for f in data["sessions"]:
                        if f["state"] == "ready":
                            rnd.created[f["session_id"]] = {"key": None, "body": None}
                            rnd.files[f["session_id"]] = {
                                path: [content]
                                for path, content in rnd.checkpoint_files[cid].items()}
                            mine.append(f["session_id"])
                else:
                    rnd.unexpected.append(("fork", cid, status, data))
        elif kind == "rewind":
            cid = rng.choice(ours)
            try:
                status, data = gw.json("POST", f"/api/sessions/{sid}/rewind",
                                       {"checkpoint": cid}, timeout=90)
            except NET_ERRORS:
                # Cut off: the rewind may have been recorded before the crash (its answer lost),
                # so each file reads as it did, or as the checkpoint has it.
                with rnd.lock:
                    files = rnd.files.setdefault(sid, {})
                    had = rnd.checkpoint_files[cid]
                    for path in set(files) | set(had):
                        files.setdefault(path, [ABSENT]).append(had.get(path, ABSENT))
                raise
            with rnd.lock:
                if status == 200:
                    # Its files are the checkpoint's now.
                    rnd.files[sid] = {path: [content]
                                      for path, content in rnd.checkpoint_files[cid].items()}
                elif status != 409:
                    rnd.unexpected.append(("rewind", sid, status, data))
        elif kind == "pause":
            memory = rng.random() < 0.5
            with rnd.lock:
                rnd.paused[sid] = "sent"
            status, data = gw.json("POST", f"/api/sessions/{sid}/pause", {"memory": memory},
                                   timeout=90)
            with rnd.lock:
                if status == 200:
                    rnd.paused[sid] = "memory" if memory else "disk"
                else:
                    rnd.paused.pop(sid, None)
                    if status != 409:
                        rnd.unexpected.append(("pause", sid, status, data))
        else:
            status, data = gw.json("POST", f"/api/sessions/{sid}/resume", {}, timeout=90)
            with rnd.lock:
                if status == 200:
                    rnd.paused.pop(sid, None)
                elif status != 409:
                    rnd.unexpected.append(("resume", sid, status, data))

    def command(self, gw, rnd, sid):
        with rnd.lock:
            if rnd.paused.get(sid):
                return  # refused while paused, as it should be
        status, data = gw.json("POST", f"/api/sessions/{sid}/execute",
                               {"code": f"echo {sid}", "language": "bash"}, timeout=60)
        if status != 200 or data.get("stdout") != f"{sid}\n":
            with rnd.lock:
                rnd.unexpected.append(("execute", sid, status, data))

    def write(self, gw, rnd, rng, sid):
        with rnd.lock:
            if rnd.paused.get(sid):
                return
        path = f"f{rng.randrange(3)}.txt"
        content = uuid.uuid4().hex
        with rnd.lock:
            rnd.files.setdefault(sid, {}).setdefault(path, [None]).append(content)
        status, data = gw.json("POST", f"/api/sessions/{sid}/files",
                               {"path": path, "content": content}, timeout=60)
        with rnd.lock:
            if status == 200:
                rnd.files[sid][path] = [content]  # what was sent before it is overwritten
            else:
                rnd.unexpected.append(("write", sid, status, data))

    def destroy(self, gw, rnd, sid):
        with rnd.lock:
            rnd.destroy_sent.add(sid)
        status, data = gw.json("DELETE", f"/api/sessions/{sid}", timeout=60)
        with rnd.lock:
            if status == 200 and data.get("state") == "destroyed":
                rnd.destroyed.add(sid)
            else:
                rnd.unexpected.append(("destroy", sid, status, data))

    # --- a round --------------------------------------------------------------------------------

    def run_round(self, number):
        rnd = Round()
        point = None
        if self.args.kill_points and number % 2 == 1:
            point = self.points[(number // 2) % len(self.points)]
            # The n-th time it is reached: the first creates of a round are not the only ones.
            point = f"{point}:{self.rng.randint(1, 3)}"
        self.start(crash_at=point)
        stop = threading.Event()
        threads = [threading.Thread(target=self.client,
                                    args=(rnd, random.Random(self.rng.random()), stop),
                                    daemon=True) for _ in range(self.args.clients)]
        for t in threads:
            t.start()
        if point:
            # The gateway kills itself; a point not reached in 20 s ends the round by kill -9.
            deadline = time.monotonic() + 20
            while self.gw.running() and time.monotonic() < deadline:
                time.sleep(0.01)
            reached = not self.gw.running()
            self.stats["kill_points"].setdefault(point.split(":")[0], [0, 0])
            self.stats["kill_points"][point.split(":")[0]][0 if reached else 1] += 1
        else:
            time.sleep(self.rng.uniform(0.05, self.args.longest_round))
        self.gw.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=90)
            if t.is_alive():
                self.fail(number, "a client hangs after the gateway was killed")
        self.stats["operations"] += rnd.ops
        self.stats["creates_acknowledged"] += len(rnd.created)
        if rnd.unexpected:
            self.fail(number, f"answers before the crash: {rnd.unexpected[:5]}")

        ready_s = self.start()
        self.stats["ready_s"].append(ready_s)
        limit = self.args.ready_limit * self.args.slowdown
        if ready_s > limit:
            self.fail(number, f"/readyz answered 200 {ready_s:.2f} s after the restart began "
                              f"(limit {limit:g} s: {self.args.ready_limit:g} s times this "
                              f"build's slowdown {self.args.slowdown:g})")
        self.check(number, rnd)
        self.clean_up(number)
        self.gw.terminate()
        self.stats["rounds"] += 1

    def fail(self, number, what):
        self.failures.append(f"round {number}: {what}")
        print(f"  FAIL round {number}: {what}", flush=True)

    # --- the checks -----------------------------------------------------------------------------

    def records(self):
        out, cursor = {}, ""
        while True:
            status, data = self.gw.json("GET", f"/api/sessions?limit=1000&cursor={cursor}")
            if status != 200:
                raise AssertionError(f"GET /api/sessions answered {status}: {data}")
            out.update((s["session_id"], s) for s in data["sessions"])
            cursor = data.get("next_cursor")
            if not cursor:
                return out

    def settled_records(self, timeout=30):
        """The records once no session is `creating` or `stopping`: the ends that reconcile
        decided run beside the requests (a server that ignores SIGTERM takes its grace)."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.records()
            unsettled = {sid: r["state"] for sid, r in records.items()
                         if r["state"] in ("creating", "stopping")}
            if not unsettled or time.monotonic() > deadline:
                return records, unsettled
            time.sleep(0.1)

    def check(self, number, rnd):
        gw = self.gw
        records, unsettled = self.settled_records()
        for sid, state in unsettled.items():
            self.fail(number, f"{sid} still {state} 30 s after the restart")
        survivors = [sid for sid in rnd.created if sid not in rnd.destroy_sent]
        for sid in survivors:
            rec = records.get(sid)
            if rec is None or rec["state"] != "ready":
                self.stats["lost"] += 1
                self.fail(number, f"lost: acknowledged session {sid} is "
                                  f"{rec and (rec['state'], rec.get('error'))}")
                continue
            if rec.get("paused"):
                # Paused when the gateway died (or its pause cut off): it resumes.
                status, data = gw.json("POST", f"/api/sessions/{sid}/resume", {}, timeout=90)
                if status != 200 or data.get("paused"):
                    self.stats["lost"] += 1
                    self.fail(number, f"lost: paused {sid} does not resume: {status} {data}")
                    continue
            status, data = gw.json("POST", f"/api/sessions/{sid}/execute",
                                   {"code": f"echo {sid}", "language": "bash"}, timeout=60)
            if status != 200 or data.get("stdout") != f"{sid}\n":
                self.stats["lost"] += 1
                self.fail(number, f"lost: {sid} runs no command after the restart: "
                                  f"{status} {data}")
            for path, contents in rnd.files.get(sid, {}).items():
                if contents[0] is None:
                    continue  # no write of it was answered
                # The last write answered, or one sent after it and cut off.
                status, _, got = gw.request("GET", f"/api/sessions/{sid}/files?path={path}")
                if not (status == 200 and got.decode() in contents
                        or status == 404 and ABSENT in contents):
                    self.stats["lost"] += 1
                    self.fail(number, f"lost: {sid}'s {path} reads {status} {got[:80]!r}, "
                                      f"not {' or '.join(map(repr, contents))}")
        for sid in rnd.destroyed:
            state = records.get(sid, {}).get("state")
            if state != "destroyed":
                self.stats["resurrected"] += 1
                self.fail(number, f"resurrected: {sid} was destroyed and is {state}")
        for sid in rnd.destroy_sent - rnd.destroyed:
            state = records.get(sid, {}).get("state")
            if state not in ("ready", "destroyed"):
                self.fail(number, f"{sid}, its DELETE cut off, is {state}")
        # A create whose answer the crash cut off: ready, or failed as interrupted.
        for sid, rec in records.items():
            if sid not in rnd.created and rec["state"] == "failed" \
                    and rec.get("reason") != "interrupted":
                self.fail(number, f"{sid} failed for {rec.get('reason')}: {rec.get('error')}")

        # Idempotency: one session per key, and the same after the restart.
        for key, sids in rnd.keys.items():
            if len(sids) > 1:
                self.stats["duplicates"] += 1
                self.fail(number, f"duplicate: key {key} answered {sorted(sids)}")
        for key, body in rnd.key_bodies.items():
            if key not in rnd.keys and key not in rnd.unanswered_keys:
                continue
            status, data = gw.json("POST", "/api/sessions", body,
                                   headers={"Idempotency-Key": key}, timeout=60)
            if key in rnd.keys:
                (sid,) = rnd.keys[key] if len(rnd.keys[key]) == 1 else (None,)
                if status != 201 or data.get("session_id") != sid:
                    self.stats["duplicates"] += 1
                    self.fail(number, f"duplicate: key {key} of {sid} now answers {status} "
                                      f"{data.get('session_id', data)}")
            elif status == 201 and data["session_id"] in records \
                    and records[data["session_id"]]["state"] != "ready":
                self.fail(number, f"key {key} of a cut-off create answers 201 with a session "
                                  f"that is {records[data['session_id']]['state']}")
        for key in list(rnd.keys)[:2]:
            status, data = gw.json("POST", "/api/sessions", {**rnd.key_bodies[key],
                                                             "metadata": {"other": "body"}},
                                   headers={"Idempotency-Key": key})
            if status != 422 or data.get("error", {}).get("code") != "idempotency.mismatch":
                self.stats["duplicates"] += 1
                self.fail(number, f"key {key} with another body answers {status} {data}")

        if self.args.checkpoints:
            self.check_checkpoints(number, rnd)
        self.check_orphans(number, "orphans")

    def listed_checkpoints(self):
        status, data = self.gw.json("GET", "/api/checkpoints")
        if status != 200:
            raise AssertionError(f"GET /api/checkpoints answered {status}: {data}")
        return {c["checkpoint_id"]: c for c in data["checkpoints"]}

    def check_checkpoints(self, number, rnd):
        listed = self.listed_checkpoints()
        for cid, owner in rnd.checkpoints.items():
            if cid not in listed:
                self.stats["lost"] += 1
                self.fail(number, f"lost: acknowledged checkpoint {cid} of {owner} is not listed")
        for cid, c in listed.items():
            if c["state"] != "ready":
                self.fail(number, f"half-made: checkpoint {cid} is listed {c['state']}")
        self.stats["checkpoints_acknowledged"] += len(rnd.checkpoints)

    def checkpoint_orphans(self):
        """Images (docker) or copies (local) of this gateway's checkpoints that no listed
        checkpoint owns."""
        listed = self.listed_checkpoints()
        found = []
        if self.provider == "local":
            root = os.path.join(self.storage, "checkpoints")
            for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
                if name not in listed:
                    found.append(f"checkpoint copy {name}")
        else:
            out = subprocess.run(
                ["docker", "images", "--filter", f"label=rex.gateway={self.gateway_id}",
                 "--filter", "label=rex.checkpoint", "--format", "{{.Tag}}"],
                capture_output=True, text=True, timeout=60)
            for tag in out.stdout.split():
                if tag not in listed:
                    found.append(f"checkpoint image rex-checkpoint:{tag}")
        return found

    def owned_sandboxes(self):
        """The sandbox ids an active session of the gateway owns."""
        return {r["sandbox_id"] for r in self.records().values()
                if r["state"] in ("creating", "ready", "stopping") and r.get("sandbox_id")}

    def find_orphans(self):
        owned = self.owned_sandboxes()
        found = []
        if self.provider == "local":
            prefix = self.sandboxes + "/"
            for pid, line in processes_naming(prefix).items():
                # The server's own command line names its socket: ROOT/ID/server.sock.
                sandbox = line.split(prefix, 1)[1].split("/", 1)[0]
                info = read_sandbox_json(self.sandboxes, sandbox)
                if sandbox in owned:
                    continue
                if is_spare(info) and info.get("gateway_id") == self.gateway_id:
                    continue  # a spare of the running gateway
                found.append(f"process {pid} of sandbox {sandbox} ({info})")
            for sandbox in sorted(os.listdir(self.sandboxes)) \
                    if os.path.isdir(self.sandboxes) else []:
                info = read_sandbox_json(self.sandboxes, sandbox)
                if sandbox not in owned and not is_spare(info):
                    found.append(f"directory {sandbox} ({info})")
        else:
            out = subprocess.run(
                ["docker", "ps", "-a", "--filter", f"label=rex.gateway={self.gateway_id}",
                 "--format", "{{.ID}} {{.Names}}"],
                capture_output=True, text=True, timeout=60)
            for line in out.stdout.split("\n"):
                if not line.strip():
                    continue
                cid, name = line.split(" ", 1)
                if name not in owned and cid not in owned and not any(
                        s.startswith(cid) for s in owned):
                    found.append(f"container {name}")
        return found

    def check_orphans(self, number, what):
        """Fails the round with `what` when orphans are left once the drift check has had its
        chance: it removes an orphan once it is orphan_grace (1 s) old, every drift_interval
        (1 s), so 2 s after readiness; a few more seconds cover a loaded machine."""
        deadline = time.monotonic() + self.args.orphan_wait
        while True:
            found = self.find_orphans()
            if self.args.checkpoints:
                found += self.checkpoint_orphans()
            if not found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if found:
            self.stats["orphans"] += len(found)
            self.fail(number, f"{what}: {found}")

    def clean_up(self, number):
        for sid, rec in self.records().items():
            if rec["state"] == "ready":
                status, data = self.gw.json("DELETE", f"/api/sessions/{sid}", timeout=60)
                if status != 200:
                    self.fail(number, f"DELETE {sid} after the checks: {status} {data}")
        if self.args.checkpoints:
            # Those built on others first: each pass deletes what nothing is built on any more.
            left = list(self.listed_checkpoints())
            for _ in range(len(left) + 1):
                kept = []
                for cid in left:
                    status, data = self.gw.json("DELETE", f"/api/checkpoints/{cid}", timeout=60)
                    if status == 409 and data.get("error", {}).get("code") == "checkpoint.in_use":
                        kept.append(cid)
                    elif status != 200:
                        self.fail(number, f"DELETE checkpoint {cid} after the checks: "
                                          f"{status} {data}")
                left = kept
            if left:
                self.fail(number, f"checkpoints that cannot be deleted: {left}")
        self.check_orphans(number, "left after every session was destroyed")

    def finish(self):
        if self.gw is not None and self.gw.running():
            self.gw.kill9()
        # A last gateway ends what the rounds left (its spares end with it).
        if os.path.isdir(self.storage):
            try:
                self.start()
                self.clean_up("end")
                self.gw.terminate()
            except AssertionError as e:
                self.failures.append(f"the final gateway: {e}")
        if not self.args.keep and not self.failures:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rex")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--provider", choices=sorted(ENVIRONMENT), default="local")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--ready-limit", type=float, default=1.0,
                        help="seconds from a restart to /readyz answering 200, in a release build")
    parser.add_argument("--slowdown", type=float, default=1.0,
                        help="how many times a release build's time this build takes (a "
                             "sanitized one's: tests/CMakeLists.txt, REX_TEST_SLOWDOWN); "
                             "--ready-limit is multiplied by it")
    parser.add_argument("--longest-round", type=float, default=None,
                        help="seconds before the random kill, at most (default: 1.5 for local, "
                             "4 for docker, whose creates take a second or more)")
    parser.add_argument("--image", default=os.environ.get("REX_TEST_IMAGE",
                                                          "rex-test-bookworm:latest"),
                        help="the docker provider's image (the environment Python3's)")
    parser.add_argument("--orphan-wait", type=float, default=10.0)
    parser.add_argument("--no-kill-points", dest="kill_points", action="store_false",
                        help="every round ends at a random moment")
    parser.add_argument("--points", type=lambda t: t.split(","),
                        help="the crash points to take in turn (comma-separated; default all)")
    parser.add_argument("--checkpoints", action="store_true",
                        help="the clients also take checkpoints, fork, rewind, pause and resume")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the storage folder")
    args = parser.parse_args()
    if args.longest_round is None:
        args.longest_round = 1.5 if args.provider == "local" else 4.0
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    print(f"crash rounds: {args.rounds} on {args.provider}, seed {args.seed} "
          f"(--seed {args.seed} makes the same choices)", flush=True)
    checker = Checker(args)
    began = time.monotonic()
    try:
        for n in range(args.rounds):
            checker.run_round(n)
            s = checker.stats
            print(f"round {n}: {s['operations']} operations, {s['creates_acknowledged']} creates "
                  f"acknowledged so far; ready in {s['ready_s'][-1]:.3f} s", flush=True)
    finally:
        checker.finish()
    s = checker.stats
    ready = sorted(s["ready_s"]) or [0]
    summary = {"rounds": s["rounds"], "seed": args.seed, "provider": args.provider,
               "operations": s["operations"], "creates_acknowledged": s["creates_acknowledged"],
               "lost": s["lost"], "duplicates": s["duplicates"], "orphans": s["orphans"],
               "resurrected": s["resurrected"], "ready_max_s": ready[-1],
               "ready_p50_s": ready[len(ready) // 2], "kill_points": s["kill_points"],
               "failures": checker.failures, "seconds": time.monotonic() - began}
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if checker.failures:
        print(f"{len(checker.failures)} broken promises; storage kept in {checker.tmp}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
