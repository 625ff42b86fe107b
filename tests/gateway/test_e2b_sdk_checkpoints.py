#!/usr/bin/env python3
"""E2B's Python SDK (pinned in tests/swerex/requirements.txt), unchanged, doing what it offers
for a sandbox's state against a rex gateway, on the docker provider (containers) and the local
one (processes in a directory of their own): pause keeping memory and not, resume through connect, snapshots (create, list, delete, and
Sandbox.create from one), fork with a count (of a running and of a paused sandbox), and metrics.

Usage: PYTHON test_e2b_sdk_checkpoints.py PATH/TO/rex [unittest arguments]
(PYTHON: one with the `e2b` package; without it the test exits 77, skipped, saying why.)
"""

import os
import sys
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_docker as tgd  # noqa: E402

try:
    from e2b import Sandbox, SandboxQuery, SandboxState
except ImportError as e:  # pragma: no cover - the environment decides
    print(f"skipped: E2B's Python SDK is not installed in {sys.executable}: {e}")
    sys.exit(77)

KEY = "e2b-ckpt-" + uuid.uuid4().hex[:8]


class Checkpoints:
    """The test, on the provider of the template the subclass names."""
    tenant_keys = {"team-a": KEY}
    default_key = KEY
    template = None

    def setUp(self):
        super().setUp()
        tgd.point_e2b_sdks_at(self.gw.url, KEY)  # envd calls go through the gateway too

    def sandbox(self, template=None, **kwargs):
        sbx = Sandbox.create(template or self.template, timeout=300, **kwargs)
        self.known_sids.add(sbx.sandbox_id)
        return sbx

    def test_pause_connect_snapshots_fork_metrics(self):
        sbx = self.sandbox(metadata={"run": "ckpt"})
        sbx.files.write("state.txt", "base")
        sleeper = sbx.commands.run("sleep 600", background=True)

        metrics = sbx.get_metrics()
        self.assertEqual(len(metrics), 1, metrics)
        self.assertGreater(metrics[0].cpu_count, 0, metrics)
        self.assertGreater(metrics[0].mem_used, 0, metrics)
        self.assertGreater(metrics[0].disk_total, 0, metrics)

        # Snapshots: made, listed, a sandbox started from one, deleted.
        snap = sbx.create_snapshot(name="step-1")
        self.assertTrue(snap.snapshot_id.startswith("ckpt-"), snap)
        self.assertEqual(snap.names, ["step-1"], snap)
        listed = Sandbox.list_snapshots(sandbox_id=sbx.sandbox_id).next_items()
        self.assertEqual([s.snapshot_id for s in listed], [snap.snapshot_id], listed)
        child = self.sandbox(snap.snapshot_id)
        self.assertEqual(child.files.read("state.txt"), "base")
        child.files.write("state.txt", "child")
        self.assertEqual(sbx.files.read("state.txt"), "base")
        child.kill()
        self.assertTrue(Sandbox.delete_snapshot(snap.snapshot_id))
        self.assertFalse(Sandbox.delete_snapshot(snap.snapshot_id))

        # Forks of a running sandbox: one result per fork, each a sandbox of its own.
        forks = sbx.fork(count=2)
        self.assertEqual(len(forks), 2, forks)
        for f in forks:
            self.assertIsInstance(f, Sandbox, forks)
            self.known_sids.add(f.sandbox_id)
            self.assertEqual(f.files.read("state.txt"), "base")
        forks[0].files.write("state.txt", "fork0")
        self.assertEqual(forks[1].files.read("state.txt"), "base")
        for f in forks:
            f.kill()

        # Pause keeping memory: the background process is the same one after connect.
        self.assertTrue(sbx.pause())
        self.assertFalse(sbx.pause())  # paused already
        self.assertEqual(Sandbox.get_info(sbx.sandbox_id).state, "paused")
        paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
        self.assertEqual([p.sandbox_id for p in paused], [sbx.sandbox_id], paused)
        # A fork of the paused sandbox works.
        forks = Sandbox.fork(sbx.sandbox_id, count=1)
        self.assertIsInstance(forks[0], Sandbox, forks)
        self.known_sids.add(forks[0].sandbox_id)
        self.assertEqual(forks[0].files.read("state.txt"), "base")
        forks[0].kill()
        sbx = Sandbox.connect(sbx.sandbox_id)
        self.assertEqual(Sandbox.get_info(sbx.sandbox_id).state, "running")
        pids = [p.pid for p in sbx.commands.list()]
        self.assertIn(sleeper.pid, pids)

        # Pause without memory: the files come back, the processes do not.
        self.assertTrue(sbx.pause(keep_memory=False))
        sbx = Sandbox.connect(sbx.sandbox_id)
        self.assertEqual(sbx.files.read("state.txt"), "base")
        self.assertNotIn(sleeper.pid, [p.pid for p in sbx.commands.list()])
        sbx.kill()
        # What the forks and the pause made for themselves went with them.
        self.assertEqual(Sandbox.list_snapshots().next_items(), [])


class OnDocker(Checkpoints, tgd.ContainerGatewayTestCase):
    template = "Python3"  # the gateway's environment whose provider is docker


class OnLocal(Checkpoints, tgd.tg.GatewayTestCase):
    template = "base"  # E2B's default: the gateway's `local`


if __name__ == "__main__":
    tgd.tg.main()
