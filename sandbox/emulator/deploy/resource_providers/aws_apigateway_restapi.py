"""AWS::ApiGateway::RestApi from the OpenAPI Body SAM generates: its resources, methods and Lambda proxy
integrations in moto, and the routes the local API server serves (sandbox.emulator.api_server)."""

from __future__ import annotations

import re
from typing import Any, Final

from ..context import Context, Provider, names
from ..stack import ApiRoute, ApiSpec, Resource, TemplateError

_BODY_KEYS: Final = names("swagger openapi info paths securityDefinitions")
_METHOD_KEYS: Final = frozenset({"x-amazon-apigateway-integration", "security", "responses"})
# SAM's integration for AWS_IAM routes: Lambda is invoked with the caller's credentials (the local
# server checks the caller's lambda:InvokeFunction, sandbox.emulator.api_authorization); None: API
# Gateway's own.
_CALLER_CREDENTIALS: Final = "arn:aws:iam::*:user/*"
_LAMBDA_URI: Final = re.compile(
    r"arn:[\w-]+:apigateway:[\w-]+:lambda:path/2015-03-31/functions/(.+)/invocations"
)


def _auth(method: dict[str, Any], schemes: dict[str, Any], where: str) -> str:
    names = {name for requirement in method.get("security") or [] for name in requirement}
    if not names or names == {"NONE"}:
        return "NONE"
    sigv4 = all(schemes.get(name, {}).get("x-amazon-apigateway-authtype") == "awsSigv4" for name in names)
    if not sigv4:
        raise TemplateError(f"{where}: authorizer {sorted(names)} not supported (AWS_IAM or NONE)")
    return "AWS_IAM"


def _routes(ctx: Context, logical_id: str, body: dict[str, Any]) -> list[ApiRoute]:
    unknown = sorted(set(body) - _BODY_KEYS)
    if unknown:
        raise TemplateError(f"Body: {', '.join(unknown)} not supported")
    schemes = body.get("securityDefinitions") or {}
    routes = []
    for path, methods in (body.get("paths") or {}).items():
        for verb, method in methods.items():
            where = f"Body.paths.{path}.{verb}"
            integration = method.get("x-amazon-apigateway-integration") or {}
            found = _LAMBDA_URI.fullmatch(str(integration.get("uri")))
            if (
                set(method) - _METHOD_KEYS
                or set(integration) - {"type", "uri", "httpMethod", "credentials"}
                or integration.get("credentials") not in (None, _CALLER_CREDENTIALS)
                or integration.get("type") != "aws_proxy"
                or not found
            ):
                raise TemplateError(f"{where}: only Lambda proxy integrations are supported, got {method}")
            function = ctx.stack.function(found.group(1)).logical_id
            name = "ANY" if verb == "x-amazon-apigateway-any-method" else verb.upper()
            auth = _auth(method, schemes, where)
            caller = integration.get("credentials") == _CALLER_CREDENTIALS
            routes.append(ApiRoute(logical_id, path, name, function, auth, caller_credentials=caller))
    return routes


def _publish(ctx: Context, api_id: str, routes: list[ApiRoute]) -> None:
    """Resources, methods and integrations in moto's API Gateway (GetResources, GetMethod…)."""
    apigateway = ctx.client("apigateway")
    ids = {item["path"]: item["id"] for item in apigateway.get_resources(restApiId=api_id)["items"]}
    for route in routes:
        parent = "/"
        for part in [p for p in route.path.split("/") if p]:
            path = f"{parent.rstrip('/')}/{part}"
            if path not in ids:
                ids[path] = apigateway.create_resource(restApiId=api_id, parentId=ids[parent], pathPart=part)[
                    "id"
                ]
            parent = path
        route.resource_id = ids[route.path]
        method = {"restApiId": api_id, "resourceId": route.resource_id, "httpMethod": route.method}
        apigateway.put_method(**method, authorizationType=route.auth)
        function = ctx.stack.functions[route.function_logical_id].arn
        uri = f"arn:{ctx.partition}:apigateway:{ctx.region}:lambda:path/2015-03-31/functions/{function}"
        uri += "/invocations"
        apigateway.put_integration(**method, type="AWS_PROXY", integrationHttpMethod="POST", uri=uri)


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    body = props.get("Body")
    if not isinstance(body, dict):
        raise TemplateError("Body (SAM's generated OpenAPI document) is required")
    routes = _routes(ctx, logical_id, body)
    name = str(props.get("Name") or (body.get("info") or {}).get("title") or logical_id)
    created = ctx.client("apigateway").create_rest_api(
        name=name, description=str(props.get("Description", ""))
    )
    api_id = str(created["id"])
    _publish(ctx, api_id, routes)
    sigv4 = any(
        s.get("x-amazon-apigateway-authtype") == "awsSigv4"
        for s in (body.get("securityDefinitions") or {}).values()
    )
    ctx.stack.apis[logical_id] = ApiSpec(logical_id, api_id, "", "AWS_IAM" if sigv4 else "NONE", routes)
    arn = f"arn:{ctx.partition}:apigateway:{ctx.region}::/restapis/{api_id}"
    return Resource(
        logical_id, "AWS::ApiGateway::RestApi", api_id, {"RootResourceId": created["rootResourceId"]}, arn
    )


PROVIDER = Provider(
    "AWS::ApiGateway::RestApi",
    frozenset({"Body", "Name", "Description"}),
    create,
    # EndpointConfiguration picks edge / regional / private DNS; the local server is one endpoint.
    ignored=frozenset({"EndpointConfiguration"}),
)
