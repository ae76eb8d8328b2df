"""POST /validate: the checks POST /clusters runs, without creating anything."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.models.bodies import ValidateBody, ValidationResult
from autopilot.models.error_body import ErrorDetail

if TYPE_CHECKING:
    from autopilot_config.validation.report import Problem, ValidationReport

    from autopilot.logic.dependencies import Dependencies


def problems(report: ValidationReport) -> tuple[list[ErrorDetail], list[ErrorDetail]]:
    """The report's errors and warnings, as the API lists them. An online check that could not run
    (PreflightChecks) is a warning: the config is not shown wrong, but the caller must know."""

    def detail(p: Problem) -> ErrorDetail:
        return ErrorDetail(file=p.file, path=p.path, message=p.message)

    return [detail(p) for p in report.errors], [detail(p) for p in [*report.warnings, *report.unchecked]]


def validate_config(deps: Dependencies, body: ValidateBody) -> ValidationResult:
    report = deps.validate(body.cluster_config, body.provisioning_parameters)
    errors, warnings = problems(report)
    return ValidationResult(valid=not errors, errors=errors, warnings=warnings)
