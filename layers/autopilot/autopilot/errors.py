"""What the use cases refuse, as domain errors; the API maps them to HTTP answers (api/errors.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autopilot.models.error_body import ErrorDetail


class NotFoundError(Exception):
    """The cluster or operation does not exist."""


class ConflictError(Exception):
    """The request conflicts with the current state (a taken name, an operation still running);
    ``errors`` name the fields in conflict, when there are such."""

    def __init__(self, message: str, errors: list[ErrorDetail] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class InvalidRequestError(Exception):
    """The request is well-formed but cannot be accepted; ``errors`` locate each problem."""

    def __init__(self, message: str, errors: list[ErrorDetail]) -> None:
        super().__init__(message)
        self.errors = errors


class CallerMayNotUseError(Exception):
    """The caller names a resource it may not use itself (a role it may not pass): Autopilot will not
    use it on the caller's behalf (issue 20, no confused deputy); ``errors`` locate each one."""

    def __init__(self, message: str, errors: list[ErrorDetail]) -> None:
        super().__init__(message)
        self.errors = errors


class WorkflowStartError(Exception):
    """Step Functions did not start the workflow; the operation is recorded as FAILED."""

    def __init__(self, message: str, operation_id: str) -> None:
        super().__init__(message)
        self.operation_id = operation_id


class ClusterNameTakenError(Exception):
    """The state store holds the name for a cluster that is not deleted."""


class ClusterBusyError(Exception):
    """Another operation is running on the cluster."""


class InvalidPageTokenError(ValueError):
    """The nextToken was not one this API issued."""
