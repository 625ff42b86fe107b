#!/usr/bin/env python3
"""Checkpoints of the gateway's sessions on the docker provider (and podman), through the
gateway's own API: take one, start sessions from it (a count of them, quota counted), rewind,
pause with and without memory, resume, metrics, the checkpoint tree, deletion, and a gateway
killed in the middle of a checkpoint.

Usage: test_gateway_checkpoints.py PATH/TO/rex [unittest arguments]

Every test removes what it made, and fails when a container or a checkpoint image of its gateway
is left behind.
"""

import json
import os
import sys
import unittest
import uuid

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402
import test_gateway_docker as tgd  # noqa: E402
from gateway_process import wait_until  # noqa: E402

DOCKER = tgd.DOCKER
PODMAN = tgd.PODMAN
# What set_up() leaves in the notebook's shell, as state_of() prints it.
SET_UP_STATE = "/srv/repo\nbase\nfix the bug\nscore 7\n/srv/venv\n"


def images(cli, *label_filters):
    args = ["images", "-q", "--no-trunc"]
    for f in label_filters:
        args += ["--filter", f"label={f}"]
    # Newest first, as the engine lists them: a checkpoint of a fork goes before its parent.
    return list(dict.fromkeys(i for i in tgd.engine(cli, *args).split() if i))


class CheckpointTestCase(tgd.ContainerGatewayTestCase):

    def setUp(self):
        self.addCleanup(self.check_no_images_left)
        super().setUp()

    def check_no_images_left(self):
        if not getattr(self, "gateway_id", None):
            return
        left = []
        for cli in ("docker", "podman"):
            for i in images(cli, f"rex.gateway={self.gateway_id}", "rex.checkpoint"):
                left.append(f"{cli} {i[:19]}")
                tgd.engine(cli, "rmi", "-f", i, check=False)
        self.assertEqual(left, [], "checkpoint images left behind")

    def api(self, method, path, body=None, expect=200, gw=None):
        status, data = (gw or self.gw).json(method, path, body)
        if expect is not None:
            self.assertEqual(status, expect, f"{method} {path} {body!r}: {data!r}")
        return data

    def bash(self, sid, code, expect=200):
        return self.execute(sid, code, "bash", expect=expect)

    def set_up(self, body=DOCKER):
        rec = self.create(body)
        sid = rec["session_id"]
        out = self.bash(sid, "mkdir -p /srv/repo && cd /srv/repo && echo base > state.txt && "
                             "python3 -m venv --without-pip /srv/venv && "
                             "source /srv/venv/bin/activate && export TASK='fix the bug' && "
                             "score() { echo \"score $1\"; }")
        self.assertEqual(out["exit_code"], 0, out)
        return rec

    def state_of(self, sid):
        out = self.bash(sid, "pwd; cat state.txt; echo \"$TASK\"; score 7; echo $VIRTUAL_ENV")
        return out["stdout"]

    def checkpoint(self, sid, metadata=None):
        body = {"metadata": metadata} if metadata else {}
        cp = self.api("POST", f"/api/sessions/{sid}/checkpoints", body, expect=201)
        self.assertTrue(cp["checkpoint_id"].startswith("ckpt-"), cp)
        self.assertEqual((cp["session_id"], cp["state"]), (sid, "ready"), cp)
        return cp

    def destroy(self, sid):
        self.api("DELETE", f"/api/sessions/{sid}")

    def test_fork_rewind_and_the_tree(self):
        rec = self.set_up()
        sid = rec["session_id"]
        cp = self.checkpoint(sid, {"step": 1})
        self.assertIn("notebook", cp["sessions"], cp)
        self.assertIsNone(cp["parent"], cp)

        forked = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"],
                                                    "count": 3}, expect=201)
        forks = [f["session_id"] for f in forked["sessions"]]
        self.known_sids.update(forks)
        self.assertEqual(len(set(forks)), 3, forked)
        for f in forked["sessions"]:
            self.assertEqual((f["state"], f["provider"], f["origin_checkpoint"]),
                             ("ready", "docker", cp["checkpoint_id"]), f)
        for i, f in enumerate(forks):
            self.assertEqual(self.state_of(f), SET_UP_STATE, f)
            self.bash(f, f"echo fork{i} > state.txt")
        self.assertEqual(self.bash(forks[1], "cat state.txt")["stdout"], "fork1\n")
        self.assertEqual(self.bash(sid, "cat state.txt")["stdout"], "base\n")

        # A checkpoint of a fork is a child of the one it came from.
        child = self.checkpoint(forks[0])
        self.assertEqual(child["parent"], cp["checkpoint_id"], child)
        tree = {c["checkpoint_id"]: c for c in
                self.api("GET", "/api/checkpoints")["checkpoints"]}
        self.assertEqual(tree[cp["checkpoint_id"]]["children"], [child["checkpoint_id"]], tree)

        # Rewind: the session's id stays, its sandbox and state go back.
        self.bash(sid, "echo later > state.txt; cd /; export TASK=other")
        rewound = self.api("POST", f"/api/sessions/{sid}/rewind",
                           {"checkpoint": cp["checkpoint_id"]})
        self.assertEqual(rewound["session_id"], sid)
        self.assertNotEqual(rewound["sandbox_id"], rec["sandbox_id"], rewound)
        self.assertEqual(self.state_of(sid), SET_UP_STATE)
        wait_until(lambda: not tgd.exists("docker", rec["sandbox_id"]), 30,
                   what="the rewound session's old container to go")

        # Bad input changes nothing.
        err = self.api("POST", f"/api/sessions/{sid}/rewind",
                       {"checkpoint": child["checkpoint_id"]}, expect=422)
        self.assertEqual(err["error"]["code"], "checkpoint.other_session", err)
        err = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"], "count": 0},
                       expect=422)
        self.assertIn("count", err["error"]["message"], err)
        err = self.api("POST", "/api/sessions", {"checkpoint": "ckpt-0000000000000000"},
                       expect=404)
        self.assertEqual(err["error"]["code"], "checkpoint.not_found", err)
        err = self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}", expect=409)
        self.assertEqual(err["error"]["code"], "checkpoint.in_use", err)
        self.assertEqual(self.state_of(sid), SET_UP_STATE)

        # The transcript and the event log say what happened.
        status, log = self.gw.request("GET", f"/api/sessions/{sid}/log")[0::2]
        calls = [json.loads(line).get("call") for line in log.decode().splitlines()]
        self.assertIn("checkpoint", calls)
        self.assertIn("rewind", calls)

        for s in [sid, *forks]:
            self.destroy(s)
        self.api("DELETE", f"/api/checkpoints/{child['checkpoint_id']}")
        self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}")
        self.assertEqual(self.api("GET", "/api/checkpoints")["checkpoints"], [])

    def test_forks_count_against_the_quota(self):
        self.gw.kill9()
        self.gw = self.start_gateway(extra_args=("--max-sessions", "3"))
        sid = self.set_up()["session_id"]
        cp = self.checkpoint(sid)
        err = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"], "count": 3},
                       expect=429)
        self.assertEqual(err["error"]["code"], "quota.max_sessions", err)
        self.assertEqual(len([s for s in self.list_sessions() if s["state"] == "ready"]), 1)
        forked = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"],
                                                    "count": 2}, expect=201)
        self.known_sids.update(f["session_id"] for f in forked["sessions"])
        for f in forked["sessions"]:
            self.destroy(f["session_id"])
        self.destroy(sid)
        self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}")

    def test_pause_resume_and_metrics(self):
        sid = self.set_up()["session_id"]
        self.execute(sid, "x = 41")
        m = self.api("GET", f"/api/sessions/{sid}/metrics")
        self.assertGreater(m["memory_used"], 0, m)
        self.assertGreater(m["cpu_count"], 0, m)

        # Keeping memory: frozen, refused calls, the same processes after.
        paused = self.api("POST", f"/api/sessions/{sid}/pause", {"memory": True})
        self.assertEqual(paused["paused"], "memory", paused)
        self.assertEqual(paused["expires_at"], paused["deadline"], paused)
        self.assertEqual(tgd.engine("docker", "inspect", "--format", "{{.State.Status}}",
                                    paused["sandbox_id"]), "paused")
        err = self.execute(sid, "x", expect=409)
        self.assertEqual(err["error"]["code"], "session.paused", err)
        # A fork of the paused sandbox.
        cp = self.checkpoint(sid)
        forked = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"]},
                          expect=201)
        self.known_sids.add(forked["session_id"])
        self.assertEqual(self.state_of(forked["session_id"]), SET_UP_STATE)
        self.destroy(forked["session_id"])
        resumed = self.api("POST", f"/api/sessions/{sid}/resume")
        self.assertNotIn("paused", resumed)
        self.assertEqual(self.execute(sid, "x + 1")["results"], [{"type": "text", "text": "42"}])

        # Without memory: the container goes, the session waits on its checkpoint.
        container = resumed["sandbox_id"]
        paused = self.api("POST", f"/api/sessions/{sid}/pause", {"memory": False})
        self.assertEqual((paused["paused"], paused["sandbox_id"]), ("disk", ""), paused)
        self.assertFalse(tgd.exists("docker", container))
        self.assertEqual(self.api("GET", f"/api/sessions/{sid}/metrics")["memory_used"], 0)
        resumed = self.api("POST", f"/api/sessions/{sid}/resume")
        self.assertNotEqual(resumed["sandbox_id"], container)
        self.assertEqual(self.state_of(sid), SET_UP_STATE)

        # A memory-paused session is destroyed like any other.
        self.api("POST", f"/api/sessions/{sid}/pause")
        self.destroy(sid)
        self.assertFalse(tgd.exists("docker", resumed["sandbox_id"]))
        self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}")
        # The pause's own checkpoint went with the session.
        self.assertEqual(self.api("GET", "/api/checkpoints")["checkpoints"], [])

    def test_a_gateway_killed_mid_checkpoint_offers_nothing_and_leaves_nothing(self):
        sid = self.set_up()["session_id"]
        self.crash_at_point("checkpoint.saved",
                           lambda gw: gw.json("POST", f"/api/sessions/{sid}/checkpoints", {},
                                              timeout=60))
        gw = self.start_gateway()
        self.gw = gw
        self.assertEqual(self.api("GET", "/api/checkpoints")["checkpoints"], [])
        self.assertEqual(images("docker", f"rex.gateway={self.gateway_id}", "rex.checkpoint"),
                         [])
        # The session goes on, and a checkpoint now works.
        self.assertEqual(self.state_of(sid), SET_UP_STATE)
        cp = self.checkpoint(sid)
        self.destroy(sid)
        self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}")

    def crash_at_point(self, point, action):
        """Starts a gateway armed to kill itself at `point`, runs `action`, waits for the kill."""
        self.gw.kill9()
        env = self.gateway_env
        self.gateway_env = {**(env or {}), "REX_CRASH_AT": point}
        try:
            self.gw = self.start_gateway()
        finally:
            self.gateway_env = env
        try:
            action(self.gw)
        except tg.NET_ERRORS:
            pass
        self.gw.proc.wait(timeout=30)
        self.gw.kill9()
        self.assertIn(f"crash point {point} reached", self.gw.output())

    def test_podman_checkpoint_and_fork(self):
        sid = self.set_up(PODMAN)["session_id"]
        cp = self.checkpoint(sid)
        forked = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"]},
                          expect=201)
        self.known_sids.add(forked["session_id"])
        self.assertEqual(forked["provider"], "podman", forked)
        self.assertEqual(self.state_of(forked["session_id"]), SET_UP_STATE)
        self.destroy(forked["session_id"])
        self.destroy(sid)
        self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}")


class LocalCheckpoints(tg.GatewayTestCase):
    """The local provider: a checkpoint copies the sandbox's working directory; a sandbox from it
    works in a directory of its own, and its sessions' paths move there."""

    def api(self, method, path, body=None, expect=200):
        status, data = self.gw.json(method, path, body)
        if expect is not None:
            self.assertEqual(status, expect, f"{method} {path} {body!r}: {data!r}")
        return data

    def test_fork_rewind_pause_move_the_sessions_paths(self):
        rec = self.create()
        sid = rec["session_id"]
        self.execute(sid, "mkdir -p repo && cd repo && echo base > f && "
                          "python3 -m venv --without-pip venv && source venv/bin/activate",
                     "bash")

        def state(s):
            return self.execute(s, "pwd; cat f; echo $VIRTUAL_ENV", "bash")["stdout"]

        def expected(wd):
            return f"{wd}/repo\nbase\n{wd}/repo/venv\n"

        cp = self.api("POST", f"/api/sessions/{sid}/checkpoints", {}, expect=201)
        fork = self.api("POST", "/api/sessions", {"checkpoint": cp["checkpoint_id"]}, expect=201)
        self.known_sids.add(fork["session_id"])
        self.assertNotEqual(fork["working_dir"], rec["working_dir"], fork)
        self.assertEqual(state(fork["session_id"]), expected(fork["working_dir"]))
        self.execute(fork["session_id"], "echo fork > f", "bash")
        self.assertEqual(state(sid), expected(rec["working_dir"]))

        self.execute(sid, "echo later > f; cd /", "bash")
        rewound = self.api("POST", f"/api/sessions/{sid}/rewind",
                           {"checkpoint": cp["checkpoint_id"]})
        self.assertEqual(state(sid), expected(rewound["working_dir"]))

        self.execute(sid, "x = 7")
        self.api("POST", f"/api/sessions/{sid}/pause", {"memory": True})
        self.assertEqual(self.execute(sid, "x", expect=409)["error"]["code"], "session.paused")
        self.api("POST", f"/api/sessions/{sid}/resume")
        self.assertEqual(self.execute(sid, "x")["results"], [{"type": "text", "text": "7"}])
        self.api("POST", f"/api/sessions/{sid}/pause", {"memory": False})
        resumed = self.api("POST", f"/api/sessions/{sid}/resume")
        self.assertEqual(state(sid), expected(resumed["working_dir"]))

        for s in (sid, fork["session_id"]):
            self.api("DELETE", f"/api/sessions/{s}")
        self.api("DELETE", f"/api/checkpoints/{cp['checkpoint_id']}")
        self.assertEqual(self.api("GET", "/api/checkpoints")["checkpoints"], [])
        left = os.listdir(os.path.join(self.storage, "checkpoints"))
        self.assertEqual(left, [], "checkpoint copies left behind")


class CheckpointTenants(tg.GatewayTestCase):
    """Another tenant's checkpoint is no checkpoint at all: not listed, not read, not forked,
    not rewound to, not deleted; and nothing of it changes."""
    tenant_keys = {"A": "key-a-" + uuid.uuid4().hex, "B": "key-b-" + uuid.uuid4().hex}
    default_key = tenant_keys["A"]

    def test_a_checkpoint_of_another_tenant_is_not_found(self):
        a = self.auth(self.tenant_keys["A"])
        b = self.auth(self.tenant_keys["B"])
        mine = self.create(headers=a)["session_id"]
        theirs = self.create(headers=b)["session_id"]
        status, cp = self.gw.json("POST", f"/api/sessions/{mine}/checkpoints", {}, a)
        self.assertEqual(status, 201, cp)
        cid = cp["checkpoint_id"]
        for method, path, body in [("GET", f"/api/checkpoints/{cid}", None),
                                   ("DELETE", f"/api/checkpoints/{cid}", None),
                                   ("POST", "/api/sessions", {"checkpoint": cid}),
                                   ("POST", f"/api/sessions/{theirs}/rewind", {"checkpoint": cid})]:
            status, err = self.gw.json(method, path, body, b)
            self.assertEqual((status, err["error"]["code"]), (404, "checkpoint.not_found"),
                             f"{method} {path}: {err}")
        status, listed = self.gw.json("GET", "/api/checkpoints", None, b)
        self.assertEqual((status, listed["checkpoints"]), (200, []), listed)
        # A session of another tenant cannot be checkpointed either.
        status, err = self.gw.json("POST", f"/api/sessions/{theirs}/checkpoints", {}, a)
        self.assertEqual((status, err["error"]["code"]), (404, "session.not_found"), err)
        status, listed = self.gw.json("GET", "/api/checkpoints", None, a)
        self.assertEqual([c["checkpoint_id"] for c in listed["checkpoints"]], [cid], listed)
        for sid, h in ((mine, a), (theirs, b)):
            self.assertEqual(self.gw.json("DELETE", f"/api/sessions/{sid}", None, h)[0], 200)
        self.assertEqual(self.gw.json("DELETE", f"/api/checkpoints/{cid}", None, a)[0], 200)


if __name__ == "__main__":
    tg.main()
