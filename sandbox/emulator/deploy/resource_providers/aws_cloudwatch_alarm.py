"""AWS::CloudWatch::Alarm: PutMetricAlarm (numbers as the API types them)."""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, Provider, names, tags_list
from ..stack import Resource

_PROPERTIES: Final = names(
    "AlarmName AlarmDescription ActionsEnabled OKActions AlarmActions InsufficientDataActions"
    " MetricName Namespace Statistic ExtendedStatistic Dimensions Period Unit EvaluationPeriods"
    " DatapointsToAlarm Threshold ComparisonOperator TreatMissingData EvaluateLowSampleCountPercentile"
    " Metrics ThresholdMetricId Tags"
)


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    name = str(props.pop("AlarmName", None) or ctx.physical_name(logical_id, 255))
    for key in {"Period", "EvaluationPeriods", "DatapointsToAlarm"} & set(props):
        props[key] = int(props[key])
    if "Threshold" in props:
        props["Threshold"] = float(props["Threshold"])
    if "Tags" in props:
        props["Tags"] = tags_list(props["Tags"])
    for query in props.get("Metrics") or []:
        if "Period" in query:
            query["Period"] = int(query["Period"])
        if "MetricStat" in query:
            query["MetricStat"]["Period"] = int(query["MetricStat"]["Period"])
    ctx.client("cloudwatch").put_metric_alarm(AlarmName=name, **props)
    arn = ctx.arn("cloudwatch", f"alarm:{name}")
    return Resource(logical_id, "AWS::CloudWatch::Alarm", name, {"Arn": arn}, arn)


PROVIDER = Provider("AWS::CloudWatch::Alarm", _PROPERTIES, create)
