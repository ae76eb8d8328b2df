"""The moto seam: moto's SSM responses route the session operations to the simulator serving the
request's (account, region), installed or spawned on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from moto.core.responses import ActionResult
from moto.ssm.responses import SimpleSystemManagerResponse
from moto.sts.models import sts_backends

from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.ssm_sessions.identity import CallerIdentity
from sandbox.services.ssm_sessions.model import DEFAULT_USER_AGENT, SessionsError

if TYPE_CHECKING:
    from sandbox.services.ssm_sessions.simulator import SsmSessionsSimulator


SIMULATORS: dict[tuple[str, str], SsmSessionsSimulator] = {}  # installed and spawned, by (account, region)
INSTALLED: list[SsmSessionsSimulator] = []  # in installation order: the first spawns the others
REGISTRY_LOCK = threading.Lock()

ResponseHandler = Callable[[SimpleSystemManagerResponse], ActionResult]


def simulator_for(account_id: str, region: str) -> SsmSessionsSimulator | None:
    """The simulator serving (account, region), spawned on first use; None while none is installed."""
    key = (account_id, region)
    with REGISTRY_LOCK:
        simulator = SIMULATORS.get(key)
        if simulator is None and INSTALLED:
            simulator = SIMULATORS[key] = INSTALLED[0].spawn(account_id, region)
        return simulator


def _simulator_for(response: SimpleSystemManagerResponse) -> SsmSessionsSimulator:
    simulator = simulator_for(response.current_account, response.region)
    if simulator is None:  # the seam is installed only while a simulator is
        raise SessionsError("InternalServerError", "the sandbox SSM sessions simulator is not installed")
    return simulator


def hyperpod_node_targets(account_id: str, region: str) -> list[str]:
    """The SSM targets of the HyperPod nodes of (account, region) whose agent is reachable:
    ``sagemaker-cluster:<cluster-id>_<instance-group>-<instance-id>``, for ``Running`` nodes only (a
    node that is rebooting or in deep health checks is billed but its agent is not connected)."""
    return [
        f"sagemaker-cluster:{instance.cluster_arn.rsplit('/', 1)[-1]}_{instance.instance_group}-"
        f"{instance.instance_id}"
        for simulator in HyperPodSimulator.every_region()
        if (simulator.account_id, simulator.region) == (account_id, region)
        for instance in simulator.running_instances()
        if instance.status == "Running"
    ]


def _caller_identity(response: SimpleSystemManagerResponse) -> CallerIdentity:
    """The caller as moto resolves it for sts:GetCallerIdentity (IAM user / assumed role / default)."""
    access_key = response.get_access_key()
    sts = sts_backends[response.current_account][response.partition]
    user_id, arn, _ = sts.get_caller_identity(access_key, response.region)
    return CallerIdentity.from_arn(arn, principal_id=user_id, access_key_id=access_key)


def _handle_start_session(response: SimpleSystemManagerResponse) -> ActionResult:
    simulator = _simulator_for(response)
    result = simulator.start_session(
        _caller_identity(response),
        response._get_param("Target"),
        document_name=response._get_param("DocumentName"),
        reason=response._get_param("Reason"),
        parameters=response._get_param("Parameters"),
        source_ip_address="127.0.0.1",  # every sandbox caller is on loopback
        user_agent=str(response.headers.get("User-Agent", DEFAULT_USER_AGENT)),
    )
    return ActionResult(result)


def _handle_describe_sessions(response: SimpleSystemManagerResponse) -> ActionResult:
    max_results = response._get_param("MaxResults")
    result = _simulator_for(response).describe_sessions(
        state=response._get_param("State"),
        filters=response._get_param("Filters"),
        max_results=int(max_results) if max_results is not None else None,
        next_token=response._get_param("NextToken"),
    )
    return ActionResult(result)


def _handle_terminate_session(response: SimpleSystemManagerResponse) -> ActionResult:
    return ActionResult(_simulator_for(response).terminate_session(response._get_param("SessionId")))


HANDLERS: dict[str, ResponseHandler] = {
    "start_session": _handle_start_session,
    "describe_sessions": _handle_describe_sessions,
    "terminate_session": _handle_terminate_session,
}


def patch_moto_ssm_response(handlers: Mapping[str, ResponseHandler]) -> None:
    """THE seam: moto's ``BaseResponse.call_action`` turns the X-Amz-Target action into a snake_case
    method name and calls that method of ``SimpleSystemManagerResponse`` if the class has it, then
    serializes an ``ActionResult`` with botocore's ssm model. Adding the three methods to the class
    is all it takes, in-process and in moto's server.
    Guarded by tests/sandbox/test_ssm_sessions_actions.py."""
    for name, handler in handlers.items():
        existing = SimpleSystemManagerResponse.__dict__.get(name)
        if existing is not None and existing is not handler:
            raise RuntimeError(
                f"moto's SimpleSystemManagerResponse already defines {name}: the SSM seam has moved "
                "(moto now implements sessions?); revisit sandbox/services/ssm_sessions/seam.py"
            )
        setattr(SimpleSystemManagerResponse, name, handler)


def unpatch_moto_ssm_response() -> None:
    for name, handler in HANDLERS.items():
        if SimpleSystemManagerResponse.__dict__.get(name) is handler:
            delattr(SimpleSystemManagerResponse, name)
