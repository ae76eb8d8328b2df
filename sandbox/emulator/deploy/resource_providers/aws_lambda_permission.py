"""AWS::Lambda::Permission: AddPermission, with the logical id as the statement id."""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, Provider, names
from ..stack import Resource

_PROPERTIES: Final = names(
    "FunctionName Action Principal SourceArn SourceAccount EventSourceToken PrincipalOrgID"
)


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    ctx.client("lambda").add_permission(StatementId=logical_id, **{k: str(v) for k, v in props.items()})
    return Resource(logical_id, "AWS::Lambda::Permission", logical_id)


PROVIDER = Provider("AWS::Lambda::Permission", _PROPERTIES, create)
