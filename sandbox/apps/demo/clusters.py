"""What the demo's scenarios share about clusters: the workshop's config as a request body, names
unique within the run, the cluster create_cluster leaves for the others, and AWS observed as a user
would (topic inboxes, tags, budget subscribers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import ClientError

from sandbox.apps.demo.runner import DemoContext

ROOT: Final = Path(__file__).resolve().parents[3]
# The HyperPod workshop's Slurm files (the same ones the tests use): the request body IS the config.
WORKSHOP_CONFIGS: Final = ROOT / "tests" / "fixtures" / "configs" / "slurm"
OWNER: Final = "alice"
PROJECT: Final = "llm-pretraining"
BUDGET_USD: Final = 5000.0
ALERT_EMAIL: Final = "ml-platform@example.com"
# What Autopilot's budget alerts on: (NotificationType, Threshold %), all GREATER_THAN PERCENTAGE.
EXPECTED_NOTIFICATIONS: Final = {("ACTUAL", 50.0), ("ACTUAL", 80.0), ("ACTUAL", 100.0), ("FORECASTED", 100.0)}
SUCCEEDED_EVENT: Final = "Cluster Operation Succeeded"
FAILED_EVENT: Final = "Cluster Operation Failed"
# Wall seconds for an event to reach a subscriber (SNS and SQS deliveries are asynchronous; a busy
# machine delays them, a lost one never comes).
EVENT_TIMEOUT_S: Final = 30.0


def workshop_config(cluster_name: str, region: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """cluster-config.json renamed, and provisioning-parameters.json, as a researcher would send them
    to the stack in ``region`` (the API refuses an FSx file system of another region)."""
    config = json.loads((WORKSHOP_CONFIGS / "cluster-config.json").read_text(encoding="utf-8"))
    provisioning = json.loads((WORKSHOP_CONFIGS / "provisioning_parameters.json").read_text(encoding="utf-8"))
    fsx = provisioning["fsx_dns_name"]
    provisioning["fsx_dns_name"] = re.sub(r"\.fsx\.[a-z0-9-]+\.", f".fsx.{region}.", fsx)
    config["ClusterName"] = cluster_name
    # The request's owner/project become the cost tags; a config tag may repeat them, not contradict them.
    config["Tags"] = [t for t in config.get("Tags", []) if t.get("Key") not in ("owner", "project")]
    # Autopilot does the healing (HyperPod's own repair would leave Autopilot only observing it).
    config["NodeRecovery"] = "None"
    return config, provisioning


def create_body(
    cluster_name: str, region: str, *, budget: bool = True, rollback: bool = False
) -> dict[str, Any]:
    config, provisioning = workshop_config(cluster_name, region)
    body: dict[str, Any] = {
        "clusterConfig": config,
        "provisioningParameters": provisioning,
        "owner": OWNER,
        "project": PROJECT,
        "rollbackOnFailure": rollback,
    }
    if budget:
        body["budget"] = {"monthlyLimitUsd": BUDGET_USD, "alertEmails": [ALERT_EMAIL]}
    return body


def unique_name(ctx: DemoContext, prefix: str) -> str:
    """Cluster names unique within the run (a scenario may run after another that used the name)."""
    counter: int = ctx.shared.get("names", 0) + 1
    ctx.shared["names"] = counter
    return f"{prefix}-{counter}"


def error_paths(errors: list[dict[str, Any]]) -> set[str]:
    return {str(e.get("path")) for e in errors}


def accepted(result: Mapping[str, Any]) -> str:
    return f"202 {result['operationId']} {result['status']}"


# --------------------------------------------------------------------------------------------------
# observing AWS
# --------------------------------------------------------------------------------------------------
class TopicInbox:
    """An SQS queue subscribed to one of the stack's topics, as a downstream system would follow it."""

    OUTPUT = ""  # the stack output naming the topic
    QUEUE = ""

    def __init__(self, ctx: DemoContext) -> None:
        self._sqs = ctx.aws("sqs")
        topic = ctx.env.stack_output(self.OUTPUT)
        self._url: str = self._sqs.create_queue(QueueName=self.QUEUE)["QueueUrl"]
        arn = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        ctx.aws("sns").subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
        )
        self.events: list[dict[str, Any]] = []

    @classmethod
    def of[I: TopicInbox](cls: type[I], ctx: DemoContext) -> I:
        """The run's one inbox of this kind (subscribed on first use: it sees what came after)."""
        inbox = ctx.shared.get(cls.QUEUE)
        if not isinstance(inbox, cls):
            inbox = cls(ctx)
            ctx.shared[cls.QUEUE] = inbox
        return inbox

    def drain(self) -> list[dict[str, Any]]:
        """Every message received so far (JSON bodies; a plain-text alert as ``{"text": …}``)."""
        self._drain()
        return self.events

    def find(self, detail_type: str, operation_id: str) -> dict[str, Any] | None:
        """The operation event of that detail-type for ``operation_id`` received so far, if any."""
        self._drain()
        for event in self.events:
            if (
                event.get("detail-type") == detail_type
                and event.get("detail", {}).get("operationId") == operation_id
            ):
                return event
        return None

    def _drain(self) -> None:
        while True:
            messages = self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not messages:
                return
            for message in messages:
                try:
                    body = json.loads(message["Body"])
                except ValueError:
                    body = None
                self.events.append(body if isinstance(body, dict) else {"text": message["Body"]})
                self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])


class NotificationsInbox(TopicInbox):
    """The NotificationsTopic: every ``hyperpod.autopilot`` event (results, repairs, sessions)."""

    OUTPUT = "NotificationsTopicArn"
    QUEUE = "demo-notifications-inbox"


class AlertsInbox(TopicInbox):
    """The AlertsTopic: what pages a person (failures, the breaker, refused sessions, budgets)."""

    OUTPUT = "AlertsTopicArn"
    QUEUE = "demo-alerts-inbox"


def aws_error_code(ctx: DemoContext, action: Any) -> str | None:
    """Run an AWS call; its error code, or None when it succeeded."""
    try:
        action()
    except ClientError as error:
        return str(error.response.get("Error", {}).get("Code"))
    return None


def tagged_with_cluster(ctx: DemoContext, cluster_name: str) -> list[str]:
    tagging = ctx.aws("resourcegroupstaggingapi")
    arns: list[str] = []
    for page in tagging.get_paginator("get_resources").paginate(
        TagFilters=[{"Key": "ClusterName", "Values": [cluster_name]}]
    ):
        arns += [item["ResourceARN"] for item in page["ResourceTagMappingList"]]
    return arns


def budget_subscribers(
    budgets: Any, account: str, budget_name: str, notification: Mapping[str, Any]
) -> set[tuple[str, str]]:
    """(SubscriptionType, Address) of everyone a budget notification alerts (all pages)."""
    found: set[tuple[str, str]] = set()
    for page in budgets.get_paginator("describe_subscribers_for_notification").paginate(
        AccountId=account, BudgetName=budget_name, Notification=dict(notification)
    ):
        found |= {(s["SubscriptionType"], s["Address"]) for s in page["Subscribers"]}
    return found


def create_cluster_and_wait(
    ctx: DemoContext, name: str, *, idempotency_key: str | None = None
) -> dict[str, Any]:
    """POST /clusters with the workshop config and follow the operation to its end; the cluster is
    left for cleanup_leaves_nothing."""
    NotificationsInbox.of(ctx)  # subscribed before anything happens to the cluster
    AlertsInbox.of(ctx)
    ctx.shared.setdefault("clusters", []).append(name)
    result = ctx.call(
        f"POST /clusters ({name})",
        lambda: ctx.api.create_cluster(create_body(name, ctx.api.region), idempotency_key=idempotency_key),
        accepted,
    )
    return ctx.wait_for_operation(result["operationId"])


def shared_cluster(ctx: DemoContext) -> str:
    """The cluster create_cluster left running, or (a scenario run alone) one created now."""
    name = ctx.shared.get("cluster")
    if isinstance(name, str):
        return name
    name = unique_name(ctx, "demo-llm")
    ctx.info(f"no cluster left by create_cluster: creating {name} first")
    created = create_cluster_and_wait(ctx, name)
    ctx.check(created["status"] == "SUCCEEDED", f"{name} created", json.dumps(created.get("error")))
    ctx.shared["cluster"] = name
    return name


def budget_notifications_topic(ctx: DemoContext) -> str:
    """The stack's topic AWS Budgets notifies (found as an operator would: ListTopics)."""
    for page in ctx.aws("sns").get_paginator("list_topics").paginate():
        for topic in page["Topics"]:
            if "budget-notifications" in topic["TopicArn"]:
                return str(topic["TopicArn"])
    ctx.fail("no budget notifications topic in the account")
    raise AssertionError("unreachable")
