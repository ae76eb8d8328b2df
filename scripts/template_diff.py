"""Compare two SAM templates by what they deploy: each is read as the sandbox deployer reads it (its
AWS::LanguageExtensions, if declared, expanded by aws-sam-cli's implementation: ``load_template``),
translated by aws-sam-translator (the deployer's own ``transform``), every intrinsic resolved against one
set of parameter values, and every IAM policy statement expanded into (effect, action, resource,
condition) tuples, so a rewrite that only moves text (Globals, SAM policy templates, split or merged
statements, Sids, a Fn::ForEach) shows no difference.

    PYTHONPATH=. .venv/bin/python scripts/template_diff.py BEFORE.yaml AFTER.yaml [Name=Value ...]

Ignored as without effect: a role's inline policy names (SAM names them <Role>Policy<N>), how statements
are split across policies and statements, Sids, and a document's Version: SAM's policy templates
write none, which IAM reads as 2008-10-17, different from 2012-10-17 only for ${aws:...} policy
variables, which no statement here uses (every ${} is CloudFormation's Fn::Sub, resolved at deploy).

Refs and GetAtts of the resources resolve to ARNs/names built the way AWS builds them for the
resource types whose ARNs policies name (SNS, SQS, EventBridge, Step Functions, Lambda, DynamoDB,
Logs), so `!Ref Topic` and a policy template's `arn:...:sns:...:${topicName}` compare equal.
"""

from __future__ import annotations

import difflib
import json
import sys
from typing import Any

from sandbox.emulator.deploy.intrinsics import Resolver
from sandbox.emulator.deploy.template import load_template, parameter_values
from sandbox.emulator.deploy.transform import transform

REGION, ACCOUNT, STACK = "us-east-1", "123456789012", "stack"
_NAME_PROPERTY = {
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::Events::EventBus": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::IAM::Role": "RoleName",
    "AWS::S3::Bucket": "BucketName",
}


def _effective(path: str, overrides: dict[str, str]) -> dict[str, Any]:
    template = load_template(path)
    values = parameter_values(template, overrides)
    translated, _aliases = transform(template, values, region=REGION, account_id=ACCOUNT, stack_name=STACK)
    resources: dict[str, Any] = translated["Resources"]
    resolver: Resolver

    def name(logical_id: str) -> str:
        definition = resources[logical_id]
        key = _NAME_PROPERTY.get(definition["Type"])
        raw = (definition.get("Properties") or {}).get(key) if key else None
        return (
            str(resolver.resolve(raw, where=logical_id)) if raw is not None else f"{STACK}-{logical_id}-GEN"
        )

    def arn(logical_id: str) -> str:
        kind, n = resources[logical_id]["Type"], name(logical_id)
        prefix = f"arn:aws:{{}}:{REGION}:{ACCOUNT}:"
        return {
            "AWS::SNS::Topic": prefix.format("sns") + n,
            "AWS::SQS::Queue": prefix.format("sqs") + n,
            "AWS::Events::EventBus": prefix.format("events") + "event-bus/" + n,
            "AWS::StepFunctions::StateMachine": prefix.format("states") + "stateMachine:" + n,
            "AWS::Lambda::Function": prefix.format("lambda") + "function:" + n,
            "AWS::DynamoDB::Table": prefix.format("dynamodb") + "table/" + n,
            "AWS::Logs::LogGroup": prefix.format("logs") + "log-group:" + n + ":*",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{n}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{n}",
        }.get(kind, f"ARN({logical_id})")

    def ref(logical_id: str) -> str:
        if logical_id not in resources:
            return f"REF({logical_id})"
        kind = resources[logical_id]["Type"]
        if kind in ("AWS::SNS::Topic", "AWS::StepFunctions::StateMachine"):
            return arn(logical_id)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name(logical_id)}"
        if kind in _NAME_PROPERTY:
            return name(logical_id)
        return f"REF({logical_id})"

    def get_att(logical_id: str, attribute: str) -> str:
        if attribute == "Arn" and logical_id in resources:
            return arn(logical_id)
        if attribute in ("TopicName", "QueueName", "Name", "TableName") and logical_id in resources:
            return name(logical_id)
        if attribute == "QueueUrl":
            return ref(logical_id)
        return f"ATT({logical_id}.{attribute})"

    resolver = Resolver(
        region=REGION,
        account_id=ACCOUNT,
        stack_name=STACK,
        parameters=values,
        condition_definitions=translated.get("Conditions") or {},
        ref=ref,
        get_att=get_att,
    )
    out: dict[str, Any] = {}
    for logical_id, definition in resources.items():
        if "Condition" in definition and not resolver.condition(definition["Condition"]):
            continue
        resolved = resolver.resolve(
            {k: v for k, v in definition.items() if k != "Condition"}, where=logical_id
        )
        props = resolved.get("Properties") or {}
        if resolved["Type"] == "AWS::IAM::Role":
            statements = set()
            for policy in props.pop("Policies", []) or []:
                statements |= _expand(policy["PolicyDocument"])
            resolved["Properties"]["Policies"] = sorted(statements)
            resolved["Properties"]["AssumeRolePolicyDocument"] = sorted(
                _expand(props["AssumeRolePolicyDocument"])
            )
            for key in ("ManagedPolicyArns",):
                if key in props:
                    props[key] = sorted(props[key])
        if resolved["Type"] == "AWS::IAM::Policy":
            props["PolicyDocument"] = sorted(_expand(props["PolicyDocument"]))
            props.pop("PolicyName", None)
        out[logical_id] = resolved
    return out


def _expand(document: dict[str, Any]) -> set[tuple[str, ...]]:
    def listed(value: Any) -> list[Any]:
        return value if isinstance(value, list) else [value]

    rows: set[tuple[str, ...]] = set()
    for statement in listed(document["Statement"]):
        action_key = "Action" if "Action" in statement else "NotAction"
        resource_key = (
            "Resource" if "Resource" in statement else "NotResource" if "NotResource" in statement else None
        )
        principal = json.dumps(statement.get("Principal"), sort_keys=True)
        condition = json.dumps(statement.get("Condition"), sort_keys=True)
        for action in listed(statement[action_key]):
            for resource in listed(statement[resource_key]) if resource_key else [None]:
                rows.add(
                    (
                        statement["Effect"],
                        action_key,
                        action,
                        str(resource_key),
                        str(resource),
                        principal,
                        condition,
                    )
                )
    return rows


def main() -> int:
    before_path, after_path, *pairs = sys.argv[1:]
    overrides = dict(pair.split("=", 1) for pair in pairs)
    before, after = _effective(before_path, overrides), _effective(after_path, overrides)
    differences = 0
    for logical_id in sorted(set(before) | set(after)):
        if before.get(logical_id) == after.get(logical_id):
            continue
        differences += 1
        print(f"--- {logical_id}")
        b = json.dumps(before.get(logical_id), indent=1, sort_keys=True, default=str).splitlines()
        a = json.dumps(after.get(logical_id), indent=1, sort_keys=True, default=str).splitlines()
        for line in difflib.unified_diff(b, a, lineterm="", n=2):
            print(line)
    roles = sorted(k for k, d in after.items() if d["Type"] == "AWS::IAM::Role")
    for role in roles:  # the per-role figure a reviewer can hold against the before/after diff
        grants = len(after[role]["Properties"].get("Policies", []))
        same = "identical" if before.get(role) == after[role] else "DIFFERENT"
        print(f"{role}: {grants} (effect, action, resource, condition) grants, {same}")
    print(f"{len(before)} / {len(after)} resources, {len(roles)} roles; {differences} resource(s) differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
