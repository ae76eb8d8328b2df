"""Step Functions seams: unnamed executions named, aws-sdk task errors spelled as AWS spells them,
SendTaskFailure keeping its cause, task clients calling as the execution's role, and the seams
that live in their own modules (JSONata, the sandbox clock, status events, StopExecution, quotas,
read timeouts, parse caching), installed from here.
"""

from __future__ import annotations

import inspect
import sys
import threading
import uuid
from typing import Any

from botocore.exceptions import UnknownServiceError
from moto.core.responses import EmptyResult
from moto.stepfunctions.parser.asl.component.state.exec.state_task.credentials import StateCredentials
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_aws_sdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.asl.utils import boto_client
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse

from sandbox.emulator import product_clock, sdk_error_names
from sandbox.emulator.aws_calls import Principal, act_as
from sandbox.emulator.patching import SeamDrift, expect_signature
from sandbox.emulator.seams.base import replace, state
from sandbox.emulator.stepfunctions import clock as stepfunctions_clock
from sandbox.emulator.stepfunctions import events as stepfunctions_events
from sandbox.emulator.stepfunctions import jsonata as stepfunctions_jsonata
from sandbox.emulator.stepfunctions import limits as stepfunctions_limits
from sandbox.emulator.stepfunctions import parse_cache as stepfunctions_parse_cache
from sandbox.emulator.stepfunctions import stop as stepfunctions_stop
from sandbox.emulator.stepfunctions import task_timeouts as stepfunctions_task_timeouts


# --------------------------------------------------------------------------------------------------
# seam: StartExecution without a name gets a UUID name, as in Step Functions
# --------------------------------------------------------------------------------------------------
def name_unnamed_executions() -> None:
    original = expect_signature(
        StepFunctionsParserBackend,
        "start_execution",
        ["self", "state_machine_arn", "name", "execution_input"],
        "name_unnamed_executions",
    )

    def start_execution(
        self: StepFunctionsParserBackend,
        state_machine_arn: str,
        name: str | None = None,
        execution_input: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        return original(self, state_machine_arn, name or str(uuid.uuid4()), execution_input, *args, **kwargs)

    replace(StepFunctionsParserBackend, "start_execution", start_execution)


# --------------------------------------------------------------------------------------------------
# seam: aws-sdk task errors carry the service's AWS spelling (SageMaker.X, not sagemaker.X)
# --------------------------------------------------------------------------------------------------
def name_aws_sdk_errors() -> None:
    seam = "name_aws_sdk_errors"
    original = expect_signature(
        StateTaskServiceAwsSdk, "_normalise_service_error_name", ["service_name"], seam, exact=True
    )
    # the method is only worth replacing while moto still names a ClientError with it
    if "_normalise_service_error_name" not in StateTaskServiceAwsSdk._from_error.__code__.co_names:
        raise SeamDrift(f"{seam}: _from_error no longer calls _normalise_service_error_name")
    # moto calls the ARN's service under botocore's name through this table (sfn -> stepfunctions)
    to_boto = getattr(StateTaskService, "_SERVICE_NAME_SFN_TO_BOTO_OVERRIDES", None)
    if not isinstance(to_boto, dict):
        raise SeamDrift(f"{seam}: StateTaskService._SERVICE_NAME_SFN_TO_BOTO_OVERRIDES is gone")

    def normalise_service_error_name(service_name: str) -> str:
        try:  # the Java v2 SDK's name of the service moto calls (sandbox/emulator/sdk_error_names.py)
            return sdk_error_names.error_service_name(to_boto.get(service_name, service_name))
        except UnknownServiceError:  # not a botocore service: moto's own name
            return str(original(service_name))

    replace(
        StateTaskServiceAwsSdk, "_normalise_service_error_name", staticmethod(normalise_service_error_name)
    )


# --------------------------------------------------------------------------------------------------
# seam: SendTaskFailure keeps its cause
# --------------------------------------------------------------------------------------------------
def keep_task_failure_cause() -> None:
    seam = "keep_task_failure_cause"
    expect_signature(StepFunctionResponse, "send_task_failure", ["self"], seam, exact=True)
    expect_signature(
        StepFunctionsParserBackend, "send_task_failure", ["self", "task_token", "error", "cause"], seam
    )

    def send_task_failure(self: StepFunctionResponse) -> Any:
        backend = self.stepfunction_backend
        token, error, cause = (self._get_param(p) for p in ("taskToken", "error", "cause"))
        if isinstance(backend, StepFunctionsParserBackend):
            backend.send_task_failure(token, error=error, cause=cause)
        else:  # moto not executing state machines: its own no-op
            backend.send_task_failure(token, error=error)
        return EmptyResult()

    replace(StepFunctionResponse, "send_task_failure", send_task_failure)


# --------------------------------------------------------------------------------------------------
# seams: Step Functions JSONata, and its timers on the sandbox clock (each in its own module)
# --------------------------------------------------------------------------------------------------
def evaluate_stepfunctions_jsonata() -> None:
    state.undo.append(stepfunctions_jsonata.install(now=state.clock.now))


def run_product_code_on_sandbox_clock() -> None:
    state.undo.append(product_clock.install(now=state.clock.now))


def run_stepfunctions_on_sandbox_clock() -> None:
    state.undo.append(stepfunctions_clock.install(state.clock))


def emit_execution_status_events() -> None:
    state.undo.append(stepfunctions_events.install())


def abort_stopped_executions() -> None:
    state.undo.append(stepfunctions_stop.install())


def fail_tasks_on_read_timeouts() -> None:
    state.undo.append(stepfunctions_task_timeouts.install())


def apply_stepfunctions_quotas() -> None:
    state.undo.append(stepfunctions_limits.install())


def cache_stepfunctions_parse_trees() -> None:
    state.undo.append(stepfunctions_parse_cache.install())


# --------------------------------------------------------------------------------------------------
# seam: a state machine's task clients make their calls as the execution's role
# --------------------------------------------------------------------------------------------------
def bind_execution_role() -> None:
    seam = "bind_execution_role"
    original = getattr(boto_client, "boto_client_for", None)
    if not callable(original):
        raise SeamDrift(f"{seam}: {boto_client.__name__}.boto_client_for is gone")
    parameters = list(inspect.signature(original).parameters)
    if parameters != ["region", "service", "state_credentials"]:
        raise SeamDrift(f"{seam}: boto_client_for has parameters {parameters}")
    if "role_arn" not in getattr(StateCredentials, "__dataclass_fields__", {}):
        raise SeamDrift(f"{seam}: StateCredentials has no role_arn")

    # One client per (region, service, role), as a long-running service keeps them: moto builds a new
    # boto3 client (a new session, its models, its event hooks) for every aws-sdk task, which was ~8 %
    # of a long simulation's time. Clients are thread-safe; the cache goes with the seam.
    clients: dict[tuple[str, str, str | None], Any] = {}
    lock = threading.Lock()

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        role_arn = getattr(state_credentials, "role_arn", None)
        key = (region, service, str(role_arn) if role_arn else None)
        with lock:
            client = clients.get(key)
        if client is not None:
            return client
        client = original(region=region, service=service, state_credentials=state_credentials)
        if role_arn:  # Step Functions' session names are opaque; so is the sandbox's
            act_as(client, Principal(str(role_arn), uuid.uuid4().hex))
        with lock:
            return clients.setdefault(key, client)

    # every executor module imported the function by name: replace each module's reference
    importers = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("moto.stepfunctions") and getattr(module, "boto_client_for", None) is original
    ]
    if state_task_service_aws_sdk not in importers:
        raise SeamDrift(f"{seam}: the aws-sdk task no longer calls boto_client_for")
    for module in importers:
        module.boto_client_for = boto_client_for  # type: ignore[attr-defined]
        state.undo.append(lambda module=module: setattr(module, "boto_client_for", original))  # type: ignore[misc]
