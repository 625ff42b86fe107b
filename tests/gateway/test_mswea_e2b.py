#!/usr/bin/env python3
"""mini-swe-agent (2.4.6, unchanged: its DefaultAgent, its default config's templates and its
DeterministicModel) with an E2B environment (mswea_e2b.py: the template built from a Docker
image through E2B's template API, every action a command in a sandbox of it) against a rex gateway
on Docker: the same scripted task as the SWE-ReX test (tests/swerex/test_mini_swe_agent.py)
solved and submitted; a second environment of the same image finds the template built.

Usage: PYTHON test_mswea_e2b.py PATH/TO/rex [unittest arguments]
(PYTHON: the test environment's, with e2b and minisweagent; without them it exits 77.)
"""

import os
import sys
import uuid

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "swerex"))
import test_gateway_docker as tgd  # noqa: E402

try:
    import test_mini_swe_agent as task  # the scripted task (it sets mini-swe-agent's config up)
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_from_spec
    from minisweagent.models.test_models import DeterministicModel
    from mswea_e2b import E2BEnvironment
except ImportError as e:  # pragma: no cover - the environment decides
    print(f"skipped: mini-swe-agent or E2B's SDK is not installed in {sys.executable}: {e}")
    sys.exit(77)

KEY = "mswea-" + uuid.uuid4().hex[:8]


class MiniSweAgentOnE2B(tgd.ContainerGatewayTestCase):
    tenant_keys = {"team-a": KEY}
    default_key = KEY

    def setUp(self):
        super().setUp()
        tgd.point_e2b_sdks_at(self.gw.url, KEY)

    def environment(self):
        env = E2BEnvironment(image=task.BASE, cwd=task.WORKDIR, timeout=30)
        self.known_sids.add(env.sandbox.sandbox_id)
        self.addCleanup(env.cleanup)
        return env

    def test_agent_fixes_a_bug_and_submits(self):
        env = self.environment()
        self.assertTrue(any("Step" in line for line in env.build_logs), env.build_logs)
        env.sandbox.files.write(f"{task.WORKDIR}/calc.py", task.BUGGY_PROGRAM)
        outputs = task._scripted_outputs()
        agent_config = get_config_from_spec("default.yaml")["agent"]
        agent = DefaultAgent(DeterministicModel(outputs=outputs), env,
                             **{**agent_config, "step_limit": len(outputs)})
        uname = env.sandbox.commands.run("uname -s; uname -r; uname -v; uname -m").stdout
        system, release, version, machine = uname.splitlines()
        result = agent.run("total(10) in calc.py must be 55; fix it.", system=system,
                           release=release, version=version, machine=machine)
        self.assertEqual(result["exit_status"], "Submitted", agent.messages[-1])
        self.assertEqual(result["submission"], task.EXPECTED_SUBMISSION)
        observations = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
        self.assertEqual(len(observations), len(task.STEPS), observations)
        for (command, expected), observation in zip(task.STEPS, observations):
            for text in expected:
                self.assertIn(text, observation, command)
        self.assertIn("return sum(range(1, n + 1))",
                      env.sandbox.files.read(f"{task.WORKDIR}/calc.py"))

        # Another environment of the same image: the template is found, not built again.
        second = E2BEnvironment(image=task.BASE, cwd=task.WORKDIR, timeout=30)
        self.known_sids.add(second.sandbox.sandbox_id)
        self.addCleanup(second.cleanup)
        self.assertFalse(hasattr(second, "build_logs"))
        self.assertEqual(second.execute({"command": "pwd"})["output"], task.WORKDIR + "\n")


if __name__ == "__main__":
    tgd.tg.main()
