"""A mini-swe-agent environment on E2B (the shape of one: its template built from a Docker
image, then every action a command in a sandbox of it), written against E2B's Python SDK only, so
it runs on E2B or on any E2B-compatible endpoint such as a rex gateway. mini-swe-agent 2.4.6 ships
no E2B environment; its environments are duck-typed (execute, get_template_vars, serialize).
"""

from __future__ import annotations

import hashlib
from typing import Any

from e2b import Sandbox, Template
from e2b.sandbox.commands.command_handle import CommandExitException
from minisweagent.exceptions import Submitted
from minisweagent.utils.serialize import recursive_merge
from pydantic import BaseModel


class E2BEnvironmentConfig(BaseModel):
    image: str
    """The Docker image the template is built from (the endpoint's engine must have it)."""
    cwd: str = "/"
    """Working directory of the commands (the template's WORKDIR)."""
    timeout: int = 30
    """Seconds a command may run."""
    sandbox_timeout: int = 600
    """Seconds the sandbox lives without a call."""
    env: dict[str, str] = {}


class E2BEnvironment:
    def __init__(self, **kwargs):
        self.config = E2BEnvironmentConfig(**kwargs)
        self.template = self._template_name()
        if not Template.exists(self.template):
            recipe = (Template().from_image(self.config.image)
                      .set_user("root").set_workdir(self.config.cwd))
            self.build_logs: list[str] = []
            Template.build(recipe, self.template,
                           on_build_logs=lambda entry: self.build_logs.append(str(entry.message)))
        self.sandbox = Sandbox.create(self.template, timeout=self.config.sandbox_timeout,
                                      envs=self.config.env or None)

    def _template_name(self) -> str:
        digest = hashlib.sha256(f"{self.config.image}\n{self.config.cwd}".encode()).hexdigest()
        return f"mswea-{digest[:16]}"

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        try:
            try:
                result = self.sandbox.commands.run(command, cwd=cwd or self.config.cwd,
                                                   timeout=timeout or self.config.timeout)
            except CommandExitException as exited:  # a non-zero exit is an observation too
                result = exited
            output = {"output": result.stdout + result.stderr, "returncode": result.exit_code,
                      "exception_info": ""}
        except Exception as e:
            output = {"output": str(e), "returncode": -1,
                      "exception_info": f"An error occurred while executing the command: {e}",
                      "extra": {"exception_type": type(e).__name__, "exception": str(e)}}
        lines = output["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" and \
                output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})
        return output

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        return recursive_merge(self.config.model_dump(), kwargs)

    def serialize(self) -> dict:
        return {"info": {"config": {
            "environment": self.config.model_dump(mode="json"),
            "environment_type": f"{self.__class__.__module__}.{self.__class__.__name__}"}}}

    def cleanup(self) -> None:
        self.sandbox.kill()
