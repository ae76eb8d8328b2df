"""What validation hands back: problems located by file and AWS-spelled path."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autopilot_config.models.cluster_config import CreateClusterRequest
from autopilot_config.models.provisioning import ProvisioningParameters

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
    config is not shown wrong there, but not shown right either (``complete`` is false).

    ``cluster_config`` and ``provisioning_parameters`` are the documents as the schema check built their
    models (None when one failed it, or was not given): what a create goes on with, so that nothing reads
    the JSON again. They are no part of the report's own shape (left out of every dump)."""

    model_config = ConfigDict(defer_build=True)

    errors: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    unchecked: list[Problem] = Field(default_factory=list)
    cluster_config: CreateClusterRequest | None = Field(default=None, exclude=True, repr=False)
    provisioning_parameters: ProvisioningParameters | None = Field(default=None, exclude=True, repr=False)

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
