"""What a resource provider gets: clients, names and ARNs as CloudFormation makes them, the stack so far."""

from __future__ import annotations

import io
import json
import random
import string
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import boto3

from .intrinsics import partition_for
from .stack import Resource, Stack, TemplateError
from .transform import LOCAL_BUCKET


def _placeholder_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "# The sandbox runs this code in-process from its local path.\n")
    return buffer.getvalue()


PLACEHOLDER_ZIP: Final = _placeholder_zip()


@dataclass
class Context:
    session: boto3.Session
    stack: Stack
    base_dir: Path
    rng: random.Random
    _clients: dict[str, Any] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.stack.region

    @property
    def partition(self) -> str:
        return partition_for(self.stack.region)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region)  # type: ignore[call-overload]
        return self._clients[service]

    def physical_name(self, logical_id: str, max_length: int = 64) -> str:
        """CloudFormation-style generated name: <stack>-<LogicalId>-<random suffix>."""
        suffix = "".join(self.rng.choices(string.ascii_uppercase + string.digits, k=12))
        room = max_length - len(suffix) - 2
        stack_part = self.stack.name[: max(1, room // 2)]
        logical_part = logical_id[: room - len(stack_part)]
        return f"{stack_part}-{logical_part}-{suffix}"

    def arn(self, service: str, resource: str) -> str:
        return f"arn:{self.partition}:{service}:{self.region}:{self.stack.account_id}:{resource}"

    def local_path(self, location: Mapping[str, Any], what: str) -> Path:
        """The local path a SAM CodeUri/ContentUri/DefinitionUri named (see
        sandbox.emulator.deploy.transform): ``location`` is {S3Bucket, S3Key} or {Bucket, Key} of the
        placeholder bucket."""
        bucket, key = (
            location.get("S3Bucket", location.get("Bucket")),
            location.get("S3Key", location.get("Key")),
        )
        if (
            set(location) - {"S3Bucket", "S3Key", "Bucket", "Key"}
            or bucket != LOCAL_BUCKET
            or not isinstance(key, str)
        ):
            raise TemplateError(f"{what} {location}: the sandbox deploys local paths (CodeUri…) only")
        path = (self.base_dir / key).resolve()
        if not path.exists():
            raise TemplateError(f"{what}: {path} does not exist")
        return path


Create = Callable[[Context, str, dict[str, Any]], Resource]


@dataclass(frozen=True)
class Provider:
    """One CloudFormation resource type. ``properties`` are deployed; ``ignored`` ones change nothing
    in one process (each provider says why); any other property is refused loudly."""

    type: str
    properties: frozenset[str]
    create: Create
    ignored: frozenset[str] = frozenset()


def names(text: str) -> frozenset[str]:
    """A set of property names written as one string (long lists stay readable)."""
    return frozenset(text.split())


def stringify(value: Any) -> str:
    """A CloudFormation value where AWS takes a string (booleans as true/false, maps as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def attributes(props: Mapping[str, Any], keys: frozenset[str]) -> dict[str, str]:
    """The properties an API takes as a map of string attributes (SQS, SNS)."""
    return {key: stringify(props[key]) for key in keys if key in props}


def tags_list(tags: Any) -> list[dict[str, str]]:
    if isinstance(tags, dict):
        return [{"Key": str(k), "Value": str(v)} for k, v in tags.items()]
    return [{"Key": str(t["Key"]), "Value": str(t["Value"])} for t in tags or []]


def tags_map(tags: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags_list(tags)}


def pick(props: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """The properties that pass to the API unchanged (same name, same shape)."""
    return {key: props[key] for key in keys if key in props}
