"""The collector every check writes into, so that no check can hide another's result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot_config.validation.report import Problem, ValidationReport

if TYPE_CHECKING:
    from autopilot_config.models.cluster_config import CreateClusterRequest
    from autopilot_config.models.provisioning import ProvisioningParameters


class Findings:
    def __init__(self) -> None:
        self._errors: dict[Problem, None] = {}
        self._warnings: dict[Problem, None] = {}
        self._unchecked: dict[Problem, None] = {}

    def error(self, file: str, path: str, message: str) -> None:
        self._errors[Problem(file=file, path=path, message=message)] = None

    def warning(self, file: str, path: str, message: str) -> None:
        self._warnings[Problem(file=file, path=path, message=message)] = None

    def unchecked(self, file: str, path: str, message: str) -> None:
        """A check that could not run (no credentials, access denied, unreachable endpoint)."""
        self._unchecked[Problem(file=file, path=path, message=message)] = None

    def extend_errors(self, problems: list[Problem]) -> None:
        for problem in problems:
            self._errors[problem] = None

    def report(
        self,
        *,
        cluster_config: CreateClusterRequest | None = None,
        provisioning_parameters: ProvisioningParameters | None = None,
    ) -> ValidationReport:
        # dicts keep insertion order and drop a finding two checks reach independently.
        return ValidationReport(
            errors=list(self._errors),
            warnings=list(self._warnings),
            unchecked=list(self._unchecked),
            cluster_config=cluster_config,
            provisioning_parameters=provisioning_parameters,
        )
