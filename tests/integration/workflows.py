"""Driving the deployed workflows from tests: start through the API's logic, wait, read the history.

moto runs the state machines but no Lambda functions, so ``wait`` plays ClusterEventsFunction's part
when ``events`` is on: it hands each message of the cluster-events queue (HyperPod's events, routed by
the template's rule, and the workflows' wait requests) to ``autopilot.logic.cluster_events``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from autopilot.logic.cluster_events import Origin, handle_message
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.dependencies import Dependencies
from autopilot.logic.read_clusters import get_operation
from autopilot.models.bodies import CreateClusterBody
from autopilot.settings import api_settings
from autopilot.workflows.cluster_waits import ClusterWaits

from sandbox.emulator.stepfunctions import clock as stepfunctions_clock
from sandbox.harness.stack import ACCOUNT, Deployed
from tests.samples import create_body

ROUND_PAUSE = 0.05  # wall seconds a round gives the execution threads when one of them may move


def dependencies() -> Dependencies:
    return Dependencies(api_settings())


def start(name: str = "ml-cluster", *, deep_health_checks: bool = False, **changes: Any) -> str:
    """Start a create through the API's logic. The sample request's workers run OnStartDeepHealthChecks
    only when asked: their ~2 h of checks (HyperPodTimings.deep_health_check) would outlast the waits
    these tests are about."""
    raw = create_body(name, **changes)
    if not deep_health_checks:
        for group in raw["clusterConfig"]["InstanceGroups"]:
            group.pop("OnStartDeepHealthChecks", None)
    body = CreateClusterBody.model_validate(raw)
    return create_cluster(dependencies(), body, requested_by="tester").operation_id


def stack_origin(stack: Deployed) -> Origin:
    """The account and region ClusterEventsFunction runs in (its events must come from there)."""
    return Origin(account=ACCOUNT, region=stack.stack.region)


def deliver_cluster_events(
    stack: Deployed, handle: Callable[[dict[str, Any], int, ClusterWaits], str] | None = None
) -> list[str]:
    """Process what the cluster-events queue holds now, as ClusterEventsFunction does (``handle``:
    one message, its body and SentTimestamp; else handle_message); their kinds."""
    if handle is None:
        origin = stack_origin(stack)

        def handle(body: dict[str, Any], sent_at: int, waits: ClusterWaits) -> str:
            return handle_message(body, sent_at, waits, origin=origin)

    sqs = stack.client("sqs")
    url = stack.stack.physical_id("ClusterEventsQueue")
    waits = ClusterWaits(
        stack.stack.physical_id("StateTable"),
        dynamodb=stack.client("dynamodb"),
        stepfunctions=stack.client("stepfunctions"),
        sagemaker=stack.client("sagemaker"),
    )
    kinds: list[str] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["SentTimestamp"])
        if not messages.get("Messages"):
            return kinds
        for message in messages["Messages"]:
            sent_at = int(message["Attributes"]["SentTimestamp"])
            kinds.append(handle(json.loads(message["Body"]), sent_at, waits))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


class Rounds:
    """The rounds of a test stepping a frozen clock: whether the executions are still (none moved since
    the last round, each waits on a timer or a task token, no timer is due), and the pause a round
    ends with, which only a round that can have moved an execution needs: after a still round whose
    advance reached no timer and whose deliveries answered no token, no thread can move before the
    clock does, and the next round follows at once (most of a repair's rounds are such)."""

    def __init__(self, stack: Deployed) -> None:
        self.stack = stack
        self._seen: int | None = None  # stepfunctions_clock.changes() at the last round's start

    def still(self, running: int) -> bool:
        """Call at a round's start: no execution moved since the last call, and ``running`` of them
        (at least) wait on a timer or a token with no timer due."""
        changes = stepfunctions_clock.changes()
        still = (
            changes == self._seen
            and stepfunctions_clock.blocked_threads() - self.stack.blocked_before >= running
            and not stepfunctions_clock.timer_due(self.stack.clock)
        )
        self._seen = changes
        return still

    def pause(self, running: int, *, advanced: bool) -> None:
        """Call at a round's end: give the execution threads time unless the round ``advanced`` the
        clock and none of them can move (without an advance only they can change anything)."""
        if (
            advanced
            and stepfunctions_clock.changes() == self._seen
            and self.stack.clock.working_now == 0
            and stepfunctions_clock.blocked_threads() - self.stack.blocked_before >= running
            and not stepfunctions_clock.timer_due(self.stack.clock)
        ):
            return
        time.sleep(ROUND_PAUSE)


def wait(
    stack: Deployed, operation_id: str, timeout: float = 60.0, *, events: bool = True, advance: float = 0.0
) -> dict[str, Any]:
    """Until the operation's execution ends; ``advance`` moves a frozen clock that many simulated
    seconds a round (HyperPod's lifecycles and the workflows' timers both follow it)."""
    sfn = stack.client("stepfunctions")
    arn = get_operation(dependencies(), operation_id).execution_arn
    assert arn
    rounds = Rounds(stack)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rounds.still(1)
        if advance:
            stack.clock.advance(advance)
        stack.hyperpod.tick()
        if events:
            deliver_cluster_events(stack)
        execution = sfn.describe_execution(executionArn=arn)
        if execution["status"] != "RUNNING":
            return dict(execution)
        rounds.pause(1, advanced=bool(advance))
    raise AssertionError(f"execution {arn} still running after {timeout}s")


def history(stack: Deployed, execution_arn: str) -> list[dict[str, Any]]:
    sfn = stack.client("stepfunctions")
    return list(sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"])


def entered(events: list[dict[str, Any]]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
