"""Cost tags that stay true, end to end in the sandbox, driven only by simulated AWS activity.

A cluster is created through the API with its lifecycle bucket and security group in the account;
someone then removes and changes cost tags by hand with boto3; the sandbox clock moves past
CostTagScheduleExpression and the deployed CostTaggerFunction, fired by its schedule, puts them back,
records what it changed (the cluster's TAGS item) and announces it (``Cost Tags Repaired``, seen by
an audit rule on the default bus). The clock is frozen and stepped by hand.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from autopilot.dal.cost_tags import TagRepairRecords
from autopilot_cli.client import AutopilotClient

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.emulator.bus import let_rule_send_to_queue
from sandbox.harness.core import Sandbox
from tests.e2e.waiting import wait_for

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
CLUSTER = "e2e-tags"
SCHEDULE = "CostTaggerFunctionCostTagSchedule"
SCHEDULE_SECONDS = 3600  # the template's default CostTagScheduleExpression, rate(1 hour)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=DEMO_PARAMETERS, speed=0) as running:
        yield running


def tags_of(tag_list: list[dict[str, str]]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tag_list}


def test_a_tag_removed_by_hand_is_put_back_by_the_schedule_and_recorded(
    sandbox: Sandbox, api: AutopilotClient, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    s3, ec2, sagemaker = sandbox.client("s3"), sandbox.client("ec2"), sandbox.client("sagemaker")
    # the account: the lifecycle bucket (another team's tag on it) and the cluster's security group
    body = workshop_request(CLUSTER, costCenter="cc-42")
    bucket = body["clusterConfig"]["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"].split("/")[2]
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "team", "Value": "platform"}]})
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="efa", Description="EFA", VpcId=vpc)["GroupId"]
    body["clusterConfig"]["VpcConfig"] = {"SecurityGroupIds": [group], "Subnets": [subnet]}
    audit = _audit_queue(sandbox)

    accepted = api.create_cluster(body)
    created = wait_for(lambda: _finished(api, accepted["operationId"]), what="the create", advance=sandbox)

    assert created["status"] == "SUCCEEDED", created.get("error")
    assert created.get("warnings") in (None, [])
    wanted = {"ClusterName": CLUSTER, "owner": "alice", "project": body["project"], "cost-center": "cc-42"}
    cluster_arn = sagemaker.describe_cluster(ClusterName=CLUSTER)["ClusterArn"]
    assert wanted.items() <= tags_of(sagemaker.list_tags(ResourceArn=cluster_arn)["Tags"]).items()
    assert tags_of(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == {"team": "platform", **wanted}
    [sg] = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert tags_of(sg["Tags"]) == wanted

    # by hand: the owner tag removed from the cluster, the bucket's project tag removed (a tag CHANGED to
    # another value is another owner's word and left alone: test_another_teams_security_group_keeps_...)
    sagemaker.delete_tags(ResourceArn=cluster_arn, TagKeys=["owner"])
    changed = {"team": "platform", **{k: v for k, v in wanted.items() if k != "project"}}
    s3.put_bucket_tagging(
        Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in changed.items()]}
    )
    repairs = TagRepairRecords(sandbox.stack.physical_id("StateTable"), dynamodb=sandbox.client("dynamodb"))
    assert repairs.get(CLUSTER) is None
    runs = _scheduled_runs(sandbox)

    sandbox.advance(SCHEDULE_SECONDS)  # past the schedule: the sweep runs
    wait_for(lambda: _scheduled_runs(sandbox) > runs or None, what="a scheduled CostTaggerFunction run")
    record = wait_for(lambda: repairs.get(CLUSTER), what="the cluster's TAGS item")

    assert tags_of(sagemaker.list_tags(ResourceArn=cluster_arn)["Tags"])["owner"] == "alice"
    assert tags_of(s3.get_bucket_tagging(Bucket=bucket)["TagSet"]) == {"team": "platform", **wanted}
    assert record.repairs == 1
    assert record.changes == [
        {"resource": cluster_arn, "kind": "cluster", "set": {"owner": "alice"}, "previous": {}},
        {
            "resource": f"arn:aws:s3:::{bucket}",
            "kind": "s3-bucket",
            "set": {"project": body["project"]},
            "previous": {},
        },
    ]
    event = wait_for(lambda: _first_message(sandbox, audit), what="the Cost Tags Repaired event")
    assert event["source"] == "hyperpod.autopilot"
    assert event["detail"] == {"clusterName": CLUSTER, "changes": record.changes}
    # the function's role allowed every call it made
    assert [d for d in sandbox.metrics()["iam_denials"] if "CostTaggerFunctionRole" in d["principal"]] == []


def _finished(api: AutopilotClient, operation_id: str) -> dict[str, Any] | None:
    operation = api.get_operation(operation_id)
    return None if operation["status"] == "RUNNING" else operation


def _scheduled_runs(sandbox: Sandbox) -> int:
    return int(sandbox.metrics()["scheduled_events"].get(SCHEDULE, 0))


def _audit_queue(sandbox: Sandbox) -> str:
    """An audit rule on the default bus: every Cost Tags Repaired event to a queue the test reads."""
    sqs, events = sandbox.client("sqs"), sandbox.client("events")
    url = sqs.create_queue(QueueName="cost-tag-audit")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule_arn = events.put_rule(
        Name="cost-tag-audit",
        EventPattern=json.dumps({"source": ["hyperpod.autopilot"], "detail-type": ["Cost Tags Repaired"]}),
    )["RuleArn"]
    let_rule_send_to_queue(sqs, url, arn, rule_arn)
    events.put_targets(Rule="cost-tag-audit", Targets=[{"Id": "audit", "Arn": arn}])
    return str(url)


def _first_message(sandbox: Sandbox, url: str) -> dict[str, Any] | None:
    messages = sandbox.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", [])
    return json.loads(messages[0]["Body"]) if messages else None
