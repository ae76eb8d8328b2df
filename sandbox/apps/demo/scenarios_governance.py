"""Governance scenarios: session limits, cost tags that stay true, budget alerts.

Driven by what users and AWS do, not by Autopilot's API: researchers (IAM users with their own keys)
start SSM sessions with boto3, someone edits a cluster's tags by hand, the fleet's spend accrues on
the sandbox clock and AWS Budgets notifies. The demo watches what an operator would: Session
Manager, the cluster's tags, the topics, an audit rule on the bus, GET /clusters/{name}/cost.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any, Final

import boto3

from sandbox.apps.demo.clusters import (
    EVENT_TIMEOUT_S,
    OWNER,
    PROJECT,
    AlertsInbox,
    NotificationsInbox,
    shared_cluster,
    unique_name,
)
from sandbox.apps.demo.runner import DemoContext, scenario

MAX_SESSIONS: Final = 2  # the template's MaxSessionsPerUser
SESSIONS_STARTED: Final = 4
# The drift sweep runs every CostTagScheduleExpression (1 simulated hour: 3 s at x1200).
TAG_REPAIR_TIMEOUT_S: Final = 60.0
HOUR: Final = 3600.0
# AWS Budgets refreshes every 8 simulated hours; the shared cluster burns ~$397/h against $5,000, so
# 50 % is crossed within a day of spend. The clock is stepped an hour at a time until the alert comes.
MAX_BUDGET_HOURS: Final = 48
BUDGET_ALERT: Final = "BudgetThresholdCrossed"
DELIVERY_PAUSE_S: Final = 0.2
HOUR_DELIVERY_S: Final = 1.0


# --------------------------------------------------------------------------------------------------
# session_limits
# --------------------------------------------------------------------------------------------------
def researcher(ctx: DemoContext, name: str, tags: dict[str, str]) -> tuple[Any, str]:
    """An IAM user (tagged as given) and an SSM client signed with the user's own keys."""
    iam = ctx.aws("iam")
    arn = iam.create_user(UserName=name, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])["User"][
        "Arn"
    ]
    key = iam.create_access_key(UserName=name)["AccessKey"]
    client = boto3.client(
        "ssm",
        region_name=ctx.api.region,
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    return client, str(arn)


def session_targets(ctx: DemoContext, cluster: str) -> list[str]:
    """``sagemaker-cluster:<cluster id>_<group>-<instance id>``: how a user names a node to SSM."""
    sagemaker = ctx.aws("sagemaker")
    cluster_id = sagemaker.describe_cluster(ClusterName=cluster)["ClusterArn"].rsplit("/", 1)[-1]
    nodes = sagemaker.list_cluster_nodes(ClusterName=cluster)["ClusterNodeSummaries"]
    return [
        f"sagemaker-cluster:{cluster_id}_{n['InstanceGroupName']}-{n['InstanceId']}"
        for n in nodes
        if n["InstanceStatus"]["Status"] == "Running"
    ]


def live_sessions(ssm: Any, owner: str) -> list[str]:
    """The owner's Active sessions not being terminated, oldest first (DescribeSessions)."""
    sessions = ssm.describe_sessions(State="Active", Filters=[{"key": "Owner", "value": owner}])["Sessions"]
    live = sorted((s for s in sessions if s["Status"] != "Terminating"), key=lambda s: s["StartDate"])
    return [str(s["SessionId"]) for s in live]


def terminated_events(inbox: NotificationsInbox, principal: str) -> list[dict[str, Any]]:
    return [
        e
        for e in inbox.drain()
        if e.get("detail-type") == "Session Terminated" and e.get("detail", {}).get("principal") == principal
    ]


@scenario(
    "session_limits",
    f"4 SSM sessions against a limit of {MAX_SESSIONS} -> the newest terminated; no Run-As user -> refused",
)
def session_limits(ctx: DemoContext) -> None:
    cluster = shared_cluster(ctx)
    notifications, alerts = NotificationsInbox.of(ctx), AlertsInbox.of(ctx)
    targets = session_targets(ctx, cluster)
    alice_name, mallory_name = unique_name(ctx, "demo-alice"), unique_name(ctx, "demo-mallory")
    ssm, alice = researcher(ctx, alice_name, {"SSMSessionRunAs": "alice"})
    started = []
    for n in range(SESSIONS_STARTED):
        started.append(str(ssm.start_session(Target=targets[n % len(targets)])["SessionId"]))
        ctx.log("API", f"ssm:StartSession as {alice_name} -> {started[-1]}")
    events = ctx.wait_until(
        f"{SESSIONS_STARTED - MAX_SESSIONS} 'Session Terminated' events for {alice_name}",
        lambda: found if len(found := terminated_events(notifications, alice)) >= 2 else None,
        timeout_s=EVENT_TIMEOUT_S,
    )
    for event in events:
        detail = event["detail"]
        ctx.info(f"  Session Terminated {detail['sessionId']}: {detail['reason']} ({detail.get('trigger')})")
    ctx.check(
        sorted(e["detail"]["sessionId"] for e in events) == sorted(started[MAX_SESSIONS:])
        and {e["detail"]["reason"] for e in events} == {"over-limit"},
        f"the {SESSIONS_STARTED - MAX_SESSIONS} newest sessions terminated as over-limit",
        json.dumps([e["detail"] for e in events])[:300],
    )
    kept = ctx.wait_until(
        "Session Manager to end the terminated sessions",
        lambda: live if (live := live_sessions(ssm, alice)) == started[:MAX_SESSIONS] else None,
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(kept == started[:MAX_SESSIONS], f"DescribeSessions: {alice_name} keeps the {len(kept)} oldest")

    ssm_mallory, mallory = researcher(ctx, mallory_name, {})  # no SSMSessionRunAs tag
    refused = str(ssm_mallory.start_session(Target=targets[0])["SessionId"])
    ctx.log("API", f"ssm:StartSession as {mallory_name} (no Run-As user) -> {refused}")
    [event] = ctx.wait_until(
        f"a 'Session Terminated' event for {mallory_name}",
        lambda: terminated_events(notifications, mallory) or None,
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(
        event["detail"]["sessionId"] == refused and event["detail"]["reason"] == "run-as-missing",
        f"{mallory_name}'s session terminated: run-as-missing",
        json.dumps(event["detail"])[:300],
    )
    alert = ctx.wait_until(
        f"an alert about {mallory_name}",
        lambda: next((a for a in alerts.drain() if mallory in json.dumps(a)), None),
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(refused in json.dumps(alert), "an alert names the refused session", json.dumps(alert)[:300])
    ctx.check(
        not [a for a in alerts.drain() if alice in json.dumps(a)],
        f"no alert about {alice_name} (a limit is routine)",
    )
    ctx.details.update(cluster=cluster, started=started, kept=kept, refused=refused)
    ctx.summary = (
        f"{alice_name}: {SESSIONS_STARTED} sessions -> {MAX_SESSIONS} kept; "
        f"{mallory_name} (no Run-As) refused with an alert"
    )


# --------------------------------------------------------------------------------------------------
# cost_tags_drift_repaired
# --------------------------------------------------------------------------------------------------
def cluster_tags(ctx: DemoContext, cluster_arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in ctx.aws("sagemaker").list_tags(ResourceArn=cluster_arn)["Tags"]}


@scenario(
    "cost_tags_drift_repaired",
    "cost tags removed/changed by hand -> the drift sweep puts them back and says so (Cost Tags Repaired)",
)
def cost_tags_drift_repaired(ctx: DemoContext) -> None:
    cluster = shared_cluster(ctx)
    inbox = NotificationsInbox.of(ctx)
    sagemaker = ctx.aws("sagemaker")
    cluster_arn = str(sagemaker.describe_cluster(ClusterName=cluster)["ClusterArn"])
    wanted = {"ClusterName": cluster, "owner": OWNER, "project": PROJECT}
    before = cluster_tags(ctx, cluster_arn)
    ctx.check(wanted.items() <= before.items(), "the cluster carries its cost tags", str(before))

    sagemaker.delete_tags(ResourceArn=cluster_arn, TagKeys=["owner"])
    ctx.log("API", f"sagemaker:DeleteTags {cluster} owner (by hand)")
    sagemaker.add_tags(ResourceArn=cluster_arn, Tags=[{"Key": "project", "Value": "someone-else"}])
    ctx.log("API", f"sagemaker:AddTags {cluster} project=someone-else (by hand)")

    def repaired_event() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in inbox.drain()
                if e.get("detail-type") == "Cost Tags Repaired" and e["detail"].get("clusterName") == cluster
            ),
            None,
        )

    event = ctx.wait_until("a 'Cost Tags Repaired' event", repaired_event, timeout_s=TAG_REPAIR_TIMEOUT_S)
    changes = [c for c in event["detail"].get("changes", []) if c.get("resource") == cluster_arn]
    for change in changes:
        ctx.info(f"  {change['kind']}: set {change['set']} (was {change['previous']})")
    ctx.check(
        [(c["set"], c["previous"]) for c in changes]
        == [({"owner": OWNER, "project": PROJECT}, {"project": "someone-else"})],
        "the event names what was put back and what it replaced",
        json.dumps(event["detail"])[:300],
    )
    after = cluster_tags(ctx, cluster_arn)
    ctx.check(wanted.items() <= after.items(), "ListTags: owner and project are back", str(after))
    ctx.details.update(cluster=cluster, changes=changes)
    ctx.summary = f"owner removed, project changed on {cluster} -> both put back by the schedule"


# --------------------------------------------------------------------------------------------------
# budget_alert
# --------------------------------------------------------------------------------------------------
@scenario(
    "budget_alert",
    "the fleet's spend crosses 50 % of the budget -> one alert with the figures (Budgets notified twice)",
)
def budget_alert(ctx: DemoContext) -> None:
    cluster = shared_cluster(ctx)
    alerts = AlertsInbox.of(ctx)  # subscribed when the cluster was created: it saw every crossing
    view = ctx.api.get_cluster(cluster)
    budget_name = str(view.get("budgetName"))

    def crossings() -> list[dict[str, Any]]:
        return [
            a
            for a in alerts.drain()
            if a.get("kind", BUDGET_ALERT) == BUDGET_ALERT
            and a.get("budgetName") == budget_name
            and a.get("alertType") == "ACTUAL"
        ]

    hours = 0
    while not crossings():
        if hours >= MAX_BUDGET_HOURS:
            ctx.fail(f"no ACTUAL alert for {budget_name} in {MAX_BUDGET_HOURS} simulated hours")
        ctx.env.advance_clock(HOUR)
        hours += 1
        # The hour's Budgets refresh reaches the alerts topic through SNS and BudgetAlertsFunction:
        # give it a moment before the next step, so the clock does not run far past the crossing.
        deadline = time.monotonic() + HOUR_DELIVERY_S
        while not crossings() and time.monotonic() < deadline:
            time.sleep(DELIVERY_PAUSE_S)
    if hours:
        ctx.info(f"  the sandbox clock stepped {hours} h ahead for the spend to accrue")
    # Budgets notifies every crossing twice: a moment more, so a second alert would show.
    time.sleep(DELIVERY_PAUSE_S * 5)
    seen = crossings()
    for alert in seen:
        ctx.info(
            f"  alert: {alert['thresholdPercent']} % of ${alert['budgetUsd']} crossed, "
            f"actual ${alert['actualUsd']}, forecast ${alert['forecastUsd']}"
        )
    thresholds = [a["thresholdPercent"] for a in seen]
    ctx.check(
        len(thresholds) == len(set(thresholds)),
        "one alert per threshold crossed (Budgets notified each twice)",
        str(thresholds),
    )
    first = seen[0]
    ctx.check(
        (first.get("clusterName"), first.get("owner"), first.get("project")) == (cluster, OWNER, PROJECT),
        "the alert names the cluster, its owner and project",
        json.dumps(first)[:300],
    )
    ctx.check(
        Decimal(str(first["actualUsd"])) > Decimal(str(first["thresholdUsd"])),
        f"actual spend ${first['actualUsd']} is past the threshold ${first['thresholdUsd']}",
    )
    cost = ctx.call(
        f"GET /clusters/{cluster}/cost",
        lambda: ctx.api.get_cost(cluster),
        lambda c: f"200 ${c['hourlyRateUsd']}/h, month to date ${c['monthToDateUsd']}",
    )
    ctx.check(
        Decimal(str(cost["hourlyRateUsd"] or 0)) > 0 and Decimal(str(cost["monthToDateUsd"] or 0)) > 0,
        "the spend meter prices the running nodes (GET /clusters/{name}/cost)",
        json.dumps(cost),
    )
    ctx.details.update(cluster=cluster, budget=budget_name, alerts=seen, cost=cost, hoursStepped=hours)
    ctx.summary = (
        f"{', '.join(t + ' %' for t in thresholds)} of ${first['budgetUsd']} crossed -> "
        f"{len(seen)} alert(s); ${cost['hourlyRateUsd']}/h"
    )
