"""The API's one error table (autopilot.api.errors): every error the use cases may raise has its answer.

The statuses and bodies themselves are held route by route in test_api*.py; this holds that a domain
error added without a row would not reach a client as a 500.
"""

from __future__ import annotations

import inspect
from http import HTTPStatus
from types import ModuleType

import pytest
from autopilot import errors as domain_errors
from autopilot import idempotency
from autopilot.api import body
from autopilot.api.errors import ANSWERS, answer
from autopilot.errors import ClusterBusyError, ClusterNameTakenError, WorkflowStartError
from autopilot.logic import authorize_delete
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from tests.samples import api_event

# Raised by the state store to the use cases, which answer them as a ConflictError of their own.
NOT_FOR_THE_API = {ClusterNameTakenError, ClusterBusyError}


def errors_of(module: ModuleType) -> set[type[Exception]]:
    return {
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, Exception) and cls.__module__ == module.__name__
    }


@pytest.mark.parametrize(
    "module", [domain_errors, idempotency, authorize_delete, body], ids=lambda m: m.__name__
)
def test_every_error_the_api_may_see_has_a_row(module: ModuleType) -> None:
    missing = errors_of(module) - NOT_FOR_THE_API - set(ANSWERS)
    assert not missing, f"add to autopilot.api.errors.ANSWERS: {sorted(c.__name__ for c in missing)}"


def test_a_503_from_the_table_says_when_to_retry() -> None:
    response = answer(
        WorkflowStartError("no start", operation_id="op-1"), APIGatewayProxyEvent(api_event("list_clusters"))
    )
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert str(response.headers["Retry-After"]).isdigit()
    assert '"operationId":"op-1"' in str(response.body)
