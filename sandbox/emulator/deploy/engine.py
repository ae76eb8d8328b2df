"""The sandbox's CloudFormation: a template, transformed by SAM, deployed resource by resource into moto.

Resources are created through boto3 clients inside ``mock_aws`` (so botocore's parameter validation
applies, as it does to CloudFormation's own calls), in dependency order, each by the provider of its
type (``resource_providers``), with intrinsics resolved against parameters, conditions and the
resources created so far. An unknown resource type or property, or an AWS error, is a loud
``TemplateError`` naming the logical id: nothing is skipped silently.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import boto3
import botocore.loaders
import botocore.session
from botocore.exceptions import BotoCoreError, ClientError

from .context import Context
from .intrinsics import Resolver
from .resource_providers import PROVIDERS
from .stack import Stack, TemplateError
from .template import load_template, parameter_values
from .transform import transform

# Resource attributes other than these change how CloudFormation creates a resource (CreationPolicy
# waits for signals, UpdatePolicy…): refused.
_RESOURCE_KEYS: Final = frozenset(
    {"Type", "Properties", "Condition", "DependsOn", "Metadata", "DeletionPolicy", "UpdateReplacePolicy"}
)


class _Deployment:
    def __init__(self, template: dict[str, Any], sam_resources: Mapping[str, Any], context: Context) -> None:
        self.template = template
        self.definitions: dict[str, dict[str, Any]] = template["Resources"]
        self.sam_resources = sam_resources
        self.context = context
        self.stack = context.stack
        self.resolver = Resolver(
            region=self.stack.region,
            account_id=self.stack.account_id,
            stack_name=self.stack.name,
            parameters=self.stack.parameters,
            condition_definitions=template.get("Conditions") or {},
            ref=self._ref,
            get_att=self._get_att,
        )
        self._current = "<template>"
        self._creating: list[str] = []

    def run(self) -> Stack:
        for name in self.template.get("Conditions") or {}:
            self.stack.conditions[name] = self.resolver.condition(name)
        for logical_id in self.definitions:
            self._ensure(logical_id)
        for name, output in (self.template.get("Outputs") or {}).items():
            self._current = f"Outputs.{name}"
            condition = output.get("Condition")
            if condition is None or self.resolver.condition(condition, where=self._current):
                self.stack.outputs[name] = self.resolver.resolve(output.get("Value"), where=self._current)
        return self.stack

    def _ensure(self, logical_id: str) -> None:
        """Create a resource once, in template order except that what it refers to (Ref, GetAtt, Sub,
        DependsOn) is created first, when its reference is resolved: CloudFormation's dependency order."""
        if logical_id in self.stack.resources or logical_id in self.stack.skipped:
            return
        if logical_id in self._creating:
            raise TemplateError(f"Resources: dependency cycle {' -> '.join([*self._creating, logical_id])}")
        self._creating.append(logical_id)
        outer, self._current = self._current, logical_id
        definition = self.definitions[logical_id]
        depends_on = definition.get("DependsOn") or []
        for name in [depends_on] if isinstance(depends_on, str) else depends_on:
            if name not in self.definitions:
                raise TemplateError(f"{logical_id}: DependsOn: unknown resource {name!r}")
            self._ensure(name)
        self._create(logical_id, definition)
        self._creating.pop()
        self._current = outer

    def _create(self, logical_id: str, definition: dict[str, Any]) -> None:
        kind = str(definition.get("Type"))
        condition = definition.get("Condition")
        if condition is not None and not self.resolver.condition(condition, where=logical_id):
            self.stack.skipped[logical_id] = str(condition)
            return
        provider = PROVIDERS.get(kind)
        if provider is None:
            raise TemplateError(f"{logical_id}: resource type {kind} is not supported by the sandbox")
        unknown = sorted(set(definition) - _RESOURCE_KEYS)
        unknown += sorted(set(definition.get("Properties") or {}) - provider.properties - provider.ignored)
        if unknown:
            raise TemplateError(
                f"{logical_id}: {kind} propert{'ies' if len(unknown) > 1 else 'y'} "
                f"{', '.join(unknown)} not supported by the sandbox"
            )
        properties = self.resolver.resolve(definition.get("Properties") or {}, where=logical_id)
        try:
            resource = provider.create(self.context, logical_id, properties)
        except (TemplateError, ClientError, BotoCoreError) as error:  # CloudFormation's CREATE_FAILED
            raise TemplateError(f"{logical_id} ({kind}): {error}") from error
        if logical_id not in self.sam_resources:
            parents = [sam_id for sam_id in self.sam_resources if logical_id.startswith(sam_id)]
            resource.generated_by = max(parents, key=len, default=None)
        self.stack.resources[logical_id] = resource

    def _ref(self, logical_id: str) -> Any:
        if logical_id in self.definitions:
            self._ensure(logical_id)
        if logical_id in self.stack.resources:
            return self.stack.resources[logical_id].physical_id
        raise self._unknown(logical_id, "Ref")

    def _get_att(self, logical_id: str, attribute: str) -> Any:
        if logical_id in self.definitions:
            self._ensure(logical_id)
        if logical_id not in self.stack.resources:
            raise self._unknown(logical_id, f"Fn::GetAtt {logical_id}.{attribute}")
        resource = self.stack.resources[logical_id]
        if attribute not in resource.attributes:
            raise TemplateError(
                f"{self._current}: Fn::GetAtt {logical_id}.{attribute}: {resource.type} has no attribute "
                f"{attribute} in the sandbox (has: {', '.join(sorted(resource.attributes)) or 'none'})"
            )
        return resource.attributes[attribute]

    def _unknown(self, logical_id: str, what: str) -> TemplateError:
        if logical_id in self.stack.skipped:
            reason = f"{logical_id} is not created (condition {self.stack.skipped[logical_id]} is false)"
        else:
            reason = f"unknown resource or parameter {logical_id!r}"
        return TemplateError(f"{self._current}: {what}: {reason}")


@functools.cache
def _models() -> botocore.loaders.Loader:
    """One botocore loader for the deploys that bring no session: each new session's own loader read
    every service model from disk again (about a second of JSON per deploy of this template)."""
    return botocore.loaders.create_loader()


def _session(region: str) -> boto3.Session:
    """A new session (the handlers, credentials and environment of now) reading models from the one
    loader."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _models())
    return boto3.Session(botocore_session=core, region_name=region)


# (template file, its mtime and size, parameter values, region, account, stack) -> what the SAM transform
# made of it. A test suite deploys one template a few hundred times: parsing the YAML and running the
# transform each time cost ~0.45 s of a ~1 s deploy. A changed file has another mtime: parsed anew.
_Transformed = tuple[dict[str, Any], dict[str, Any], dict[str, str], dict[str, Any]]
_transformed: dict[tuple[Any, ...], _Transformed] = {}
_transformed_lock = threading.Lock()


def _load_and_transform(
    path: Path,
    parameters: Mapping[str, Any],
    *,
    region: str,
    account_id: str,
    stack_name: str,
    max_values: Mapping[str, float],
) -> _Transformed:
    """(parameter values, the CloudFormation template, SAM id aliases, the SAM template's Resources),
    each caller with its own copy."""
    stat = path.stat()
    key: tuple[Any, ...] = (str(path), stat.st_mtime_ns, stat.st_size, region, account_id, stack_name)
    key += (json.dumps([parameters, max_values], sort_keys=True, default=str),)
    with _transformed_lock:
        cached = _transformed.get(key)
    if cached is None:
        template = load_template(path)
        values = parameter_values(template, parameters, max_values=max_values)
        translated, aliases = transform(
            template, values, region=region, account_id=account_id, stack_name=stack_name
        )
        cached = (values, translated, aliases, template["Resources"])
        with _transformed_lock:
            _transformed[key] = cached
    return copy.deepcopy(cached)


def deploy(
    template_path: Path | str,
    *,
    session: boto3.Session | None = None,
    region: str = "us-east-1",
    account_id: str = "123456789012",
    stack_name: str = "hyperpod-autopilot",
    parameters: Mapping[str, Any] | None = None,
    seed: int | None = None,
    max_values: Mapping[str, float] | None = None,
) -> Stack:
    """Deploy ``template_path`` into the active moto mock (call inside ``mock_aws``). ``max_values``
    raises parameters' MaxValue (the sandbox's own need: a fast clock; CloudFormation has no such thing)."""
    path = Path(template_path).resolve()
    values, translated, aliases, sam_resources = _load_and_transform(
        path,
        parameters or {},
        region=region,
        account_id=account_id,
        stack_name=stack_name,
        max_values=max_values or {},
    )
    stack = Stack(stack_name, region, account_id, path, values, aliases=aliases)
    context = Context(session or _session(region), stack, path.parent, random.Random(seed))
    return _Deployment(translated, sam_resources, context).run()
