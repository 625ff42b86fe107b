"""mini-swe-agent (2.4.6, unchanged) solving a small task end to end through SWE-ReX on rex: its
`SwerexDockerEnvironment` starts SWE-ReX's `DockerDeployment` on an image with rex-server as
`swerex-remote`, its `DeterministicModel` replays scripted actions, and its `DefaultAgent`, with
the templates of its own default config, runs them: inspect a buggy program, see it fail, fix it
with sed, add a test with a heredoc, run both, and submit.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# mini-swe-agent reads (and creates) its global config directory when it is imported: a directory
# of this run's own, not ~/.config/mini-swe-agent. It makes no network call of its own; litellm,
# which would fetch a price list, is never imported by the classes used here.
_CONFIG_DIR = tempfile.mkdtemp(prefix="rex-mswea-config-")
atexit.register(shutil.rmtree, _CONFIG_DIR, ignore_errors=True)
os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = _CONFIG_DIR
os.environ["MSWEA_SILENT_STARTUP"] = "1"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.config import get_config_from_spec  # noqa: E402
from minisweagent.environments.extra.swerex_docker import SwerexDockerEnvironment  # noqa: E402
from minisweagent.models.test_models import DeterministicModel, make_output  # noqa: E402
from swerex.runtime.abstract import Command, WriteFileRequest  # noqa: E402

from conftest import run_async  # noqa: E402
from swerex_image import (  # noqa: E402
    containers_of,
    scratch,  # noqa: F401 (a fixture)
    swerex_image,
    wait_until_gone,
)

BASE = "rex-test-bookworm:latest"  # mini-swe-agent's task needs python3 in the sandbox
WORKDIR = "/work"

BUGGY_PROGRAM = '''\
def total(n):
    """The sum of 1..n."""
    return sum(range(1, n))


if __name__ == "__main__":
    result = total(10)
    print(f"total(10) = {result}")
    assert result == 55, "wrong total"
'''

TEST_PROGRAM = """\
from calc import total

assert [total(n) for n in (1, 2, 3, 100)] == [1, 3, 6, 5050]
print("all tests passed")
"""

# (command, what its observation must hold): each step as the model "decides" it.
STEPS = [
    ("cat -n calc.py", ["1\tdef total(n):", "return sum(range(1, n))"]),
    (
        "python3 calc.py",
        [
            "<returncode>1</returncode>",
            "total(10) = 45",
            f'File "{WORKDIR}/calc.py"',
            "AssertionError: wrong total",
        ],
    ),
    (
        "sed -i 's/range(1, n)/range(1, n + 1)/' calc.py && grep -n 'range' calc.py",
        ["<returncode>0</returncode>", "3:    return sum(range(1, n + 1))"],
    ),
    (
        f"cat <<'EOF' > test_calc.py\n{TEST_PROGRAM}EOF\npython3 test_calc.py",
        ["<returncode>0</returncode>", "all tests passed"],
    ),
    ("python3 calc.py && pwd", ["<returncode>0</returncode>", "total(10) = 55", WORKDIR]),
]
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && python3 calc.py && python3 test_calc.py"
EXPECTED_SUBMISSION = "total(10) = 55\nall tests passed\n"


def _scripted_outputs() -> list[dict]:
    """The model's replies, in mini-swe-agent's format: text plus the parsed actions."""
    commands = [command for command, _ in STEPS] + [SUBMIT]
    return [
        make_output(
            f"THOUGHT: step {i}.\n\n```mswea_bash_command\n{command}\n```",
            [{"command": command}],
            cost=0.0,
        )
        for i, command in enumerate(commands, 1)
    ]


@pytest.fixture(scope="module")
def image() -> str:
    with swerex_image(BASE) as built:
        yield built.tag


@pytest.fixture
def environment(image: str):
    """mini-swe-agent's SWE-ReX Docker environment; it has no close of its own, so the test stops
    its deployment (and checks the container is gone)."""
    env = SwerexDockerEnvironment(
        image=image,
        cwd=WORKDIR,
        timeout=30,
        deployment_extra_kwargs={"pull": "never", "startup_timeout": 30},
    )
    try:
        yield env
    finally:
        name = env.deployment.container_name
        run_async(env.deployment.stop(), 30)
        assert wait_until_gone(name), f"container {name} still in `docker ps -a` after stop()"
        assert containers_of(image) == []


def _container_uname(env: SwerexDockerEnvironment) -> dict[str, str]:
    """The template variables mini-swe-agent's default instance template asks for (its own Docker
    environment gives the host's platform.uname(); this one gives none), read in the container."""
    command = Command(command="uname -s; uname -r; uname -v; uname -m", shell=True, timeout=20)
    lines = run_async(env.deployment.runtime.execute(command), 30).stdout.splitlines()
    system, release, version, machine = lines
    return {"system": system, "release": release, "version": version, "machine": machine}


def test_agent_fixes_a_bug_and_submits(environment: SwerexDockerEnvironment, scratch: Path):
    runtime = environment.deployment.runtime
    # The task's repository: a buggy program written into the container through SWE-ReX.
    program = WriteFileRequest(path=f"{WORKDIR}/calc.py", content=BUGGY_PROGRAM)
    run_async(runtime.write_file(program), 30)
    outputs = _scripted_outputs()
    agent_config = get_config_from_spec("default.yaml")["agent"]
    trajectory = scratch / "trajectory.json"
    agent = DefaultAgent(
        DeterministicModel(outputs=outputs),
        environment,
        **{**agent_config, "step_limit": len(outputs), "output_path": trajectory},
    )

    result = agent.run("total(10) in calc.py must be 55; fix it.", **_container_uname(environment))

    assert result["exit_status"] == "Submitted", agent.messages[-1]
    assert result["submission"] == EXPECTED_SUBMISSION
    # Every scripted action ran in the container, in order: its observation holds what it printed.
    observations = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert len(observations) == len(STEPS), observations
    for (command, expected), observation in zip(STEPS, observations):
        for text in expected:
            assert text in observation, f"{command!r}: {text!r} not in {observation!r}"
    # The saved trajectory says the same.
    saved = json.loads(trajectory.read_text())
    assert saved["info"]["exit_status"] == "Submitted"
    assert saved["info"]["submission"] == EXPECTED_SUBMISSION
    assert saved["info"]["model_stats"]["api_calls"] == len(outputs)
    # The fix is in the container's file, not only in the agent's account of it.
    cat = Command(command=["cat", f"{WORKDIR}/calc.py"], timeout=20)
    fixed = run_async(runtime.execute(cat), 30)
    assert "return sum(range(1, n + 1))" in fixed.stdout
