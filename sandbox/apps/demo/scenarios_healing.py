"""Self-healing scenarios: a failed node replaced, duplicated events ignored, the breaker.

The only thing the demo does to a node is what HyperPod's health agent does: the simulator's
``node_unhealthy`` fault marks it Unhealthy and HyperPod sends its Node Health event (in the demo,
EventBridge delivers every HyperPod event twice). Autopilot does the rest on its own; the demo
watches the API (nodes, operations, healing), SageMaker, an audit rule on the bus and the topics.
"""

from __future__ import annotations

import json
from typing import Any, Final

from sandbox.apps.demo.clusters import (
    EVENT_TIMEOUT_S,
    AlertsInbox,
    NotificationsInbox,
    create_cluster_and_wait,
    shared_cluster,
    unique_name,
)
from sandbox.apps.demo.runner import DemoContext, scenario
from sandbox.emulator.bus import let_rule_send_to_queue

WORKERS: Final = "worker-group-1"
FAULT_TYPE: Final = "NvidiaErrorTerminate"  # HMA: a GPU fault whose remedy is a replace
NODE_HEALTH: Final = "SageMaker HyperPod Cluster Node Health Event"
REPAIR_TIMEOUT_S: Final = 90.0


def healthy_workers(ctx: DemoContext, cluster: str) -> list[str]:
    """The worker group's Running, healthy nodes without a repair, as GET /clusters/{name}/nodes says."""
    return sorted(
        str(n["InstanceId"])
        for n in ctx.api.list_nodes(cluster)
        if n["InstanceGroupName"] == WORKERS
        and n["InstanceStatus"]["Status"] == "Running"
        and (n.get("health") or {}).get("status", "Healthy") == "Healthy"
        and not n.get("repair")
    )


def repairs_of(ctx: DemoContext, cluster: str, node_id: str) -> list[dict[str, Any]]:
    """The node's ReplaceNode operations (GET /clusters/{name}/operations?kind=ReplaceNode)."""
    return [o for o in ctx.api.list_operations(cluster, kind="ReplaceNode") if o.get("nodeId") == node_id]


def follow_repair(ctx: DemoContext, cluster: str, node_id: str) -> dict[str, Any]:
    """Wait for the node's repair to be recorded, then follow it to its end on the timeline."""
    found = ctx.wait_until(
        f"a ReplaceNode operation for {node_id}",
        lambda: next(iter(repairs_of(ctx, cluster, node_id)), None),
        timeout_s=REPAIR_TIMEOUT_S,
    )
    ctx.info(f"  Autopilot started {found['operationId']} ({found.get('trigger')}) for {node_id}")
    return ctx.wait_for_operation(str(found["operationId"]), timeout_s=REPAIR_TIMEOUT_S)


def calls(ctx: DemoContext, operation: str) -> int:
    """The control plane's calls of ``sagemaker:<operation>`` so far."""
    return ctx.env.metrics().aws_calls.get(f"sagemaker:{operation}", 0)


class HealthAudit:
    """An audit rule on the default bus: every Node Health event of one node, to a queue."""

    def __init__(self, ctx: DemoContext, node_id: str) -> None:
        self._sqs = ctx.aws("sqs")
        name = f"demo-health-audit-{node_id}"
        self._url: str = self._sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        events = ctx.aws("events")
        pattern = {
            "source": ["aws.sagemaker"],
            "detail-type": [NODE_HEALTH],
            "detail": {"InstanceId": [node_id]},
        }
        rule_arn = events.put_rule(Name=name, EventPattern=json.dumps(pattern))["RuleArn"]
        let_rule_send_to_queue(self._sqs, self._url, arn, rule_arn)
        events.put_targets(Rule=name, Targets=[{"Id": "audit", "Arn": arn}])
        self.seen: list[dict[str, Any]] = []

    def unhealthy(self) -> list[dict[str, Any]]:
        while messages := self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in messages:
                self.seen.append(json.loads(message["Body"]))
                self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
        return [e for e in self.seen if e["detail"]["HealthSummary"]["HealthStatus"] == "Unhealthy"]


def check_replaced(ctx: DemoContext, cluster: str, node_id: str, repair: dict[str, Any]) -> str:
    """The repair replaced the node: its successor runs in the group, the old instance is gone."""
    ctx.check(repair["status"] == "SUCCEEDED", "the repair SUCCEEDED", json.dumps(repair.get("error")))
    ctx.check(
        (repair.get("trigger"), repair.get("actor")) == ("event", "autopilot"),
        "started by the Node Health event, by Autopilot (nobody called the API)",
        f"trigger={repair.get('trigger')}, actor={repair.get('actor')}",
    )
    actions = [(a.get("action"), a.get("result")) for a in repair.get("actions") or []]
    ctx.check(
        bool(actions) and actions[-1] == ("replace", "succeeded"),
        "the policy chose a replace for the GPU fault, and it succeeded",
        str(actions),
    )
    successor = str(repair.get("successorNodeId") or "")
    nodes = {str(n["InstanceId"]): n for n in ctx.api.list_nodes(cluster)}
    ctx.check(
        successor in nodes and nodes[successor]["InstanceStatus"]["Status"] == "Running",
        f"GET /clusters/{cluster}/nodes: successor {successor} Running",
        str(nodes.get(successor)),
    )
    ctx.check(node_id not in nodes, f"{node_id} is no longer in the cluster", str(sorted(nodes)))
    return successor


@scenario(
    "node_failure_replace",
    "a worker's GPU fails (Node Health event) -> Autopilot replaces it on its own; successor Running",
)
def node_failure_replace(ctx: DemoContext) -> None:
    cluster = shared_cluster(ctx)
    inbox = NotificationsInbox.of(ctx)
    node_id = healthy_workers(ctx, cluster)[0]
    ctx.fault("node_unhealthy", cluster=cluster, node_id=node_id, fault_type=FAULT_TYPE)
    repair = follow_repair(ctx, cluster, node_id)
    fault = repair.get("fault") or {}
    ctx.check(
        fault.get("faultType") == FAULT_TYPE,
        f"the operation records the fault ({FAULT_TYPE})",
        json.dumps(fault),
    )
    successor = check_replaced(ctx, cluster, node_id, repair)
    operation_id = str(repair["operationId"])
    event = ctx.wait_until(
        f"a 'Node Repaired' event for {operation_id}",
        lambda: inbox.find("Node Repaired", operation_id),
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(
        event["detail"].get("successorNodeId") == successor,
        "'Node Repaired' event on the notifications topic, naming the successor",
        json.dumps(event["detail"])[:300],
    )
    ctx.details.update(cluster=cluster, node=node_id, successor=successor, operationId=operation_id)
    ctx.summary = f"{node_id} ({FAULT_TYPE}) replaced by {successor}, no API call"


@scenario(
    "duplicate_events_ignored",
    "the Node Health event delivered twice -> one repair, one BatchReplaceClusterNodes call",
)
def duplicate_events_ignored(ctx: DemoContext) -> None:
    cluster = shared_cluster(ctx)
    node_id = healthy_workers(ctx, cluster)[0]
    audit = HealthAudit(ctx, node_id)
    replaced_before = calls(ctx, "BatchReplaceClusterNodes")
    ctx.fault("node_unhealthy", cluster=cluster, node_id=node_id, fault_type=FAULT_TYPE)
    repair = follow_repair(ctx, cluster, node_id)
    check_replaced(ctx, cluster, node_id, repair)
    copies = ctx.wait_until(
        "the Unhealthy event's second delivery",
        lambda: found if len(found := audit.unhealthy()) >= 2 else None,
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(
        len(copies) == 2,
        "EventBridge delivered the Unhealthy event twice (an audit rule on the bus saw both)",
        f"{len(copies)} copies",
    )
    repairs = repairs_of(ctx, cluster, node_id)
    ctx.check(len(repairs) == 1, f"one ReplaceNode operation for {node_id}", f"{len(repairs)}")
    replaced = calls(ctx, "BatchReplaceClusterNodes") - replaced_before
    ctx.check(replaced == 1, "one BatchReplaceClusterNodes call", f"{replaced} calls")
    ctx.details.update(cluster=cluster, node=node_id, deliveries=len(copies), repairs=len(repairs))
    ctx.summary = f"{len(copies)} deliveries of {node_id}'s event -> 1 repair, 1 replace call"


@scenario(
    "healing_breaker_trips",
    "2 of 6 nodes fail within 10 min -> repairs paused with one alert; resume -> the held node repaired",
)
def healing_breaker_trips(ctx: DemoContext) -> None:
    alerts = AlertsInbox.of(ctx)
    # Its own cluster: the breaker pauses repairs on it, and the others' scenarios repair on theirs.
    cluster = unique_name(ctx, "demo-breaker")
    created = create_cluster_and_wait(ctx, cluster)
    ctx.check(created["status"] == "SUCCEEDED", f"{cluster} created", json.dumps(created.get("error")))
    first, second = healthy_workers(ctx, cluster)[:2]
    replaced_before = calls(ctx, "BatchReplaceClusterNodes")

    # 2 of the cluster's 6 nodes within BreakerWindowMinutes: more than MaxUnhealthyPercent (20 %).
    for node_id in (first, second):
        ctx.fault("node_unhealthy", cluster=cluster, node_id=node_id, fault_type=FAULT_TYPE)

    def paused_alerts() -> list[dict[str, Any]]:
        return [
            a for a in alerts.drain() if a.get("clusterName") == cluster and a.get("pausedBy") == "breaker"
        ]

    [alert] = ctx.wait_until(
        "the breaker's alert", lambda: paused_alerts() or None, timeout_s=EVENT_TIMEOUT_S
    )
    ctx.info(f"  alert: {alert.get('reason') or alert}")
    ctx.check(
        sorted(alert.get("unhealthyNodes") or []) == sorted([first, second]) and alert.get("nodeCount") == 6,
        "one alert on the alerts topic naming both nodes of 6",
        json.dumps(alert)[:300],
    )
    healing = ctx.call(
        f"GET /clusters/{cluster}/healing",
        lambda: ctx.api.get_healing(cluster),
        lambda h: f"200 paused={str(h['paused']).lower()} by {h.get('pausedBy')}",
    )
    ctx.check(
        healing["paused"] is True and healing.get("pausedBy") == "breaker",
        "repairs are paused by the breaker",
        json.dumps(healing)[:300],
    )
    # The fault processed first started a repair; the one that tripped the breaker started nothing.
    # That repair replaces its node at once when it leased its slot before the trip; else it waits for
    # its slot while repairs are paused (a storm's backlog is not failed): which one depends on timing.
    first_ops = {n: [str(o["operationId"]) for o in repairs_of(ctx, cluster, n)] for n in (first, second)}
    started = [n for n, ops in first_ops.items() if ops]
    ctx.check(
        len(started) == 1 and len(first_ops[started[0]]) == 1,
        "one repair started before the trip; the node that tripped the breaker started none",
        json.dumps(first_ops),
    )
    ctx.check(
        calls(ctx, "BatchReplaceClusterNodes") - replaced_before <= 1,
        "no replace call beyond the repair that may have held its slot before the trip",
    )
    ctx.check(len(paused_alerts()) == 1, "still one alert (every event came twice)")
    tripped = second if started[0] == first else first
    ctx.info(f"  {tripped} waits for a person: its report is kept while repairs are paused")

    resumed = ctx.call(
        f"PUT /clusters/{cluster}/healing (resume)",
        lambda: ctx.api.set_healing(cluster, paused=False),
        lambda h: f"200 paused={str(h['paused']).lower()}",
    )
    ctx.check(resumed["paused"] is False, "an operator resumes repairs", json.dumps(resumed)[:300])
    outcome = follow_repair(ctx, cluster, started[0])
    ctx.check(
        outcome["status"] == "SUCCEEDED" and outcome.get("trigger") == "event",
        f"{started[0]} is repaired by the repair its event started",
        f"{outcome['status']}, trigger={outcome.get('trigger')}, error={outcome.get('error')}",
    )
    repair = follow_repair(ctx, cluster, tripped)
    ctx.check(
        repair["status"] == "SUCCEEDED" and repair.get("trigger") == "sweep",
        f"{tripped} is repaired by the sweep the resume ran",
        f"{repair['status']}, trigger={repair.get('trigger')}, error={repair.get('error')}",
    )
    ctx.check(
        calls(ctx, "BatchReplaceClusterNodes") - replaced_before == 2,
        "2 BatchReplaceClusterNodes calls since the faults: one per node",
    )
    held = [started[0], tripped]
    ctx.details.update(cluster=cluster, unhealthy=[first, second], held=held, alert=alert)
    ctx.summary = f"breaker paused {cluster} (2/6 unhealthy), 1 alert; resumed: {', '.join(held)} repaired"
