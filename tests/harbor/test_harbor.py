#!/usr/bin/env python3
"""Harbor (PyPI harbor 0.25.0 with its e2b extra, pinned in tests/harbor/requirements.txt), its
`e2b` environment and its oracle agent, unchanged, against a rex gateway whose sandboxes are
containers: Harbor builds the task's template from its Dockerfile (FROM the project's local
image, ENV, WORKDIR, COPY, RUN) on the gateway, runs the solution and the verifier in a sandbox
of it, and reads the reward: 1.0 for the task's solution, 0.0 for a wrong one. A second run of
the same task finds the template built. Harbor's usage reporting is off and LiteLLM's price list
is local, so nothing leaves the machine.

Usage: python3 test_harbor.py PATH/TO/rex [unittest arguments]
(REX_HARBOR_BIN: the directory with Harbor's `harbor`, made by scripts/harbor.sh's
rex_harbor_env; the test fails naming it when it is missing.)
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gateway"))
import test_gateway_docker as tgd  # noqa: E402

KEY = "harbor-" + uuid.uuid4().hex[:8]
HARBOR_BIN = os.environ.get("REX_HARBOR_BIN", "")


class Harbor(tgd.ContainerGatewayTestCase):
    tenant_keys = {"team-a": KEY}
    default_key = KEY

    def setUp(self):
        harbor = os.path.join(HARBOR_BIN, "harbor")
        if not HARBOR_BIN or not os.access(harbor, os.X_OK):
            self.fail(f"Harbor is not installed at REX_HARBOR_BIN={HARBOR_BIN!r}: run "
                      "scripts/harbor.sh's rex_harbor_env (the README's test command does)")
        self.harbor = harbor
        super().setUp()

    def run_task(self, task):
        """Runs Harbor's oracle on a copy of the task (named after this test, so that the
        template's name is new); returns its trial's result.json."""
        work = tempfile.mkdtemp(prefix="harbor-", dir=self.tmp)
        copy = os.path.join(work, task)
        shutil.copytree(os.path.join(HERE, task), copy)
        jobs = os.path.join(work, "jobs")
        env = {**os.environ,
               "HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "E2B_API_KEY": KEY, "E2B_API_URL": self.gw.url, "E2B_SANDBOX_URL": self.gw.url}
        env.pop("E2B_DOMAIN", None)
        started = time.monotonic()
        run = subprocess.run([self.harbor, "run", "-a", "oracle", "-e", "e2b", "-p", copy,
                              "-o", jobs, "-y"], env=env, capture_output=True, text=True,
                             timeout=600)
        took = time.monotonic() - started
        results = glob.glob(os.path.join(jobs, "*", "*", "result.json"))
        self.assertEqual(len(results), 1,
                         f"harbor exited {run.returncode} after {took:.1f} s without one trial "
                         f"result:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        with open(results[0]) as f:
            result = json.load(f)
        return result, run

    def reward(self, result, run):
        exc = result.get("exception_info")
        self.assertIsNone(exc, f"the trial failed: {json.dumps(exc)[:3000]}\n"
                               f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        return ((result.get("verifier_result") or {}).get("rewards") or {}).get("reward")

    def test_oracle_gets_one_and_a_wrong_solution_zero(self):
        result, run = self.run_task("task")
        self.assertEqual(self.reward(result, run), 1.0)
        # Again: the template is found built (no second build), and the reward is the same.
        builds_before = self.template_builds()
        result, run = self.run_task("task")
        self.assertEqual(self.reward(result, run), 1.0)
        self.assertEqual(self.template_builds(), builds_before)
        result, run = self.run_task("task_wrong")
        self.assertEqual(self.reward(result, run), 0.0)

    def template_builds(self):
        status, templates = self.gw.json("GET", "/templates")
        self.assertEqual(status, 200, templates)
        return sum(t["buildCount"] for t in templates)


if __name__ == "__main__":
    tgd.tg.main()
