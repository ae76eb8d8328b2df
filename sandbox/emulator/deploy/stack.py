"""What a deployment produces: the stack's resources, and what the runtime and API server need."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class TemplateError(Exception):
    """The template cannot be deployed into the sandbox as written (names the logical id and why)."""


@dataclass
class Resource:
    """One deployed resource: what Ref returns, its Fn::GetAtt attributes and (when it has one) ARN."""

    logical_id: str
    type: str
    physical_id: str
    attributes: dict[str, Any] = field(default_factory=dict)
    arn: str | None = None
    generated_by: str | None = None  # the SAM resource whose transform generated this one


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
    reserved_concurrency: int | None = None  # ReservedConcurrentExecutions (None: the account's pool)
    external_layers: list[str] = field(default_factory=list)
    # LoggingConfig.LogGroup: where Lambda sends the function's logs (default /aws/lambda/<name>)
    log_group_name: str | None = None


@dataclass
class ApiRoute:
    """One API Gateway method served by the local API server (like ``sam local start-api``)."""

    api_logical_id: str
    path: str  # as in the template, e.g. /clusters/{name} or /{proxy+}
    method: str  # upper case, or ANY
    function_logical_id: str
    auth: str  # AWS_IAM or NONE
    resource_id: str = ""
    # SAM's AWS_IAM default (InvokeRole CALLER_CREDENTIALS): Lambda is invoked as the caller, so the
    # caller needs lambda:InvokeFunction too (sandbox.emulator.api_authorization); False: InvokeRole NONE
    caller_credentials: bool = False


@dataclass(frozen=True)
class Throttle:
    """API Gateway throttling: ``rate`` requests a second refill a token bucket of ``burst`` tokens
    (None: the template leaves it out, so the account's limit applies)."""

    rate: float | None
    burst: int | None


@dataclass
class ApiSpec:
    logical_id: str
    api_id: str
    stage: str
    default_authorizer: str  # AWS_IAM when the API declares SigV4 (SAM's DefaultAuthorizer), else NONE
    routes: list[ApiRoute] = field(default_factory=list)
    # the stage's MethodSettings throttling by (ResourcePath, HttpMethod) as the template writes them
    # (("/*", "*"): every method of the stage)
    throttling: dict[tuple[str, str], Throttle] = field(default_factory=dict)


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
    # SAM logical id -> the id its transform gave it (a layer becomes <LogicalId><hash>)
    aliases: dict[str, str] = field(default_factory=dict)

    def resource(self, logical_id: str) -> Resource:
        logical_id = self.aliases.get(logical_id, logical_id)
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
