"""AWS::ApiGateway::Stage: CreateStage, then UpdateStage for its access log setting and method settings
(GetStage shows them); the local API server serves the API under this stage's name and throttles it by
these method settings (sandbox.emulator.api_server). Not done by the local API server: access logs (nothing is
written to the log group)."""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, Provider, names, stringify, tags_map
from ..stack import Resource, TemplateError, Throttle


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    api = next((spec for spec in ctx.stack.apis.values() if spec.api_id == props["RestApiId"]), None)
    if api is None or api.stage:
        raise TemplateError(
            f"RestApiId {props['RestApiId']}: one stage per RestApi of this template is supported"
        )
    if props.get("AccessLogSetting") and not ctx.client("apigateway").get_account().get("cloudwatchRoleArn"):
        # API Gateway refuses logging until the account has its CloudWatch Logs role (moto does not)
        raise TemplateError("CloudWatch Logs role ARN must be set in account settings to enable logging")
    api.stage = str(props["StageName"])
    ctx.client("apigateway").create_stage(
        restApiId=api.api_id,
        stageName=api.stage,
        deploymentId=props["DeploymentId"],
        description=str(props.get("Description", "")),
        tracingEnabled=bool(props.get("TracingEnabled", False)),
        tags=tags_map(props.get("Tags")),
    )
    patches = _access_log_patches(props.get("AccessLogSetting")) + _method_setting_patches(
        props.get("MethodSettings") or []
    )
    if patches:
        ctx.client("apigateway").update_stage(
            restApiId=api.api_id, stageName=api.stage, patchOperations=patches
        )
    api.throttling = _throttling(props.get("MethodSettings") or [])
    return Resource(logical_id, "AWS::ApiGateway::Stage", api.stage)


def _access_log_patches(setting: dict[str, Any] | None) -> list[dict[str, str]]:
    if not setting:
        return []
    unknown = sorted(set(setting) - {"DestinationArn", "Format"})
    if unknown:
        raise TemplateError(f"AccessLogSetting: {', '.join(unknown)} not supported")
    return [
        {"op": "replace", "path": f"/accessLogSettings/{key[0].lower()}{key[1:]}", "value": str(value)}
        for key, value in setting.items()
    ]


# MethodSettings members → the UpdateStage patch path under /<resource>/<method>/ (API Gateway's names).
_METHOD_SETTINGS: Final = {
    "ThrottlingRateLimit": "throttling/rateLimit",
    "ThrottlingBurstLimit": "throttling/burstLimit",
    "MetricsEnabled": "metrics/enabled",
    "LoggingLevel": "logging/loglevel",
    "DataTraceEnabled": "logging/dataTrace",
}


def _method_setting_patches(settings: list[dict[str, Any]]) -> list[dict[str, str]]:
    patches: list[dict[str, str]] = []
    for index, setting in enumerate(settings):
        unknown = sorted(set(setting) - set(_METHOD_SETTINGS) - {"ResourcePath", "HttpMethod"})
        if unknown:
            raise TemplateError(f"MethodSettings[{index}]: {', '.join(unknown)} not supported")
        path = str(setting.get("ResourcePath", "/*"))
        # "/*" is every resource; a resource path's own slashes are escaped as ~1 (JSON Pointer).
        resource = "*" if path == "/*" else path.replace("~", "~0").replace("/", "~1")
        method = str(setting.get("HttpMethod", "*"))
        patches += [
            {"op": "replace", "path": f"/{resource}/{method}/{target}", "value": stringify(setting[key])}
            for key, target in _METHOD_SETTINGS.items()
            if key in setting
        ]
    return patches


def _throttling(settings: list[dict[str, Any]]) -> dict[tuple[str, str], Throttle]:
    def number(value: Any) -> float | None:
        return None if value is None else float(stringify(value))

    return {
        (str(s.get("ResourcePath", "/*")), str(s.get("HttpMethod", "*")).upper()): Throttle(
            number(s.get("ThrottlingRateLimit")),
            None if (burst := number(s.get("ThrottlingBurstLimit"))) is None else int(burst),
        )
        for s in settings
        if "ThrottlingRateLimit" in s or "ThrottlingBurstLimit" in s
    }


PROVIDER = Provider(
    "AWS::ApiGateway::Stage",
    names("RestApiId StageName DeploymentId Description TracingEnabled AccessLogSetting MethodSettings Tags"),
    create,
)
