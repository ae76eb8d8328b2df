"""The API's error body (``{"message", "errors"?, "operationId"?}``) and one problem of a request.

Apart from the other bodies (autopilot.models.bodies) because the API answers errors before any of
its routers is included (a 404, a body refused before routing): its init imports these two models
and none of the routers' (autopilot.api.routes; docs/operations.md, "Cold start").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ErrorDetail(BaseModel):
    """One problem with a request, located by field path."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    path: str = Field(description="Where: `InstanceGroups[1].ThreadsPerCore`, `budget.monthlyLimitUsd`.")
    message: str
    file: str | None = Field(default=None, description="cluster-config.json / provisioning-parameters.json")
    location: str | None = Field(default=None, description="body, query or path (request-shape errors)")


class ErrorBody(BaseModel):
    model_config = ConfigDict(defer_build=True)

    message: str
    errors: list[ErrorDetail] | None = None
    operation_id: str | None = Field(default=None, alias="operationId")
