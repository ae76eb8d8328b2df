"""AWS::LanguageExtensions in the sandbox's CloudFormation: expanded by aws-sam-cli's own implementation
(in .venv-sam) when the template is read, before the SAM transform, as CloudFormation runs it; whatever
the sandbox cannot expand as AWS would is a loud TemplateError."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.emulator.deploy import TemplateError, load_template
from sandbox.emulator.deploy.template import LANGUAGE_EXTENSIONS, SAM_PYTHON_VARIABLE
from sandbox.emulator.deploy.transform import SERVERLESS_TRANSFORM, transform
from sandbox.harness.core import DEFAULT_TEMPLATE, Sandbox

TRANSFORMS = [LANGUAGE_EXTENSIONS, SERVERLESS_TRANSFORM]


def _written(tmp_path: Path, resources: dict[str, Any], **sections: Any) -> Path:
    path = tmp_path / "template.yaml"
    path.write_text(yaml.safe_dump({"Transform": TRANSFORMS, **sections, "Resources": resources}))
    return path


def test_a_loop_becomes_its_resources_with_their_map_values_and_logical_ids(tmp_path: Path) -> None:
    mappings = {"Queues": {"Work": {"Name": "work-dlq"}, "Audit": {"Name": "audit-dlq"}}}
    loop = [
        "Source",
        ["Work", "Audit"],
        {
            "${Source}Queue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "QueueName": {
                        "Fn::Sub": [
                            "${Name}-${Stage}",
                            {"Name": {"Fn::FindInMap": ["Queues", {"Ref": "Source"}, "Name"]}},
                        ]
                    }
                },
            },
            "${Source}Alarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {"Value": {"Fn::GetAtt": [{"Fn::Sub": "${Source}Queue"}, "QueueName"]}},
            },
        },
    ]
    path = _written(
        tmp_path, {"Fn::ForEach::Queues": loop, "Kept": {"Type": "AWS::SNS::Topic"}}, Mappings=mappings
    )

    template = load_template(path)

    assert template["Transform"] == [SERVERLESS_TRANSFORM]
    assert sorted(template["Resources"]) == ["AuditAlarm", "AuditQueue", "Kept", "WorkAlarm", "WorkQueue"]
    # the map's value is in; the parameter and the attribute are left for the deploy, as CloudFormation does
    assert template["Resources"]["AuditQueue"]["Properties"]["QueueName"] == {
        "Fn::Sub": ["${Name}-${Stage}", {"Name": "audit-dlq"}]
    }
    assert template["Resources"]["WorkAlarm"]["Properties"]["Value"] == {
        "Fn::GetAtt": ["WorkQueue", "QueueName"]
    }


def test_a_loop_over_a_parameter_is_refused_not_expanded_with_its_default(tmp_path: Path) -> None:
    loop = ["Name", {"Ref": "Names"}, {"${Name}Topic": {"Type": "AWS::SNS::Topic"}}]
    parameters = {"Names": {"Type": "CommaDelimitedList", "Default": "a,b"}}
    path = _written(tmp_path, {"Fn::ForEach::Topics": loop}, Parameters=parameters)
    with pytest.raises(TemplateError, match=r"Fn::ForEach::Topics.*literal list of strings"):
        load_template(path)


def test_a_loop_aws_sam_cli_leaves_in_properties_is_an_error(tmp_path: Path) -> None:
    # aws-sam-cli 1.170.0's ForEach processor expands loops that make resources, not those inside Properties
    tags = {"Fn::ForEach::Tags": ["Key", ["a", "b"], {"${Key}": "x"}]}
    path = _written(tmp_path, {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {"Tags": tags}}})
    with pytest.raises(TemplateError, match=r"Topic\.Properties\.Tags\.Fn::ForEach::Tags.*not expanded"):
        load_template(path)


def test_an_invalid_loop_is_aws_sam_clis_own_error(tmp_path: Path) -> None:
    loop = ["Name", ["A", "A"], {"Topic": {"Type": "AWS::SNS::Topic"}}]  # both items make the same id
    path = _written(tmp_path, {"Fn::ForEach::Topics": loop, "Topic": {"Type": "AWS::SNS::Topic"}})
    with pytest.raises(TemplateError, match="AWS::LanguageExtensions: "):
        load_template(path)


def test_the_transform_must_come_before_the_sam_transform(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text(yaml.safe_dump({"Transform": TRANSFORMS[::-1], "Resources": {}}))
    with pytest.raises(TemplateError, match="must come first"):
        load_template(path)


def test_without_the_sam_cli_environment_the_template_does_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SAM_PYTHON_VARIABLE, str(tmp_path / "no-such-python"))
    path = _written(
        tmp_path, {"Fn::ForEach::Topics": ["N", ["Only"], {"${N}Topic": {"Type": "AWS::SNS::Topic"}}]}
    )
    with pytest.raises(TemplateError, match="no-such-python"):
        load_template(path)


def test_a_template_still_declaring_the_transform_is_never_deployed_as_is() -> None:
    raw = {
        "Transform": TRANSFORMS,
        "Resources": {"Fn::ForEach::T": ["N", ["A"], {"${N}": {"Type": "AWS::SNS::Topic"}}]},
    }
    with pytest.raises(TemplateError, match="not expanded"):
        transform(raw, {}, region="us-east-1", account_id="123456789012", stack_name="s")


# --- the real template ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real() -> Iterator[Sandbox]:
    with Sandbox(DEFAULT_TEMPLATE, simulators=False, background=False, seed=1) as sandbox:
        yield sandbox


def test_the_stack_has_every_resource_the_templates_loops_make(real: Sandbox) -> None:
    raw = yaml.load(DEFAULT_TEMPLATE.read_text(), Loader=_IgnoringTags)
    loops = {key: value for key, value in raw["Resources"].items() if key.startswith("Fn::ForEach::")}
    assert loops, "template.yaml has no Fn::ForEach left: this test checks nothing"
    made = {
        name
        for identifier, collection, body in loops.values()
        for item in collection
        for name in (key.replace("${" + identifier + "}", item) for key in body)
    }
    assert not made - set(real.stack.resources), "a loop's resource was not deployed"
    # and what they are in moto: a log group per function, a queue and an alarm per dead-letter source
    groups = {g["logGroupName"] for g in real.client("logs").describe_log_groups()["logGroups"]}
    assert {real.stack.physical_id(name) for name in made if name.endswith("LogGroup")} <= groups
    alarms = real.client("cloudwatch").describe_alarms()["MetricAlarms"]
    by_name = {alarm["AlarmName"]: alarm for alarm in alarms}
    timed_out = by_name[real.stack.physical_id("ExecutionsTimedOutAlarm")]
    assert (
        timed_out["AlarmDescription"]
        == "Autopilot workflow executions TIMED_OUT (docs/operations.md, runbook)"
    )
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in timed_out["Metrics"] if "MetricStat" in m} == {
        "ExecutionsTimedOut"
    }
    outcome = by_name[real.stack.physical_id("OutcomeDeadLetterAlarm")]
    queue = real.stack.attribute("OutcomeDeadLetterQueue", "QueueName")
    assert queue.startswith("hyperpod-autopilot-outcome-dlq-")  # the loop's map value, in its Fn::Sub
    assert outcome["Dimensions"] == [{"Name": "QueueName", "Value": queue}]


class _IgnoringTags(yaml.SafeLoader):
    """The template as written (short-form tags read as plain values): its loops, unexpanded."""


_IgnoringTags.add_multi_constructor("!", lambda loader, suffix, node: None)
