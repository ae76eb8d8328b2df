"""Deploying into a real account (docs/deploy.md): the deployer policy covers what deploying template.yaml
calls, and no more than it explains; every role the stack creates takes the PermissionsBoundary; the
account-wide API Gateway setting is the stack's only when ManageApiGatewayAccount says so."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import boto3
import pytest
from botocore.model import OperationModel
from moto import mock_aws

from sandbox.emulator.aws_calls.iam import authorization_requests
from sandbox.emulator.aws_calls.interception import Call, Principal
from sandbox.emulator.aws_calls.policy import Decision, Request, evaluate
from sandbox.emulator.aws_calls.service_authorization import resource_types, scope_problem
from sandbox.emulator.deploy import TemplateError, deploy, load_template
from sandbox.emulator.deploy.intrinsics import Resolver
from sandbox.emulator.deploy.template import parameter_values
from sandbox.emulator.deploy.transform import transform

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
POLICY = ROOT / "docs" / "deployer-policy.json"
REGION, ACCOUNT, STACK = "us-east-1", "123456789012", "hyperpod-autopilot"
DEPLOYER = Principal(f"arn:aws:iam::{ACCOUNT}:role/deployer", "ci")
BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/research-boundary"

# Actions the policy grants that the sandbox's deploy (which only creates) does not call, each with why a
# real `sam deploy` / `sam delete` needs it. The test fails on an action in neither list, and on an entry
# here the policy no longer grants: the policy stays exactly what is explained.
_SAM_CLI = "sam deploy itself (samcli/lib/deploy/deployer.py: change sets, waiters, events)"
_MANAGED_BUCKET = "resolve_s3: SAM's managed stack and its artifact bucket, made once per region"
_UPLOAD = "sam deploy uploads code, layer and template (samcli/lib/package/s3_uploader.py)"
_UPDATE = "a second deploy updates what the first created"
_DELETE = "rollback of a failed deploy, and make delete"
_READ = "CloudFormation reads a resource back after changing it"
_TAGS = "CloudFormation tags every resource with the stack's tags"
_LOG_DELIVERY = "a state machine's LoggingConfiguration (Step Functions' documented logging permissions)"
EXPLAINED: Final[dict[str, str]] = {
    **dict.fromkeys(
        (
            "cloudformation:CreateChangeSet",
            "cloudformation:DeleteChangeSet",
            "cloudformation:DescribeChangeSet",
            "cloudformation:DescribeStackEvents",
            "cloudformation:DescribeStacks",
            "cloudformation:ExecuteChangeSet",
            "cloudformation:GetTemplate",
            "cloudformation:GetTemplateSummary",
            "cloudformation:ListStackResources",
            "cloudformation:RollbackStack",
        ),
        _SAM_CLI,
    ),
    "cloudformation:DeleteStack": _DELETE,
    **dict.fromkeys(
        (
            "s3:CreateBucket",
            "s3:GetBucketPolicy",
            "s3:PutBucketPolicy",
            "s3:PutBucketPublicAccessBlock",
            "s3:PutBucketTagging",
            "s3:PutBucketVersioning",
            "s3:PutEncryptionConfiguration",
        ),
        _MANAGED_BUCKET,
    ),
    **dict.fromkeys(
        ("s3:GetBucketLocation", "s3:ListBucket", "s3:GetObject", "s3:GetObjectTagging", "s3:PutObject"),
        _UPLOAD,
    ),
    **dict.fromkeys(
        (
            "iam:UpdateAssumeRolePolicy",
            "iam:PutRolePermissionsBoundary",
            "iam:DeleteRolePermissionsBoundary",
            "lambda:UpdateFunctionCode",
            "lambda:UpdateFunctionConfiguration",
            "lambda:UpdateFunctionEventInvokeConfig",
            "lambda:UpdateEventSourceMapping",
            "states:UpdateStateMachine",
            "dynamodb:UpdateTable",
            "apigateway:DELETE",
        ),
        _UPDATE,
    ),
    **dict.fromkeys(
        (
            "iam:DeleteRole",
            "iam:DeleteRolePolicy",
            "iam:DetachRolePolicy",
            "lambda:DeleteFunction",
            "lambda:DeleteFunctionEventInvokeConfig",
            "lambda:DeleteEventSourceMapping",
            "lambda:DeleteLayerVersion",
            "lambda:RemovePermission",
            "states:DeleteStateMachine",
            "dynamodb:DeleteTable",
            "sns:DeleteTopic",
            "sns:Unsubscribe",
            "sqs:DeleteQueue",
            "events:DeleteRule",
            "events:RemoveTargets",
            "logs:DeleteLogGroup",
            "logs:DeleteRetentionPolicy",
            "cloudwatch:DeleteAlarms",
            "cloudwatch:DeleteDashboards",
        ),
        _DELETE,
    ),
    **dict.fromkeys(
        (
            "iam:GetRole",
            "iam:GetRolePolicy",
            "lambda:GetFunction",
            "lambda:GetFunctionConfiguration",
            "lambda:GetLayerVersion",
            "lambda:GetEventSourceMapping",
            "states:DescribeStateMachine",
            "dynamodb:DescribeTable",
            "dynamodb:DescribeContinuousBackups",
            "dynamodb:DescribeTimeToLive",
            "sns:GetTopicAttributes",
            "sns:GetSubscriptionAttributes",
            "sns:ListSubscriptionsByTopic",
            "sqs:GetQueueUrl",
            "events:DescribeRule",
            "events:ListTargetsByRule",
            "logs:DescribeLogGroups",
            "cloudwatch:DescribeAlarms",
            "cloudwatch:GetDashboard",
        ),
        _READ,
    ),
    **dict.fromkeys(
        (
            "iam:TagRole",
            "iam:UntagRole",
            "lambda:TagResource",
            "lambda:UntagResource",
            "lambda:ListTags",
            "states:TagResource",
            "states:UntagResource",
            "states:ListTagsForResource",
            "dynamodb:TagResource",
            "dynamodb:UntagResource",
            "dynamodb:ListTagsOfResource",
            "sns:TagResource",
            "sns:UntagResource",
            "sns:ListTagsForResource",
            "sqs:TagQueue",
            "sqs:UntagQueue",
            "sqs:ListQueueTags",
            "logs:TagResource",
            "logs:UntagResource",
            "logs:ListTagsForResource",
            "cloudwatch:TagResource",
            "cloudwatch:UntagResource",
            "cloudwatch:ListTagsForResource",
        ),
        _TAGS,
    ),
    **dict.fromkeys(
        (
            "logs:CreateLogDelivery",
            "logs:GetLogDelivery",
            "logs:UpdateLogDelivery",
            "logs:DeleteLogDelivery",
            "logs:ListLogDeliveries",
            "logs:PutResourcePolicy",
            "logs:DescribeResourcePolicies",
        ),
        _LOG_DELIVERY,
    ),
}
# What AWS's own resource handlers declare they call, for the types whose provider is public
# (tests/fixtures/cloudformation_handler_permissions.json names each source file): create, read, update,
# delete. The sandbox's providers call less; the policy must cover these too.
HANDLERS: Final[dict[str, dict[str, list[str]]]] = {
    kind: entry["handlers"]
    for kind, entry in json.loads(
        (ROOT / "tests" / "fixtures" / "cloudformation_handler_permissions.json").read_text()
    )["types"].items()
}
# Handler permissions this template's properties never reach (so the policy leaves them out), and why.
NOT_REACHED: Final[dict[tuple[str, str], str]] = {
    ("AWS::Logs::LogGroup", "logs:AssociateKmsKey"): "no log group sets KmsKeyId",
    ("AWS::Logs::LogGroup", "logs:DisassociateKmsKey"): "no log group sets KmsKeyId",
    ("AWS::SNS::Topic", "sns:PutDataProtectionPolicy"): "no topic sets DataProtectionPolicy",
    ("AWS::SNS::Subscription", "iam:UpdateRole"): "an e-mail subscription has no SubscriptionRoleArn",
}

# AWS's documented resources for letting a change set run the template's transforms (CloudFormation User
# Guide, "Controlling access with IAM"); the Service Authorization Reference lists only stacks for the action.
TRANSFORM_ARNS: Final = frozenset(
    f"arn:aws:cloudformation:{REGION}:aws:transform/{name}"
    for name in ("LanguageExtensions", "Serverless-2016-10-31")
)


def deployer_policy() -> dict[str, Any]:
    text = POLICY.read_text()
    for placeholder, value in {"<region>": REGION, "<account-id>": ACCOUNT, "<stack-name>": STACK}.items():
        text = text.replace(placeholder, value)
    policy: dict[str, Any] = json.loads(text)
    return policy


def statements() -> list[dict[str, Any]]:
    return list(deployer_policy()["Statement"])


def listed(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def granted_actions() -> set[str]:
    return {action for statement in statements() for action in listed(statement["Action"])}


@dataclass(frozen=True)
class Recorded:
    model: OperationModel
    params: dict[str, Any]


def record_deploy(parameters: dict[str, Any] | None = None) -> list[Recorded]:
    """Every call deploying the template makes (the sandbox's CloudFormation, sandbox.emulator.deploy), with
    its
    parameters: what a deployer's credentials are checked against on AWS."""
    calls: list[Recorded] = []

    def note(**event: Any) -> None:  # botocore's before-parameter-build
        calls.append(Recorded(event["model"], dict(event["params"])))

    with mock_aws(config={"lambda": {"use_docker": False}}):
        session = boto3.Session(region_name=REGION)
        session._session.register("before-parameter-build", note)
        deploy(TEMPLATE, session=session, region=REGION, account_id=ACCOUNT, parameters=parameters or {})
    return calls


@pytest.fixture(scope="module")
def deploy_calls() -> list[Recorded]:
    return record_deploy()


def _arn(service: str, resource: str, *, regional: bool = True) -> str:
    return f"arn:aws:{service}:{REGION if regional else ''}:{ACCOUNT}:{resource}"


def _apigateway_path(model: OperationModel, params: dict[str, Any]) -> str:
    """The request path with its URI parameters filled in: what API Gateway authorizes
    (``apigateway:<HTTP method>`` on ``arn:aws:apigateway:<region>::<path>``)."""
    path = str(model.http["requestUri"]).split("?")[0]
    for name, shape in model.input_shape.members.items() if model.input_shape else []:
        if shape.serialization.get("location") == "uri" and name in params:
            path = path.replace("{" + shape.serialization["name"] + "}", str(params[name]))
    return path


def _resources(call: Recorded) -> list[str] | None:
    """Resources of the deploy's calls that sandbox.emulator.aws_calls.iam (written for the control plane's
    own
    calls) does not derive, or derives otherwise than the Service Authorization Reference; None: use it."""
    service, op, p = call.model.service_model.service_name, call.model.name, call.params
    if service == "logs":
        return [_arn("logs", f"log-group:{p['logGroupName']}")]
    if service == "cloudwatch":
        if op == "PutDashboard":
            return [_arn("cloudwatch", f"dashboard/{p['DashboardName']}", regional=False)]
        return [_arn("cloudwatch", f"alarm:{p['AlarmName']}")]
    if (service, op) == ("sns", "CreateTopic"):
        return [_arn("sns", str(p["Name"]))]
    if (service, op) == ("stepfunctions", "CreateStateMachine"):
        return [_arn("states", f"stateMachine:{p['name']}")]
    if (service, op) == ("lambda", "PublishLayerVersion"):
        return [_arn("lambda", f"layer:{p['LayerName']}")]
    if (service, op) == ("lambda", "CreateEventSourceMapping"):
        return ["*"]  # no resource type (condition key lambda:FunctionArn)
    return None


# (service, operation) -> the parameter holding a role the call passes, and the service it is passed to
_PASSED: Final = {
    ("lambda", "CreateFunction"): ("Role", "lambda.amazonaws.com"),
    ("stepfunctions", "CreateStateMachine"): ("roleArn", "states.amazonaws.com"),
}


def authorizations(call: Recorded) -> list[Request]:
    """What IAM authorizes for one of the deploy's calls, made by the deployer."""
    service, op, p = call.model.service_model.service_name, call.model.name, call.params
    context = {"aws:RequestedRegion": [REGION], "aws:PrincipalAccount": [ACCOUNT]}
    passed: list[tuple[str, str]] = []
    if service == "apigateway":
        path = _apigateway_path(call.model, p)
        requests = [
            Request(
                f"apigateway:{call.model.http['method']}", f"arn:aws:apigateway:{REGION}::{path}", context
            )
        ]
        if p.get("tags"):  # tagging on create is authorized on the tags resource too
            requests.append(
                Request(
                    "apigateway:PUT", f"arn:aws:apigateway:{REGION}::/tags/{quote(path, safe='')}", context
                )
            )
        if op == "UpdateAccount":
            passed += [
                (str(o["value"]), "apigateway.amazonaws.com")
                for o in p["patchOperations"]
                if o["path"] == "/cloudwatchRoleArn"
            ]
    else:
        generic = authorization_requests(Call(call.model.service_model, op, p, REGION, DEPLOYER))
        resources = _resources(call)
        requests = (
            generic
            if resources is None
            else [Request(generic[0].action, r, generic[0].context) for r in resources]
        )
    if (service, op) in _PASSED:
        key, to = _PASSED[(service, op)]
        passed.append((str(p[key]), to))
    return requests + [
        Request("iam:PassRole", role, {**context, "iam:PassedToService": [to]}) for role, to in passed
    ]


def test_the_deploy_is_recorded_whole(deploy_calls: list[Recorded]) -> None:
    """Every resource type the template deploys shows up as calls (a deploy that recorded nothing would
    let any policy pass)."""
    services = {call.model.service_model.service_name for call in deploy_calls}
    assert services >= {
        "iam",
        "lambda",
        "stepfunctions",
        "apigateway",
        "dynamodb",
        "sns",
        "sqs",
        "events",
        "logs",
        "cloudwatch",
    }
    assert any(call.model.name == "CreateRole" for call in deploy_calls)


def test_the_deployer_policy_allows_every_call_the_deploy_makes(deploy_calls: list[Recorded]) -> None:
    policy = deployer_policy()
    refused = sorted(
        {
            f"{request.action} on {request.resource}"
            for call in deploy_calls
            for request in authorizations(call)
            if evaluate([policy], request) is not Decision.ALLOWED
        }
    )
    assert refused == []


def test_the_deployer_policy_passes_only_the_stacks_roles_to_their_services(
    deploy_calls: list[Recorded],
) -> None:
    policy = deployer_policy()
    own_role = next(r for c in deploy_calls for r in authorizations(c) if r.action == "iam:PassRole")
    context = dict(own_role.context)
    to_sagemaker = Request(
        "iam:PassRole", own_role.resource, {**context, "iam:PassedToService": ["sagemaker.amazonaws.com"]}
    )
    other_role = Request("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/Admin", context)
    assert evaluate([policy], to_sagemaker) is Decision.IMPLICIT_DENY
    assert evaluate([policy], other_role) is Decision.IMPLICIT_DENY


def template_types() -> set[str]:
    template = load_template(TEMPLATE)
    translated, _ = transform(
        template, parameter_values(template, {}), region=REGION, account_id=ACCOUNT, stack_name=STACK
    )
    return {resource["Type"] for resource in translated["Resources"].values()}


def test_the_deployer_policy_grants_what_aws_resource_handlers_declare() -> None:
    types = template_types()
    assert set(HANDLERS) <= types, "a handler list for a type the template no longer has: drop it"
    granted = granted_actions()
    missing = sorted(
        f"{kind} {handler}: {action}"
        for kind, handlers in HANDLERS.items()
        for handler, actions in handlers.items()
        for action in actions
        if action not in granted and (kind, action) not in NOT_REACHED
    )
    assert missing == []
    assert not [key for key in NOT_REACHED if key[1] in granted], "granted: no longer 'not reached'"


def test_the_deployer_policy_is_no_wider_than_it_explains(deploy_calls: list[Recorded]) -> None:
    called = {r.action for call in deploy_calls for r in authorizations(call)}
    declared = {
        action for handlers in HANDLERS.values() for actions in handlers.values() for action in actions
    }
    used = called | declared
    granted = granted_actions()
    assert not [a for a in granted if "*" in a or "?" in a], "name every action: no wildcards"
    assert sorted(granted - used - set(EXPLAINED)) == [], "an action neither the deploy calls nor explained"
    assert sorted(set(EXPLAINED) - granted) == [], "explained but no longer granted: drop it from EXPLAINED"
    assert sorted(set(EXPLAINED) & called) == [], "the deploy calls it: no need to explain it"


def test_every_statement_is_one_iam_honours() -> None:
    """Each action exists and its Resource names one of its resource types (a statement scoped to ARNs
    the action cannot take grants nothing on AWS); "*" only for actions without resource types."""
    problems = []
    for statement in statements():
        resources = [r for r in listed(statement["Resource"]) if r not in TRANSFORM_ARNS]
        for action in listed(statement["Action"]):
            if resources == ["*"] and resource_types(action):
                problems.append(f"{statement['Sid']}: {action} on * though it takes resource types")
            elif resources and (problem := scope_problem(action, resources)):
                problems.append(f"{statement['Sid']}: {problem}")
    assert problems == []


def created_roles(parameters: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every AWS::IAM::Role the transformed template creates with ``parameters``, its properties resolved
    (conditions and AWS::NoValue as CloudFormation applies them)."""
    template = load_template(TEMPLATE)
    values = parameter_values(template, parameters)
    translated, _ = transform(template, values, region=REGION, account_id=ACCOUNT, stack_name=STACK)
    resolver = Resolver(
        region=REGION,
        account_id=ACCOUNT,
        stack_name=STACK,
        parameters=values,
        condition_definitions=translated.get("Conditions") or {},
        ref=lambda name: f"<{name}>",
        get_att=lambda name, attribute: f"<{name}.{attribute}>",
    )
    return {
        logical_id: resolver.resolve(resource["Properties"], where=logical_id)
        for logical_id, resource in translated["Resources"].items()
        if resource["Type"] == "AWS::IAM::Role"
        and ("Condition" not in resource or resolver.condition(resource["Condition"], where=logical_id))
    }


def test_every_role_the_stack_creates_takes_the_permissions_boundary() -> None:
    """Functions' roles (SAM Globals), state machines' roles and API Gateway's logging role: an account
    that requires a boundary refuses CreateRole for any role without it."""
    roles = created_roles({"PermissionsBoundary": BOUNDARY})
    sam = load_template(TEMPLATE)["Resources"]
    functions = [
        n
        for n, r in sam.items()
        if r["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine")
    ]
    assert {f"{name}Role" for name in functions} | {"ApiGatewayLogsRole"} <= set(roles)
    assert {name: props.get("PermissionsBoundary") for name, props in roles.items()} == dict.fromkeys(
        roles, BOUNDARY
    )


def test_no_permissions_boundary_by_default() -> None:
    roles = created_roles({})
    assert roles
    assert [name for name, props in roles.items() if "PermissionsBoundary" in props] == []


def test_the_stack_sets_api_gateways_logging_role_by_default() -> None:
    with mock_aws(config={"lambda": {"use_docker": False}}):
        stack = deploy(TEMPLATE, region=REGION, account_id=ACCOUNT)
        account = boto3.client("apigateway", region_name=REGION).get_account()
        assert account["cloudwatchRoleArn"] == stack.resources["ApiGatewayLogsRole"].attributes["Arn"]


def test_manage_api_gateway_account_false_keeps_the_accounts_own_role() -> None:
    own = f"arn:aws:iam::{ACCOUNT}:role/platform-apigateway-logs"
    with mock_aws(config={"lambda": {"use_docker": False}}):
        apigateway = boto3.client("apigateway", region_name=REGION)
        apigateway.update_account(
            patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": own}]
        )
        stack = deploy(
            TEMPLATE, region=REGION, account_id=ACCOUNT, parameters={"ManageApiGatewayAccount": "false"}
        )
        assert apigateway.get_account()["cloudwatchRoleArn"] == own
        assert {"ApiGatewayAccount", "ApiGatewayLogsRole"} <= set(stack.skipped)


def test_manage_api_gateway_account_false_fails_where_the_account_has_no_logging_role() -> None:
    """As API Gateway refuses a stage's access logs before the account has its CloudWatch Logs role."""
    with (
        mock_aws(config={"lambda": {"use_docker": False}}),
        pytest.raises(TemplateError, match="CloudWatch Logs role ARN must be set"),
    ):
        deploy(TEMPLATE, region=REGION, account_id=ACCOUNT, parameters={"ManageApiGatewayAccount": "false"})


def test_the_sandbox_deploys_every_role_with_the_boundary() -> None:
    """The sandbox's roles carry it too, so its IAM (sandbox.emulator.aws_calls.iam) limits them by it."""
    allow_all = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    with mock_aws(config={"lambda": {"use_docker": False}}):
        iam = boto3.client("iam", region_name=REGION)
        iam.create_policy(PolicyName="research-boundary", PolicyDocument=json.dumps(allow_all))
        stack = deploy(
            TEMPLATE, region=REGION, account_id=ACCOUNT, parameters={"PermissionsBoundary": BOUNDARY}
        )
        roles = [r.physical_id for r in stack.resources.values() if r.type == "AWS::IAM::Role"]
        boundaries = {
            iam.get_role(RoleName=name)["Role"].get("PermissionsBoundary", {}).get("PermissionsBoundaryArn")
            for name in roles
        }
        assert roles
        assert boundaries == {BOUNDARY}


def test_a_boundary_policy_that_does_not_exist_fails_the_deploy() -> None:
    """As IAM refuses CreateRole with it (NoSuchEntity); moto alone would take any ARN."""
    with (
        mock_aws(config={"lambda": {"use_docker": False}}),
        pytest.raises(TemplateError, match="NoSuchEntity"),
    ):
        deploy(TEMPLATE, region=REGION, account_id=ACCOUNT, parameters={"PermissionsBoundary": BOUNDARY})
