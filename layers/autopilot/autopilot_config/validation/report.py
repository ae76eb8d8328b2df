"""What validation hands back: problems located by file and AWS-spelled path."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CLUSTER_CONFIG = "cluster-config.json"
PROVISIONING_PARAMETERS = "provisioning-parameters.json"


class Problem(BaseModel):
    """One finding. ``path`` is spelled as the file spells it (``InstanceGroups[1].ThreadsPerCore``);
    it is empty when the finding concerns the file as a whole."""

    model_config = ConfigDict(frozen=True)

    file: str
    path: str
    message: str

    def __str__(self) -> str:
        location = f"{self.file}: {self.path}" if self.path else self.file
        return f"{location}: {self.message}"


class ValidationReport(BaseModel):
    """Every error and warning found; the config is valid when there is no error. ``unchecked`` lists
    the checks that could not run (``--aws`` without credentials, access denied, unreachable): the
    config is not shown wrong there, but not shown right either (``complete`` is false)."""

    errors: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    unchecked: list[Problem] = Field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.errors

    @property
    def complete(self) -> bool:
        return not self.unchecked

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "errors": [problem.model_dump() for problem in self.errors],
            "warnings": [problem.model_dump() for problem in self.warnings],
            "unchecked": [problem.model_dump() for problem in self.unchecked],
        }
