"""EventBridge seams: rule targets delivered as EventBridge does (Lambda, Step Functions, SNS, SQS),
PutEvents refusing the sources AWS reserves, and moto's default target input keeping ``account``.
"""

from __future__ import annotations

import copy
import json
import traceback
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from moto.awslambda.utils import get_backend
from moto.events.models import Rule
from moto.events.responses import EventsHandler
from moto.events.utils import EventTemplateParser
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends
from moto.stepfunctions.responses import get_backend as sfn_backend

from sandbox.emulator.aws_calls import resource_policy
from sandbox.emulator.aws_calls.policy import Decision
from sandbox.emulator.patching import SeamDrift, expect_signature
from sandbox.emulator.seams.base import replace, state

# --------------------------------------------------------------------------------------------------
# seam: EventBridge rule targets (Lambda, Step Functions, SNS)
# --------------------------------------------------------------------------------------------------
_OWN_TARGET_SERVICES: Final = frozenset({"lambda", "states", "sns"})
# delivered by the seam too (moto ignores Input/InputPath for them), synchronously: no code runs
_DIRECT_TARGET_SERVICES: Final = frozenset({"sqs"})


def public_event(event: dict[str, Any]) -> dict[str, Any]:
    """moto's internal event (epoch time, ingestion-time) → the JSON EventBridge delivers."""
    published = {key: value for key, value in event.items() if key != "ingestion-time"}
    when = published.get("time")
    if isinstance(when, (int, float)):
        published["time"] = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return published


def target_input(target: dict[str, Any], event: dict[str, Any]) -> str:
    """The payload a target receives: Input, InputPath, InputTransformer or the whole event."""
    if "Input" in target:
        return str(target["Input"])
    if "InputPath" in target:
        value: Any = event
        for part in [p for p in str(target["InputPath"]).removeprefix("$").split(".") if p]:
            value = value.get(part) if isinstance(value, dict) else None
        return json.dumps(value)
    transformer = target.get("InputTransformer")
    if transformer:
        transformed = EventTemplateParser.parse(
            input_template=transformer.get("InputTemplate"),
            input_paths_map=transformer.get("InputPathsMap", {}),
            event=event,  # type: ignore[arg-type]
        )
        return transformed if isinstance(transformed, str) else json.dumps(transformed)
    return json.dumps(event)


def deliver_to_target(rule_arn: str, target: dict[str, Any], event: dict[str, Any]) -> None:
    """Deliver one matched event to one Lambda / Step Functions / SNS target, as EventBridge does."""
    runtime = state.runtime
    if runtime is None:
        raise RuntimeError("no sandbox is active")
    arn = str(target["Arn"])
    parts = arn.split(":")
    service, region, account = parts[2], parts[3], parts[4]
    payload = target_input(target, event)
    try:
        if service == "lambda":
            get_backend(account, region).invoke(arn, None, payload, {"X-Amz-Invocation-Type": "Event"}, {})
        elif service == "states":
            sfn_backend(account, region).start_execution(arn, name=str(uuid.uuid4()), execution_input=payload)
        elif service == "sns":
            sns_backends[account][region].publish(message=payload, arn=arn)
        elif service == "sqs":
            # EventBridge sends as events.amazonaws.com on the rule's behalf: the queue policy decides
            decision = resource_policy.delivery_decision(
                arn, "sqs:SendMessage", service="events.amazonaws.com", source_arn=rule_arn
            )
            if decision is not Decision.ALLOWED:
                raise PermissionError(
                    f"the queue policy of {arn} refuses {rule_arn}'s delivery ({decision.value})"
                )
            group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
            sqs_backends[account][region].send_message(parts[5], payload, group_id=group_id)
        else:
            raise ValueError(f"{service} targets are delivered by moto, not the sandbox")
        state.deliveries[f"events->{service}"] += 1
    except Exception as error:  # noqa: BLE001 - a failed delivery goes to the target's DLQ
        state.delivery_errors.append(f"{rule_arn} -> {arn}: {error!r}")
        traceback.print_exc()
        dead_letter = (target.get("DeadLetterConfig") or {}).get("Arn")
        if dead_letter:
            dlq_parts = str(dead_letter).split(":")
            sqs_backends[dlq_parts[4]][dlq_parts[3]].send_message(
                dlq_parts[5],
                json.dumps(event),
                message_attributes={
                    "RULE_ARN": {"DataType": "String", "StringValue": rule_arn},
                    "TARGET_ARN": {"DataType": "String", "StringValue": arn},
                    "ERROR_MESSAGE": {"DataType": "String", "StringValue": str(error)[:256] or "error"},
                },
            )


def deliver_to_rule_targets(rule: Rule, event: dict[str, Any]) -> None:
    """All of a rule's targets (used for events that matched and for scheduled events)."""
    runtime = state.runtime
    published = public_event(event)
    for target in list(rule.targets):
        service = str(target.get("Arn", "")).split(":")[2]
        if service in _OWN_TARGET_SERVICES and runtime is not None:
            runtime.dispatcher.submit(_delivery(rule.arn, target, published))
        elif service in _DIRECT_TARGET_SERVICES and runtime is not None:
            deliver_to_target(rule.arn, target, published)
        else:
            single = copy.copy(rule)
            single.targets = [target]
            _ORIGINAL_SEND_TO_TARGETS[0](single, copy.deepcopy(event))


def _delivery(rule_arn: str, target: dict[str, Any], event: dict[str, Any]) -> Callable[[], None]:
    return lambda: deliver_to_target(rule_arn, target, event)


_ORIGINAL_SEND_TO_TARGETS: Final[list[Callable[..., None]]] = []


def deliver_eventbridge_targets() -> None:
    original = expect_signature(
        Rule, "send_to_targets", ["self", "original_event", "transform_input"], "deliver_eventbridge_targets"
    )
    for attribute in ("_send_to_sqs_queue", "_send_to_cw_log_group"):
        if not hasattr(Rule, attribute):
            raise SeamDrift(f"deliver_eventbridge_targets: Rule.{attribute} is gone")
    _ORIGINAL_SEND_TO_TARGETS[:] = [original]

    def send_to_targets(self: Rule, original_event: dict[str, Any], transform_input: bool = True) -> None:
        if state.runtime is None or not transform_input:
            original(self, original_event, transform_input)
            return
        # A schedule rule has no pattern (moto's empty pattern matches every event); it only fires on time.
        if self.state != "ENABLED" or self.scheduled_expression:
            return
        if not self.event_pattern.matches_event(original_event):  # type: ignore[arg-type]
            return
        deliver_to_rule_targets(self, original_event)

    replace(Rule, "send_to_targets", send_to_targets)


# --------------------------------------------------------------------------------------------------
# seam: PutEvents refuses the sources AWS reserves for its services
# --------------------------------------------------------------------------------------------------
AWS_SOURCE_REFUSED: Final = {
    "ErrorCode": "NotAuthorizedForSourceException",
    "ErrorMessage": "Not authorized for the source.",
}


def refuse_aws_event_sources() -> None:
    """An entry whose Source starts with ``aws.`` fails NotAuthorizedForSourceException (in Entries,
    counted in FailedEntryCount; the others are put), as EventBridge answers a caller: only AWS
    services emit those. The simulators emit through the backend (sandbox.emulator.bus), not this API."""
    original = expect_signature(EventsHandler, "put_events", ["self"], "refuse_aws_event_sources")

    def put_events(self: EventsHandler) -> str:
        entries = self._get_param("Entries") or []
        if not any(str(e.get("Source", "")).startswith("aws.") for e in entries):
            return str(original(self))
        allowed = [e for e in entries if not str(e.get("Source", "")).startswith("aws.")]
        put = iter(self.events_backend.put_events(allowed) if allowed else [])
        results = [
            dict(AWS_SOURCE_REFUSED) if str(e.get("Source", "")).startswith("aws.") else next(put)
            for e in entries
        ]
        failed = sum(1 for r in results if "ErrorCode" in r)
        return json.dumps({"FailedEntryCount": failed, "Entries": results})

    replace(EventsHandler, "put_events", put_events)


# --------------------------------------------------------------------------------------------------
# seam: moto's default target input keeps the event's "account"
# --------------------------------------------------------------------------------------------------
_TEMPLATE_WITHOUT_ACCOUNT: Final = '"source": "<source>", "region": "<region>"'
_TEMPLATE_WITH_ACCOUNT: Final = '"source": "<source>", "account": "<account>", "region": "<region>"'


def keep_event_account() -> None:
    seam = "keep_event_account"
    original = getattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", None)
    paths = getattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_PATHS_MAP", None)
    if not isinstance(original, str) or _TEMPLATE_WITHOUT_ACCOUNT not in original:
        raise SeamDrift(
            f"{seam}: EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE changed (has it <account>?)"
        )
    if not isinstance(paths, dict) or paths.get("account") != "$.account":
        raise SeamDrift(f"{seam}: EventTemplateParser.DEFAULT_EVENT_INPUT_PATHS_MAP no longer maps account")
    EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = original.replace(
        _TEMPLATE_WITHOUT_ACCOUNT, _TEMPLATE_WITH_ACCOUNT
    )
    state.undo.append(lambda: setattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", original))
