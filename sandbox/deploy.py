"""Deploy a SAM template into moto: the sandbox's CloudFormation.

Every resource is created through boto3 clients inside ``mock_aws`` (so botocore's parameter
validation applies, as it would in CloudFormation's own calls), in dependency order. SAM's
resource types are expanded the way SAM expands them (a function gets a role, its events become
rules, subscriptions, event-source mappings and API routes, each under SAM's generated logical
id). An unsupported resource type, event type, property or intrinsic is a loud ``TemplateError``
naming the logical id: nothing is skipped silently.

Lambda functions are created in moto's Lambda with a placeholder zip, so their ARNs exist for
Step Functions, EventBridge, SNS and SQS; invocation is routed to the in-process runtime
(``sandbox.lambda_runtime``) by a seam (``sandbox.seams``).
"""

from __future__ import annotations

import io
import json
import random
import re
import string
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import boto3
import yaml

from sandbox.intrinsics import Resolver, TemplateError, partition_for, references

__all__ = [
    "ApiRoute",
    "ApiSpec",
    "FunctionSpec",
    "Resource",
    "ScheduleSpec",
    "Stack",
    "TemplateError",
    "deploy",
    "load_template",
]

SERVERLESS_TRANSFORM: Final = "AWS::Serverless-2016-10-31"
IMPLICIT_API: Final = "ServerlessRestApi"
IMPLICIT_API_STAGE: Final = "Prod"

_LAMBDA_TRUST: Final = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
_STATES_TRUST: Final = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
_EVENTS_TRUST: Final = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


# --------------------------------------------------------------------------------------------------
# template loading (YAML with CloudFormation short-form tags)
# --------------------------------------------------------------------------------------------------
class _TemplateLoader(yaml.SafeLoader):
    """SafeLoader that turns ``!Ref x`` into ``{"Ref": "x"}`` and ``!GetAtt a.b`` into Fn::GetAtt."""


def _construct_tag(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = tag_suffix if tag_suffix in ("Ref", "Condition") else f"Fn::{tag_suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if name == "Fn::GetAtt" and isinstance(value, str):
            logical_id, _, attribute = value.partition(".")
            value = [logical_id, attribute]
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_TemplateLoader.add_multi_constructor("!", _construct_tag)
# CloudFormation keeps timestamps and yes/no as strings; only true/false are booleans.
_TemplateLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_template(path: Path | str) -> dict[str, Any]:
    """Parse a SAM/CloudFormation template (YAML or JSON) into plain Python data."""
    text = Path(path).read_text(encoding="utf-8")
    data = yaml.load(text, Loader=_TemplateLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(data, dict) or not isinstance(data.get("Resources"), dict):
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources map)")
    return data


# --------------------------------------------------------------------------------------------------
# what a deployment produces
# --------------------------------------------------------------------------------------------------
@dataclass
class Resource:
    """One deployed resource: what Ref returns, its Fn::GetAtt attributes and (when it has one) ARN."""

    logical_id: str
    type: str
    physical_id: str
    attributes: dict[str, Any] = field(default_factory=dict)
    arn: str | None = None
    generated_by: str | None = None  # SAM parent logical id for resources SAM generates


@dataclass
class FunctionSpec:
    """What the in-process Lambda runtime needs to run one template function."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str
    code_dir: Path
    layer_dirs: list[Path]
    environment: dict[str, str]
    timeout: int
    memory_size: int
    dead_letter_arn: str | None = None
    max_async_retries: int = 2
    external_layers: list[str] = field(default_factory=list)


@dataclass
class ApiRoute:
    """One API Gateway method served by the local API server (like ``sam local start-api``)."""

    api_logical_id: str
    path: str  # as in the template, e.g. /clusters/{name} or /{proxy+}
    method: str  # upper case, or ANY
    function_logical_id: str
    auth: str  # AWS_IAM or NONE
    resource_id: str = ""


@dataclass
class ApiSpec:
    logical_id: str
    api_id: str
    stage: str
    default_authorizer: str  # AWS_IAM or NONE
    routes: list[ApiRoute] = field(default_factory=list)


@dataclass
class ScheduleSpec:
    """A schedule rule; the sandbox scheduler fires it on the sandbox clock."""

    logical_id: str
    rule_name: str
    rule_arn: str
    expression: str
    event_bus: str = "default"


@dataclass
class Stack:
    """The deployed template: logical id -> physical id / ARN / attributes, plus outputs."""

    name: str
    region: str
    account_id: str
    template_path: Path
    parameters: dict[str, Any]
    conditions: dict[str, bool] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    layers: dict[str, Path] = field(default_factory=dict)  # layer version ARN -> local dir
    apis: dict[str, ApiSpec] = field(default_factory=dict)
    schedules: dict[str, ScheduleSpec] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # logical id -> condition that was false

    def resource(self, logical_id: str) -> Resource:
        try:
            return self.resources[logical_id]
        except KeyError:
            if logical_id in self.skipped:
                raise KeyError(
                    f"{logical_id} was not created: its condition {self.skipped[logical_id]} is false"
                ) from None
            raise KeyError(f"{logical_id} is not a resource of stack {self.name}") from None

    def physical_id(self, logical_id: str) -> str:
        """What ``!Ref LogicalId`` returns (table name, queue URL, topic ARN, function name…)."""
        return self.resource(logical_id).physical_id

    def arn(self, logical_id: str) -> str:
        resource = self.resource(logical_id)
        if resource.arn is None:
            raise KeyError(f"{logical_id} ({resource.type}) has no ARN")
        return resource.arn

    def attribute(self, logical_id: str, name: str) -> Any:
        resource = self.resource(logical_id)
        if name not in resource.attributes:
            raise KeyError(f"{logical_id} ({resource.type}) has no attribute {name}")
        return resource.attributes[name]

    def function(self, logical_id_or_name: str) -> FunctionSpec:
        if logical_id_or_name in self.functions:
            return self.functions[logical_id_or_name]
        for spec in self.functions.values():
            if logical_id_or_name in (spec.name, spec.arn):
                return spec
        raise KeyError(f"{logical_id_or_name} is not a function of stack {self.name}")


# --------------------------------------------------------------------------------------------------
# the deployer
# --------------------------------------------------------------------------------------------------
def _placeholder_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "# The sandbox runs this function in-process from its CodeUri.\n")
    return buffer.getvalue()


_PLACEHOLDER_ZIP: Final = _placeholder_zip()
_GLOBALS_SECTIONS: Final = frozenset({"Function", "Api", "StateMachine"})


class _Deployer:
    def __init__(
        self,
        template: dict[str, Any],
        template_path: Path,
        *,
        session: boto3.Session,
        region: str,
        account_id: str,
        stack_name: str,
        parameters: Mapping[str, Any],
        rng: random.Random,
    ) -> None:
        self.template = template
        self.base_dir = template_path.parent
        self.session = session
        self.region = region
        self.account_id = account_id
        self.partition = partition_for(region)
        self.rng = rng
        self._clients: dict[str, Any] = {}
        self.definitions: dict[str, dict[str, Any]] = template["Resources"]
        self.stack = Stack(
            name=stack_name,
            region=region,
            account_id=account_id,
            template_path=template_path,
            parameters=self._parameters(parameters),
        )
        self.resolver = Resolver(
            region=region,
            account_id=account_id,
            stack_name=stack_name,
            parameters=self.stack.parameters,
            condition_definitions=template.get("Conditions") or {},
            ref=self._ref,
            get_att=self._get_att,
        )
        self.globals = self._globals()
        self._current = "<template>"

    # -- plumbing --------------------------------------------------------------------------------
    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region)  # type: ignore[call-overload]
        return self._clients[service]

    def error(self, message: str) -> TemplateError:
        return TemplateError(f"{self._current}: {message}")

    def resolve(self, value: Any, where: str) -> Any:
        return self.resolver.resolve(value, where=f"{self._current}.{where}")

    def physical_name(self, logical_id: str, max_length: int = 64) -> str:
        """CloudFormation-style generated name: <stack>-<LogicalId>-<random suffix>."""
        suffix = "".join(self.rng.choices(string.ascii_uppercase + string.digits, k=12))
        room = max_length - len(suffix) - 2
        stack_part = self.stack.name[: max(1, room // 2)]
        logical_part = logical_id[: room - len(stack_part)]
        return f"{stack_part}-{logical_part}-{suffix}"

    def arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        return (
            f"arn:{self.partition}:{service}:{self.region if region else ''}:"
            f"{self.account_id if account else ''}:{resource}"
        )

    def add(self, resource: Resource) -> Resource:
        if resource.logical_id in self.stack.resources:
            raise self.error(f"logical id {resource.logical_id} is generated twice")
        self.stack.resources[resource.logical_id] = resource
        return resource

    def _ref(self, logical_id: str) -> Any:
        if logical_id in self.stack.resources:
            return self.stack.resources[logical_id].physical_id
        raise self._unknown(logical_id, "Ref")

    def _get_att(self, logical_id: str, attribute: str) -> Any:
        if logical_id in self.stack.resources:
            resource = self.stack.resources[logical_id]
            if attribute in resource.attributes:
                return resource.attributes[attribute]
            raise self.error(
                f"Fn::GetAtt {logical_id}.{attribute}: {resource.type} has no attribute {attribute} "
                f"in the sandbox (has: {', '.join(sorted(resource.attributes)) or 'none'})"
            )
        raise self._unknown(logical_id, f"Fn::GetAtt {logical_id}.{attribute}")

    def _unknown(self, logical_id: str, what: str) -> TemplateError:
        if logical_id in self.stack.skipped:
            return self.error(
                f"{what}: {logical_id} is not created (condition {self.stack.skipped[logical_id]} is false)"
            )
        if logical_id in self.definitions:
            return self.error(f"{what}: {logical_id} is not deployed yet (dependency cycle?)")
        return self.error(f"{what}: unknown resource or parameter {logical_id!r}")

    # -- parameters, globals, order --------------------------------------------------------------
    def _parameters(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        definitions: dict[str, Any] = self.template.get("Parameters") or {}
        unknown = sorted(set(overrides) - set(definitions))
        if unknown:
            raise TemplateError(f"Parameters: unknown parameter override(s) {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, definition in definitions.items():
            if name in overrides:
                raw = overrides[name]
            elif "Default" in definition:
                raw = definition["Default"]
            else:
                raise TemplateError(f"Parameters.{name}: no value given and no Default")
            kind = str(definition.get("Type", "String"))
            value: Any
            if kind == "CommaDelimitedList" or kind.startswith("List<"):
                value = raw if isinstance(raw, list) else [p.strip() for p in str(raw).split(",")]
            else:
                value = "true" if raw is True else "false" if raw is False else str(raw)
            if kind == "Number":
                try:
                    float(value)
                except ValueError:
                    raise TemplateError(f"Parameters.{name}: {value!r} is not a Number") from None
            allowed = definition.get("AllowedValues")
            if allowed is not None and value not in [str(item) for item in allowed]:
                raise TemplateError(f"Parameters.{name}: {value!r} is not one of {allowed}")
            pattern = definition.get("AllowedPattern")
            if pattern is not None and isinstance(value, str) and not re.fullmatch(pattern, value):
                raise TemplateError(f"Parameters.{name}: {value!r} does not match {pattern}")
            values[name] = value
        return values

    def _globals(self) -> dict[str, dict[str, Any]]:
        sections: dict[str, Any] = self.template.get("Globals") or {}
        unsupported = sorted(set(sections) - _GLOBALS_SECTIONS)
        if unsupported:
            raise TemplateError(f"Globals: section(s) {', '.join(unsupported)} not supported by the sandbox")
        return {name: dict(section or {}) for name, section in sections.items()}

    def order(self) -> list[str]:
        """Template order, except that every resource comes after what it refers to (Kahn)."""
        ids = list(self.definitions)
        generated = self._generated_parents()
        deps: dict[str, set[str]] = {}
        for logical_id in ids:
            definition = self.definitions[logical_id]
            wanted = references(definition.get("Properties") or {})
            depends_on = definition.get("DependsOn") or []
            wanted |= {depends_on} if isinstance(depends_on, str) else set(depends_on)
            resolved: set[str] = set()
            for name in wanted:
                target = generated.get(name, name)
                if target in self.definitions and target != logical_id:
                    resolved.add(target)
            deps[logical_id] = resolved
        ordered: list[str] = []
        placed: set[str] = set()
        while len(ordered) < len(ids):
            ready = [i for i in ids if i not in placed and deps[i] <= placed]
            if not ready:
                cycle = sorted(i for i in ids if i not in placed)
                raise TemplateError(f"Resources: dependency cycle among {', '.join(cycle)}")
            ordered.append(ready[0])
            placed.add(ready[0])
        return ordered

    def _generated_parents(self) -> dict[str, str]:
        """SAM's generated logical ids (FnRole, ServerlessRestApi…) -> the resource that makes them."""
        parents: dict[str, str] = {}
        for logical_id, definition in self.definitions.items():
            kind = definition.get("Type")
            if kind in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine"):
                parents[f"{logical_id}Role"] = logical_id
                for event_id in (definition.get("Properties") or {}).get("Events") or {}:
                    parents[f"{logical_id}{event_id}"] = logical_id
                    parents[f"{logical_id}{event_id}Permission"] = logical_id
            if kind == "AWS::Serverless::Function":
                for event in ((definition.get("Properties") or {}).get("Events") or {}).values():
                    if isinstance(event, dict) and event.get("Type") == "Api":
                        parents.setdefault(IMPLICIT_API, logical_id)
        return parents

    # -- main ------------------------------------------------------------------------------------
    def deploy(self) -> Stack:
        transform = self.template.get("Transform")
        transforms = transform if isinstance(transform, list) else [transform] if transform else []
        unknown_transforms = [t for t in transforms if t != SERVERLESS_TRANSFORM]
        if unknown_transforms:
            raise TemplateError(f"Transform: {unknown_transforms} not supported by the sandbox")
        for name in self.template.get("Conditions") or {}:
            self.stack.conditions[name] = self.resolver.condition(name)
        for logical_id in self.order():
            self._current = logical_id
            definition = self.definitions[logical_id]
            kind = definition.get("Type")
            condition = definition.get("Condition")
            if condition is not None and not self.resolver.condition(condition, where=logical_id):
                self.stack.skipped[logical_id] = str(condition)
                continue
            handler = _HANDLERS.get(str(kind))
            if handler is None:
                raise TemplateError(f"{logical_id}: resource type {kind} is not supported by the sandbox")
            properties = definition.get("Properties") or {}
            if not isinstance(properties, dict):
                raise self.error("Properties must be a map")
            handler(self, logical_id, properties)
        self._current = "<apis>"
        for api in self.stack.apis.values():
            self._publish_api(api)
        self._current = "Outputs"
        for name, output in (self.template.get("Outputs") or {}).items():
            condition = output.get("Condition")
            if condition is not None and not self.resolver.condition(condition, where=f"Outputs.{name}"):
                continue
            self.stack.outputs[name] = self.resolver.resolve(output.get("Value"), where=f"Outputs.{name}")
        return self.stack

    # -- helpers shared by handlers --------------------------------------------------------------
    def check_properties(
        self, properties: Mapping[str, Any], supported: set[str], ignored: frozenset[str] = frozenset()
    ) -> None:
        """Unknown properties fail loudly; ``ignored`` ones have no effect in the sandbox by design."""
        unknown = sorted(set(properties) - supported - ignored)
        if unknown:
            raise self.error(
                f"propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)} not supported"
            )

    def create_role(self, logical_id: str, trust: dict[str, Any], policies: list[Any]) -> Resource:
        name = self.physical_name(logical_id)
        role = self.client("iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))[
            "Role"
        ]
        for index, policy in enumerate(policies):
            if isinstance(policy, dict) and "Statement" in policy:
                self.client("iam").put_role_policy(
                    RoleName=name, PolicyName=f"{logical_id}Policy{index}", PolicyDocument=json.dumps(policy)
                )
        return self.add(
            Resource(
                logical_id=logical_id,
                type="AWS::IAM::Role",
                physical_id=name,
                attributes={"Arn": role["Arn"], "RoleId": role["RoleId"], "Policies": policies},
                arn=role["Arn"],
                generated_by=self._current,
            )
        )

    def put_rule_with_target(
        self,
        logical_id: str,
        *,
        target_arn: str,
        target_id: str,
        pattern: dict[str, Any] | None = None,
        schedule: str | None = None,
        event: Mapping[str, Any],
        role_arn: str | None = None,
    ) -> Resource:
        """A SAM EventBridgeRule/Schedule event: one rule and one target (as SAM generates them)."""
        bus = event.get("EventBusName", "default")
        name = event.get("Name") or event.get("RuleName") or self.physical_name(logical_id)
        state = event.get("State") or ("DISABLED" if event.get("Enabled") is False else "ENABLED")
        rule_args: dict[str, Any] = {"Name": name, "EventBusName": bus, "State": state}
        if pattern is not None:
            rule_args["EventPattern"] = json.dumps(pattern)
        if schedule is not None:
            rule_args["ScheduleExpression"] = schedule
        if event.get("Description"):
            rule_args["Description"] = event["Description"]
        rule_arn = self.client("events").put_rule(**rule_args)["RuleArn"]
        target: dict[str, Any] = {"Id": target_id, "Arn": target_arn}
        for key in ("Input", "InputPath", "InputTransformer", "RetryPolicy"):
            if key in event:
                target[key] = event[key]
        if role_arn is not None:
            target["RoleArn"] = role_arn
        dead_letter = event.get("DeadLetterConfig")
        if dead_letter:
            target["DeadLetterConfig"] = {"Arn": self._dead_letter_arn(logical_id, dead_letter)}
        self._put_targets(name, bus, [target])
        resource = self.add(
            Resource(
                logical_id=logical_id,
                type="AWS::Events::Rule",
                physical_id=name,
                attributes={"Arn": rule_arn},
                arn=rule_arn,
                generated_by=self._current,
            )
        )
        if schedule is not None:
            self.stack.schedules[logical_id] = ScheduleSpec(logical_id, name, rule_arn, schedule, bus)
        return resource

    def _put_targets(self, rule: str, bus: str, targets: list[dict[str, Any]]) -> None:
        result = self.client("events").put_targets(Rule=rule, EventBusName=bus, Targets=targets)
        if result.get("FailedEntryCount"):
            raise self.error(f"PutTargets failed: {result['FailedEntries']}")

    def _dead_letter_arn(self, logical_id: str, config: Mapping[str, Any]) -> str:
        if config.get("Arn"):
            return str(config["Arn"])
        if config.get("Type") == "SQS":
            queue_id = config.get("QueueLogicalId") or f"{logical_id}Queue"
            url = self.client("sqs").create_queue(QueueName=self.physical_name(queue_id, 80))["QueueUrl"]
            arn = self.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
                "Attributes"
            ]["QueueArn"]
            self.add(
                Resource(queue_id, "AWS::SQS::Queue", url, {"Arn": arn, "QueueUrl": url}, arn, self._current)
            )
            return str(arn)
        raise self.error(f"DeadLetterConfig needs Arn or Type: SQS, got {dict(config)}")

    def add_permission(self, logical_id: str, function_name: str, principal: str, source_arn: str) -> None:
        self.client("lambda").add_permission(
            FunctionName=function_name,
            StatementId=logical_id,
            Action="lambda:InvokeFunction",
            Principal=principal,
            SourceArn=source_arn,
        )
        self.add(
            Resource(logical_id, "AWS::Lambda::Permission", logical_id, {}, None, generated_by=self._current)
        )

    def _publish_api(self, api: ApiSpec) -> None:
        """Create the API's resources, methods and stage in moto API Gateway (for GetResources etc.)."""
        apigw = self.client("apigateway")
        resources = {item["path"]: item["id"] for item in apigw.get_resources(restApiId=api.api_id)["items"]}
        for route in api.routes:
            parent = "/"
            for part in [p for p in route.path.split("/") if p]:
                path = f"{parent.rstrip('/')}/{part}"
                if path not in resources:
                    resources[path] = apigw.create_resource(
                        restApiId=api.api_id, parentId=resources[parent], pathPart=part
                    )["id"]
                parent = path
            route.resource_id = resources[route.path if route.path != "" else "/"]
            function = self.stack.functions[route.function_logical_id]
            apigw.put_method(
                restApiId=api.api_id,
                resourceId=route.resource_id,
                httpMethod=route.method,
                authorizationType=route.auth,
            )
            apigw.put_integration(
                restApiId=api.api_id,
                resourceId=route.resource_id,
                httpMethod=route.method,
                type="AWS_PROXY",
                integrationHttpMethod="POST",
                uri=(
                    f"arn:{self.partition}:apigateway:{self.region}:lambda:path/2015-03-31/functions/"
                    f"{function.arn}/invocations"
                ),
            )
        if api.routes:
            apigw.create_deployment(restApiId=api.api_id, stageName=api.stage)

    def ensure_api(self, logical_id: str, properties: Mapping[str, Any], *, implicit: bool) -> ApiSpec:
        if logical_id in self.stack.apis:
            return self.stack.apis[logical_id]
        merged = _merge_globals(self.globals.get("Api", {}), dict(properties))
        resolved = self.resolver.resolve(merged, where=logical_id)
        name = resolved.get("Name") or (f"{self.stack.name}" if implicit else self.physical_name(logical_id))
        created = self.client("apigateway").create_rest_api(
            name=name, description=resolved.get("Description", "")
        )
        api_id = created["id"]
        auth = resolved.get("Auth") or {}
        default = str(auth.get("DefaultAuthorizer") or "NONE")
        if default not in ("AWS_IAM", "NONE"):
            raise TemplateError(
                f"{logical_id}: Auth.DefaultAuthorizer {default} not supported (AWS_IAM or NONE)"
            )
        stage = str(resolved.get("StageName") or IMPLICIT_API_STAGE)
        spec = ApiSpec(logical_id=logical_id, api_id=api_id, stage=stage, default_authorizer=default)
        self.stack.apis[logical_id] = spec
        self.add(
            Resource(
                logical_id,
                "AWS::Serverless::Api",
                api_id,
                {"RootResourceId": created["rootResourceId"]},
                self.arn("apigateway", f"/restapis/{api_id}", account=False),
                generated_by=self._current if implicit else None,
            )
        )
        return spec


def _merge_globals(global_values: Mapping[str, Any], local: Mapping[str, Any]) -> dict[str, Any]:
    """SAM's Globals merge: maps merge (local wins), lists concatenate (globals first), scalars override."""
    merged: dict[str, Any] = dict(global_values)
    for key, value in local.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict) and not _is_intrinsic(value):
            merged[key] = _merge_globals(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = [*current, *value]
        else:
            merged[key] = value
    return merged


def _is_intrinsic(value: Mapping[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref", "Condition"))


def _tags_list(tags: Any) -> list[dict[str, str]]:
    if isinstance(tags, dict):
        return [{"Key": str(k), "Value": str(v)} for k, v in tags.items()]
    return [{"Key": str(t["Key"]), "Value": str(t["Value"])} for t in tags or []]


def _tags_map(tags: Any) -> dict[str, str]:
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    return {str(t["Key"]): str(t["Value"]) for t in tags or []}


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


# --------------------------------------------------------------------------------------------------
# resource handlers
# --------------------------------------------------------------------------------------------------
_FUNCTION_PROPS: Final = {
    "Handler",
    "Runtime",
    "CodeUri",
    "Environment",
    "Layers",
    "Timeout",
    "MemorySize",
    "Events",
    "Role",
    "Policies",
    "FunctionName",
    "Description",
    "DeadLetterQueue",
    "EventInvokeConfig",
    "Tags",
    "PackageType",
}
# Properties that change nothing when functions run in-process (documented, not silently dropped).
_FUNCTION_IGNORED: Final = frozenset(
    {
        "Architectures",
        "Tracing",
        "ReservedConcurrentExecutions",
        "ProvisionedConcurrencyConfig",
        "LoggingConfig",
        "VpcConfig",
        "KmsKeyArn",
        "EphemeralStorage",
        "PermissionsBoundary",
        "RecursiveLoop",
        "SnapStart",
        "RuntimeManagementConfig",
        "PropagateTags",
        "AssumeRolePolicyDocument",
    }
)


def _deploy_function(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    merged = _merge_globals(d.globals.get("Function", {}), raw)
    d.check_properties(merged, _FUNCTION_PROPS, _FUNCTION_IGNORED)
    events_raw: dict[str, Any] = merged.pop("Events", None) or {}
    props = d.resolve(merged, "Properties")
    if props.get("PackageType", "Zip") != "Zip":
        raise d.error("PackageType Image is not supported (the sandbox runs Zip functions in-process)")
    for required in ("Handler", "Runtime", "CodeUri"):
        if not props.get(required):
            raise d.error(f"{required} is required (InlineCode and S3 CodeUri are not supported)")
    code_uri = props["CodeUri"]
    if not isinstance(code_uri, str) or code_uri.startswith("s3://"):
        raise d.error(f"CodeUri must be a local directory, got {code_uri!r}")
    code_dir = (d.base_dir / code_uri).resolve()
    module_path = str(props["Handler"]).rpartition(".")[0].replace(".", "/")
    if (
        not (code_dir / f"{module_path}.py").is_file()
        and not (code_dir / module_path / "__init__.py").is_file()
    ):
        raise d.error(f"handler module {module_path}.py not found in {code_dir}")

    if props.get("Role"):
        role_arn = str(props["Role"])
    else:
        role_arn = d.create_role(
            f"{logical_id}Role", _LAMBDA_TRUST, list(props.get("Policies") or [])
        ).physical_id
        role_arn = d.stack.resources[f"{logical_id}Role"].attributes["Arn"]

    layer_arns = [str(arn) for arn in props.get("Layers") or []]
    layer_dirs = [d.stack.layers[arn] for arn in layer_arns if arn in d.stack.layers]
    external = [arn for arn in layer_arns if arn not in d.stack.layers]
    env = {
        str(k): _stringify(v) for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()
    }
    name = str(props.get("FunctionName") or d.physical_name(logical_id))
    timeout = int(props.get("Timeout", 3))
    memory = int(props.get("MemorySize", 128))
    dead_letter = (props.get("DeadLetterQueue") or {}).get("TargetArn")
    create_args: dict[str, Any] = {
        "FunctionName": name,
        "Runtime": str(props["Runtime"]),
        "Role": role_arn,
        "Handler": str(props["Handler"]),
        "Code": {"ZipFile": _PLACEHOLDER_ZIP},
        "Timeout": timeout,
        "MemorySize": memory,
        "Environment": {"Variables": env},
        "Tags": {**_tags_map(props.get("Tags")), "lambda:createdBy": "SAM"},
    }
    if props.get("Description"):
        create_args["Description"] = str(props["Description"])
    if layer_arns and not external:
        create_args["Layers"] = layer_arns
    if dead_letter:
        create_args["DeadLetterConfig"] = {"TargetArn": str(dead_letter)}
    created = d.client("lambda").create_function(**create_args)
    arn = str(created["FunctionArn"])
    invoke_config = props.get("EventInvokeConfig") or {}
    d.add(Resource(logical_id, "AWS::Serverless::Function", name, {"Arn": arn}, arn))
    d.stack.functions[logical_id] = FunctionSpec(
        logical_id=logical_id,
        name=name,
        arn=arn,
        handler=str(props["Handler"]),
        runtime=str(props["Runtime"]),
        code_dir=code_dir,
        layer_dirs=layer_dirs,
        environment=env,
        timeout=timeout,
        memory_size=memory,
        dead_letter_arn=str(dead_letter) if dead_letter else None,
        max_async_retries=int(invoke_config.get("MaximumRetryAttempts", 2)),
        external_layers=external,
    )
    for event_id, event_raw in events_raw.items():
        _deploy_function_event(d, logical_id, name, arn, event_id, event_raw)


def _deploy_function_event(  # noqa: PLR0917 - one event of one function
    d: _Deployer, function_id: str, function_name: str, function_arn: str, event_id: str, event_raw: Any
) -> None:
    if not isinstance(event_raw, dict) or "Type" not in event_raw:
        raise d.error(f"Events.{event_id} needs a Type")
    kind = event_raw["Type"]
    event = d.resolve(event_raw.get("Properties") or {}, f"Events.{event_id}.Properties")
    generated_id = f"{function_id}{event_id}"
    if kind == "Api":
        _deploy_api_event(d, function_id, function_name, event_id, event_raw, event)
    elif kind == "SQS":
        args: dict[str, Any] = {
            "EventSourceArn": str(event["Queue"]),
            "FunctionName": function_name,
            "BatchSize": int(event.get("BatchSize", 10)),
            "Enabled": bool(event.get("Enabled", True)),
        }
        if event.get("FunctionResponseTypes"):
            args["FunctionResponseTypes"] = list(event["FunctionResponseTypes"])
        if "MaximumBatchingWindowInSeconds" in event:
            args["MaximumBatchingWindowInSeconds"] = int(event["MaximumBatchingWindowInSeconds"])
        if event.get("FilterCriteria"):
            raise d.error(f"Events.{event_id}.FilterCriteria is not supported by the sandbox")
        mapping = d.client("lambda").create_event_source_mapping(**args)
        d.add(
            Resource(
                generated_id,
                "AWS::Lambda::EventSourceMapping",
                mapping["UUID"],
                {"Id": mapping["UUID"]},
                mapping.get("EventSourceMappingArn"),
                generated_by=function_id,
            )
        )
    elif kind == "SNS":
        if event.get("SqsSubscription"):
            raise d.error(f"Events.{event_id}.SqsSubscription is not supported by the sandbox")
        attributes: dict[str, str] = {}
        if event.get("FilterPolicy"):
            attributes["FilterPolicy"] = json.dumps(event["FilterPolicy"])
        if event.get("FilterPolicyScope"):
            attributes["FilterPolicyScope"] = str(event["FilterPolicyScope"])
        topic_arn = str(event["Topic"])
        subscription = d.client("sns").subscribe(
            TopicArn=topic_arn, Protocol="lambda", Endpoint=function_arn, Attributes=attributes
        )["SubscriptionArn"]
        d.add(Resource(generated_id, "AWS::SNS::Subscription", subscription, {}, subscription, function_id))
        d.add_permission(f"{generated_id}Permission", function_name, "sns.amazonaws.com", topic_arn)
    elif kind in ("EventBridgeRule", "CloudWatchEvent", "Schedule"):
        schedule = str(event["Schedule"]) if kind == "Schedule" else None
        pattern = None if schedule else event.get("Pattern")
        if schedule is None and not pattern:
            raise d.error(f"Events.{event_id}.Pattern is required")
        target_id = str((event.get("Target") or {}).get("Id") or f"{function_id}{event_id}LambdaTarget")
        rule = d.put_rule_with_target(
            generated_id,
            target_arn=function_arn,
            target_id=target_id,
            pattern=pattern,
            schedule=schedule,
            event=event,
        )
        d.add_permission(f"{generated_id}Permission", function_name, "events.amazonaws.com", str(rule.arn))
    else:
        raise d.error(f"Events.{event_id}: event type {kind} is not supported by the sandbox")


def _deploy_api_event(  # noqa: PLR0917 - one event of one function
    d: _Deployer,
    function_id: str,
    function_name: str,
    event_id: str,
    event_raw: dict[str, Any],
    event: dict[str, Any],
) -> None:
    """An Api event: a route on its RestApiId (or SAM's implicit ServerlessRestApi) plus the permission."""
    raw_api = (event_raw.get("Properties") or {}).get("RestApiId")
    if raw_api is None:
        api = d.ensure_api(IMPLICIT_API, {}, implicit=True)
    elif isinstance(raw_api, dict) and isinstance(raw_api.get("Ref"), str):
        api_id = raw_api["Ref"]
        if api_id not in d.stack.apis:
            raise d.error(f"Events.{event_id}.RestApiId: {api_id} is not a deployed AWS::Serverless::Api")
        api = d.stack.apis[api_id]
    else:
        raise d.error(f"Events.{event_id}.RestApiId must be !Ref to an AWS::Serverless::Api")
    auth = str((event.get("Auth") or {}).get("Authorizer") or api.default_authorizer)
    if auth not in ("AWS_IAM", "NONE"):
        raise d.error(f"Events.{event_id}.Auth.Authorizer {auth} not supported (AWS_IAM or NONE)")
    method = str(event["Method"]).upper()
    api.routes.append(ApiRoute(api.logical_id, str(event["Path"]), method, function_id, auth))
    source_arn = d.arn("execute-api", f"{api.api_id}/*/{method if method != 'ANY' else '*'}{event['Path']}")
    d.add_permission(
        f"{function_id}{event_id}Permission{api.stage}", function_name, "apigateway.amazonaws.com", source_arn
    )


_LAYER_IGNORED: Final = frozenset(
    {"CompatibleRuntimes", "CompatibleArchitectures", "RetentionPolicy", "Description", "LicenseInfo"}
)


def _deploy_layer(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(raw, {"LayerName", "ContentUri"}, _LAYER_IGNORED)
    props = d.resolve(raw, "Properties")
    content = props.get("ContentUri")
    if not isinstance(content, str) or content.startswith("s3://"):
        raise d.error(f"ContentUri must be a local directory, got {content!r}")
    layer_dir = (d.base_dir / content).resolve()
    if not layer_dir.is_dir():
        raise d.error(f"ContentUri {layer_dir} is not a directory")
    name = str(props.get("LayerName") or logical_id)
    published = d.client("lambda").publish_layer_version(
        LayerName=name,
        Description=str(props.get("Description", "")),
        Content={"ZipFile": _PLACEHOLDER_ZIP},
        CompatibleRuntimes=list(props.get("CompatibleRuntimes") or []),
    )
    arn = str(published["LayerVersionArn"])
    d.stack.layers[arn] = layer_dir
    d.add(Resource(logical_id, "AWS::Serverless::LayerVersion", arn, {"Arn": arn}, arn))


_STATE_MACHINE_PROPS: Final = {
    "DefinitionUri",
    "Definition",
    "DefinitionSubstitutions",
    "Role",
    "Policies",
    "Name",
    "Type",
    "Events",
    "Tags",
    "Logging",
    "Tracing",
}
_STATE_MACHINE_IGNORED: Final = frozenset(
    {"PermissionsBoundary", "RolePath", "AutoPublishAlias", "UseAliasAsEventTarget"}
)
_UNSUBSTITUTED: Final = re.compile(r"\$\{([^}]+)\}")


def _deploy_state_machine(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    merged = _merge_globals(d.globals.get("StateMachine", {}), raw)
    d.check_properties(merged, _STATE_MACHINE_PROPS, _STATE_MACHINE_IGNORED)
    events_raw: dict[str, Any] = merged.pop("Events", None) or {}
    props = d.resolve(merged, "Properties")
    if "DefinitionUri" in props:
        uri = props["DefinitionUri"]
        if not isinstance(uri, str) or uri.startswith("s3://"):
            raise d.error(f"DefinitionUri must be a local file, got {uri!r}")
        path = (d.base_dir / uri).resolve()
        try:
            definition = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise d.error(f"DefinitionUri {path}: {error}") from error
    elif "Definition" in props:
        definition = props["Definition"]
    else:
        raise d.error("DefinitionUri or Definition is required")
    substitutions = {str(k): _stringify(v) for k, v in (props.get("DefinitionSubstitutions") or {}).items()}
    text = json.dumps(definition)
    for key, value in substitutions.items():
        text = text.replace("${" + key + "}", json.dumps(value)[1:-1])
    missing = sorted(set(_UNSUBSTITUTED.findall(text)))
    if missing:
        raise d.error(
            f"definition uses ${{...}} without a DefinitionSubstitutions entry: {', '.join(missing)}"
        )
    if props.get("Role"):
        role_arn = str(props["Role"])
    else:
        d.create_role(f"{logical_id}Role", _STATES_TRUST, list(props.get("Policies") or []))
        role_arn = d.stack.resources[f"{logical_id}Role"].attributes["Arn"]
    name = str(props.get("Name") or d.physical_name(logical_id, 80))
    created = d.client("stepfunctions").create_state_machine(
        name=name,
        definition=text,
        roleArn=role_arn,
        type=str(props.get("Type", "STANDARD")),
        tags=[{"key": t["Key"], "value": t["Value"]} for t in _tags_list(props.get("Tags"))],
    )
    arn = str(created["stateMachineArn"])
    d.add(Resource(logical_id, "AWS::Serverless::StateMachine", arn, {"Arn": arn, "Name": name}, arn))
    for event_id, event_raw in events_raw.items():
        kind = event_raw.get("Type") if isinstance(event_raw, dict) else None
        if kind not in ("EventBridgeRule", "CloudWatchEvent", "Schedule"):
            raise d.error(
                f"Events.{event_id}: state machine event type {kind} is not supported by the sandbox"
            )
        event = d.resolve(event_raw.get("Properties") or {}, f"Events.{event_id}.Properties")
        events_role = d.create_role(
            f"{logical_id}{event_id}Role",
            _EVENTS_TRUST,
            [
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "states:StartExecution", "Resource": arn}],
                }
            ],
        )
        schedule = str(event["Schedule"]) if kind == "Schedule" else None
        d.put_rule_with_target(
            f"{logical_id}{event_id}",
            target_arn=arn,
            target_id=str(
                (event.get("Target") or {}).get("Id") or f"{logical_id}{event_id}StepFunctionsTarget"
            ),
            pattern=None if schedule else event.get("Pattern"),
            schedule=schedule,
            event=event,
            role_arn=events_role.attributes["Arn"],
        )


def _deploy_api(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    merged = _merge_globals(d.globals.get("Api", {}), raw)
    if "DefinitionBody" in merged or "DefinitionUri" in merged:
        raise d.error("DefinitionBody/DefinitionUri not supported: declare routes as function Api events")
    d.check_properties(
        merged,
        {"Name", "StageName", "Auth", "Description", "Tags"},
        frozenset(
            {
                "TracingEnabled",
                "MethodSettings",
                "AccessLogSetting",
                "EndpointConfiguration",
                "OpenApiVersion",
                "Cors",
                "GatewayResponses",
                "Variables",
                "CacheClusterEnabled",
                "MinimumCompressionSize",
                "BinaryMediaTypes",
                "DisableExecuteApiEndpoint",
            }
        ),
    )
    auth = (d.resolve(merged.get("Auth") or {}, "Auth")) or {}
    unsupported = sorted(
        set(auth) - {"DefaultAuthorizer", "AddDefaultAuthorizerToCorsPreflight", "InvokeRole"}
    )
    if unsupported:
        raise d.error(f"Auth.{', '.join(unsupported)} not supported (the sandbox supports AWS_IAM)")
    d.ensure_api(logical_id, raw, implicit=False)


_TABLE_PROPS: Final = {
    "TableName",
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "StreamSpecification",
    "SSESpecification",
    "TimeToLiveSpecification",
    "PointInTimeRecoverySpecification",
    "Tags",
    "TableClass",
    "DeletionProtectionEnabled",
}
_TABLE_IGNORED: Final = frozenset({"ContributorInsightsSpecification", "ResourcePolicy", "WarmThroughput"})


def _deploy_table(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(raw, _TABLE_PROPS, _TABLE_IGNORED)
    props = d.resolve(raw, "Properties")
    name = str(props.get("TableName") or d.physical_name(logical_id, 255))
    args: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    for key in ("ProvisionedThroughput", "GlobalSecondaryIndexes", "LocalSecondaryIndexes", "TableClass"):
        if key in props:
            args[key] = props[key]
    if "DeletionProtectionEnabled" in props:
        args["DeletionProtectionEnabled"] = bool(props["DeletionProtectionEnabled"])
    if props.get("StreamSpecification"):
        args["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    sse = props.get("SSESpecification")
    if sse:
        args["SSESpecification"] = {
            "Enabled": bool(sse.get("SSEEnabled", False)),
            **{k: v for k, v in sse.items() if k in ("SSEType", "KMSMasterKeyId")},
        }
    if props.get("Tags"):
        args["Tags"] = _tags_list(props["Tags"])
    dynamodb = d.client("dynamodb")
    table = dynamodb.create_table(**args)["TableDescription"]
    if props.get("TimeToLiveSpecification"):
        ttl = props["TimeToLiveSpecification"]
        dynamodb.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": bool(ttl["Enabled"])},
        )
    pitr = props.get("PointInTimeRecoverySpecification")
    if pitr:
        dynamodb.update_continuous_backups(
            TableName=name,
            PointInTimeRecoverySpecification={
                "PointInTimeRecoveryEnabled": bool(pitr.get("PointInTimeRecoveryEnabled", False))
            },
        )
    attributes = {"Arn": table["TableArn"]}
    if table.get("LatestStreamArn"):
        attributes["StreamArn"] = table["LatestStreamArn"]
    d.add(Resource(logical_id, "AWS::DynamoDB::Table", name, attributes, table["TableArn"]))


def _deploy_topic(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    attribute_props = {
        "DisplayName",
        "KmsMasterKeyId",
        "FifoTopic",
        "ContentBasedDeduplication",
        "SignatureVersion",
    }
    d.check_properties(
        raw,
        {"TopicName", "Subscription", "Tags", "TracingConfig", *attribute_props},
        frozenset({"DataProtectionPolicy", "ArchivePolicy", "DeliveryStatusLogging", "FifoThroughputScope"}),
    )
    props = d.resolve(raw, "Properties")
    name = str(props.get("TopicName") or d.physical_name(logical_id, 256))
    attributes = {key: _stringify(props[key]) for key in attribute_props if key in props}
    if "TracingConfig" in props:
        attributes["TracingConfig"] = str(props["TracingConfig"])
    args: dict[str, Any] = {"Name": name, "Attributes": attributes}
    if props.get("Tags"):
        args["Tags"] = _tags_list(props["Tags"])
    sns = d.client("sns")
    arn = str(sns.create_topic(**args)["TopicArn"])
    for subscription in props.get("Subscription") or []:
        sns.subscribe(TopicArn=arn, Protocol=subscription["Protocol"], Endpoint=subscription["Endpoint"])
    d.add(Resource(logical_id, "AWS::SNS::Topic", arn, {"TopicArn": arn, "TopicName": name}, arn))


def _deploy_topic_policy(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(raw, {"PolicyDocument", "Topics"})
    props = d.resolve(raw, "Properties")
    for topic in props["Topics"]:
        d.client("sns").set_topic_attributes(
            TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps(props["PolicyDocument"])
        )
    d.add(Resource(logical_id, "AWS::SNS::TopicPolicy", logical_id, {"Id": logical_id}))


def _deploy_subscription(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    attribute_props = {
        "FilterPolicy",
        "FilterPolicyScope",
        "RawMessageDelivery",
        "RedrivePolicy",
        "DeliveryPolicy",
        "SubscriptionRoleArn",
        "ReplayPolicy",
    }
    d.check_properties(raw, {"TopicArn", "Protocol", "Endpoint", "Region", *attribute_props})
    props = d.resolve(raw, "Properties")
    attributes = {key: _stringify(props[key]) for key in attribute_props if key in props}
    arn = d.client("sns").subscribe(
        TopicArn=props["TopicArn"],
        Protocol=props["Protocol"],
        Endpoint=str(props.get("Endpoint", "")),
        Attributes=attributes,
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    d.add(Resource(logical_id, "AWS::SNS::Subscription", arn, {"Arn": arn}, arn))


_QUEUE_ATTRIBUTES: Final = {
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
}


def _deploy_queue(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(raw, {"QueueName", "Tags", *_QUEUE_ATTRIBUTES})
    props = d.resolve(raw, "Properties")
    fifo = bool(props.get("FifoQueue"))
    name = str(props.get("QueueName") or d.physical_name(logical_id, 75) + (".fifo" if fifo else ""))
    args: dict[str, Any] = {
        "QueueName": name,
        "Attributes": {key: _stringify(props[key]) for key in _QUEUE_ATTRIBUTES if key in props},
    }
    if props.get("Tags"):
        args["tags"] = _tags_map(props["Tags"])
    sqs = d.client("sqs")
    url = str(sqs.create_queue(**args)["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    d.add(Resource(logical_id, "AWS::SQS::Queue", url, {"Arn": arn, "QueueName": name, "QueueUrl": url}, arn))


def _deploy_queue_policy(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(raw, {"PolicyDocument", "Queues"})
    props = d.resolve(raw, "Properties")
    for url in props["Queues"]:
        d.client("sqs").set_queue_attributes(
            QueueUrl=url, Attributes={"Policy": json.dumps(props["PolicyDocument"])}
        )
    d.add(Resource(logical_id, "AWS::SQS::QueuePolicy", logical_id, {"Id": logical_id}))


_RULE_TARGET_KEYS: Final = {
    "Arn",
    "Id",
    "Input",
    "InputPath",
    "InputTransformer",
    "RoleArn",
    "DeadLetterConfig",
    "RetryPolicy",
    "SqsParameters",
}


def _deploy_rule(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(
        raw,
        {
            "Name",
            "Description",
            "EventPattern",
            "ScheduleExpression",
            "State",
            "EventBusName",
            "Targets",
            "RoleArn",
        },
    )
    props = d.resolve(raw, "Properties")
    if not props.get("EventPattern") and not props.get("ScheduleExpression"):
        raise d.error("EventPattern or ScheduleExpression is required")
    name = str(props.get("Name") or d.physical_name(logical_id))
    bus = str(props.get("EventBusName", "default"))
    if bus.startswith("arn:"):
        bus = bus.rpartition("/")[2]
    args: dict[str, Any] = {"Name": name, "EventBusName": bus, "State": str(props.get("State", "ENABLED"))}
    if props.get("EventPattern"):
        pattern = props["EventPattern"]
        args["EventPattern"] = pattern if isinstance(pattern, str) else json.dumps(pattern)
    if props.get("ScheduleExpression"):
        args["ScheduleExpression"] = str(props["ScheduleExpression"])
    for key in ("Description", "RoleArn"):
        if props.get(key):
            args[key] = str(props[key])
    arn = str(d.client("events").put_rule(**args)["RuleArn"])
    targets = []
    for index, target in enumerate(props.get("Targets") or []):
        unknown = sorted(set(target) - _RULE_TARGET_KEYS)
        if unknown:
            raise d.error(f"Targets[{index}]: {', '.join(unknown)} not supported")
        service = str(target["Arn"]).split(":")[2]
        if service not in ("lambda", "states", "sns", "sqs", "logs", "events"):
            raise d.error(f"Targets[{index}]: {service} targets are not supported by the sandbox")
        targets.append(dict(target))
    if targets:
        d._put_targets(name, bus, targets)
    d.add(Resource(logical_id, "AWS::Events::Rule", name, {"Arn": arn}, arn))
    if props.get("ScheduleExpression"):
        d.stack.schedules[logical_id] = ScheduleSpec(
            logical_id, name, arn, str(props["ScheduleExpression"]), bus
        )


def _deploy_permission(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(
        raw,
        {
            "FunctionName",
            "Action",
            "Principal",
            "SourceArn",
            "SourceAccount",
            "EventSourceToken",
            "PrincipalOrgID",
        },
        frozenset({"FunctionUrlAuthType", "InvokedViaFunctionUrl"}),
    )
    props = d.resolve(raw, "Properties")
    args = {
        key: str(value)
        for key, value in props.items()
        if key not in ("FunctionUrlAuthType", "InvokedViaFunctionUrl")
    }
    d.client("lambda").add_permission(StatementId=logical_id, **args)
    d.add(Resource(logical_id, "AWS::Lambda::Permission", logical_id, {}))


def _deploy_role(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(
        raw,
        {
            "RoleName",
            "AssumeRolePolicyDocument",
            "Path",
            "Policies",
            "ManagedPolicyArns",
            "Description",
            "MaxSessionDuration",
            "PermissionsBoundary",
            "Tags",
        },
    )
    props = d.resolve(raw, "Properties")
    name = str(props.get("RoleName") or d.physical_name(logical_id))
    args: dict[str, Any] = {
        "RoleName": name,
        "AssumeRolePolicyDocument": json.dumps(props["AssumeRolePolicyDocument"]),
        "Path": str(props.get("Path", "/")),
    }
    for key in ("Description", "PermissionsBoundary"):
        if props.get(key):
            args[key] = str(props[key])
    if props.get("MaxSessionDuration"):
        args["MaxSessionDuration"] = int(props["MaxSessionDuration"])
    if props.get("Tags"):
        args["Tags"] = _tags_list(props["Tags"])
    iam = d.client("iam")
    role = iam.create_role(**args)["Role"]
    for policy in props.get("Policies") or []:
        iam.put_role_policy(
            RoleName=name,
            PolicyName=str(policy["PolicyName"]),
            PolicyDocument=json.dumps(policy["PolicyDocument"]),
        )
    # AWS managed policies are not loaded into moto's IAM by default; keep them as an attribute.
    attributes = {
        "Arn": role["Arn"],
        "RoleId": role["RoleId"],
        "ManagedPolicyArns": props.get("ManagedPolicyArns", []),
    }
    d.add(Resource(logical_id, "AWS::IAM::Role", name, attributes, role["Arn"]))


_ALARM_INT: Final = {"Period", "EvaluationPeriods", "DatapointsToAlarm"}
_ALARM_PROPS: Final = {
    "AlarmName",
    "AlarmDescription",
    "ActionsEnabled",
    "OKActions",
    "AlarmActions",
    "InsufficientDataActions",
    "MetricName",
    "Namespace",
    "Statistic",
    "ExtendedStatistic",
    "Dimensions",
    "Period",
    "Unit",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "Threshold",
    "ComparisonOperator",
    "TreatMissingData",
    "EvaluateLowSampleCountPercentile",
    "Metrics",
    "ThresholdMetricId",
    "Tags",
}


def _deploy_alarm(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(raw, _ALARM_PROPS)
    props = d.resolve(raw, "Properties")
    name = str(props.get("AlarmName") or d.physical_name(logical_id, 255))
    args: dict[str, Any] = {key: value for key, value in props.items() if key != "AlarmName"}
    for key in _ALARM_INT & set(args):
        args[key] = int(args[key])
    if "Threshold" in args:
        args["Threshold"] = float(args["Threshold"])
    if "Tags" in args:
        args["Tags"] = _tags_list(args["Tags"])
    for query in args.get("Metrics") or []:
        if "Period" in query:
            query["Period"] = int(query["Period"])
        if "MetricStat" in query:
            query["MetricStat"]["Period"] = int(query["MetricStat"]["Period"])
    d.client("cloudwatch").put_metric_alarm(AlarmName=name, **args)
    arn = d.arn("cloudwatch", f"alarm:{name}")
    d.add(Resource(logical_id, "AWS::CloudWatch::Alarm", name, {"Arn": arn}, arn))


def _deploy_log_group(d: _Deployer, logical_id: str, raw: dict[str, Any]) -> None:
    d.check_properties(
        raw,
        {"LogGroupName", "RetentionInDays", "KmsKeyId", "Tags"},
        frozenset({"DataProtectionPolicy", "LogGroupClass"}),
    )
    props = d.resolve(raw, "Properties")
    name = str(props.get("LogGroupName") or d.physical_name(logical_id, 512))
    args: dict[str, Any] = {"logGroupName": name}
    if props.get("KmsKeyId"):
        args["kmsKeyId"] = str(props["KmsKeyId"])
    if props.get("Tags"):
        args["tags"] = _tags_map(props["Tags"])
    logs = d.client("logs")
    logs.create_log_group(**args)
    if props.get("RetentionInDays"):
        logs.put_retention_policy(logGroupName=name, retentionInDays=int(props["RetentionInDays"]))
    arn = d.arn("logs", f"log-group:{name}:*")
    d.add(Resource(logical_id, "AWS::Logs::LogGroup", name, {"Arn": arn}, arn))


_HANDLERS: Final[dict[str, Callable[[_Deployer, str, dict[str, Any]], None]]] = {
    "AWS::Serverless::Function": _deploy_function,
    "AWS::Serverless::LayerVersion": _deploy_layer,
    "AWS::Serverless::StateMachine": _deploy_state_machine,
    "AWS::Serverless::Api": _deploy_api,
    "AWS::DynamoDB::Table": _deploy_table,
    "AWS::SNS::Topic": _deploy_topic,
    "AWS::SNS::TopicPolicy": _deploy_topic_policy,
    "AWS::SNS::Subscription": _deploy_subscription,
    "AWS::SQS::Queue": _deploy_queue,
    "AWS::SQS::QueuePolicy": _deploy_queue_policy,
    "AWS::Events::Rule": _deploy_rule,
    "AWS::Lambda::Permission": _deploy_permission,
    "AWS::IAM::Role": _deploy_role,
    "AWS::CloudWatch::Alarm": _deploy_alarm,
    "AWS::Logs::LogGroup": _deploy_log_group,
}
SUPPORTED_TYPES: Final = frozenset(_HANDLERS)


def deploy(
    template_path: Path | str,
    *,
    session: boto3.Session | None = None,
    region: str = "us-east-1",
    account_id: str = "123456789012",
    stack_name: str = "hyperpod-autopilot",
    parameters: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> Stack:
    """Deploy ``template_path`` into the active moto mock (call inside ``mock_aws``)."""
    path = Path(template_path).resolve()
    template = load_template(path)
    deployer = _Deployer(
        template,
        path,
        session=session or boto3.Session(region_name=region),
        region=region,
        account_id=account_id,
        stack_name=stack_name,
        parameters=parameters or {},
        rng=random.Random(seed),
    )
    return deployer.deploy()
