"""AWS::Events::Rule: PutRule and PutTargets; a schedule rule is also fired by the sandbox's scheduler."""

from __future__ import annotations

import json
from typing import Any, Final

from ..context import Context, Provider, names, pick
from ..stack import Resource, ScheduleSpec, TemplateError

# What the sandbox's EventBridge delivery (sandbox.emulator.seams) honours on a target.
_TARGET_KEYS: Final = names(
    "Arn Id Input InputPath InputTransformer RoleArn DeadLetterConfig RetryPolicy SqsParameters"
)
_TARGET_SERVICES: Final = names("lambda states sns sqs logs events")


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    if not props.get("EventPattern") and not props.get("ScheduleExpression"):
        raise TemplateError("EventPattern or ScheduleExpression is required")
    name = str(props.get("Name") or ctx.physical_name(logical_id))
    bus = str(props.get("EventBusName", "default")).rpartition("/")[2]
    args = {"Name": name, "EventBusName": bus, "State": props.get("State", "ENABLED")}
    args |= pick(props, "ScheduleExpression", "Description", "RoleArn")
    if "EventPattern" in props:
        pattern = props["EventPattern"]
        args["EventPattern"] = pattern if isinstance(pattern, str) else json.dumps(pattern)
    events = ctx.client("events")
    arn = str(events.put_rule(**args)["RuleArn"])
    for index, target in enumerate(props.get("Targets") or []):
        unknown = sorted(set(target) - _TARGET_KEYS)
        if unknown:
            raise TemplateError(f"Targets[{index}]: {', '.join(unknown)} not supported")
        if str(target["Arn"]).split(":")[2] not in _TARGET_SERVICES:
            raise TemplateError(
                f"Targets[{index}]: {target['Arn']} - the sandbox delivers to {sorted(_TARGET_SERVICES)}"
            )
    if props.get("Targets"):
        result = events.put_targets(Rule=name, EventBusName=bus, Targets=props["Targets"])
        if result.get("FailedEntryCount"):
            raise TemplateError(f"PutTargets failed: {result['FailedEntries']}")
    if "ScheduleExpression" in props:
        ctx.stack.schedules[logical_id] = ScheduleSpec(
            logical_id, name, arn, props["ScheduleExpression"], bus
        )
    return Resource(logical_id, "AWS::Events::Rule", name, {"Arn": arn}, arn)


PROVIDER = Provider(
    "AWS::Events::Rule",
    names("Name Description EventPattern ScheduleExpression State EventBusName Targets RoleArn"),
    create,
)
