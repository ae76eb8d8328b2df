"""``--output table``: what each result looks like to a person (the API's documents, unchanged, in
json and text)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from autopilot_cli.output import cell, print_fields, print_table
from autopilot_cli.progress import elapsed


def step_lines(operation: dict[str, Any]) -> list[str]:
    """One line per step with how long it took (the last one: until the operation's last update)."""
    steps = operation.get("steps") or []
    end = operation.get("updatedAt") or ""
    lines = []
    for index, step in enumerate(steps):
        finished = steps[index + 1]["enteredAt"] if index + 1 < len(steps) else end
        lines.append(
            f"  {step['name']:<24} {elapsed(step['enteredAt'], finished) if finished else ''}".rstrip()
        )
    return lines


def print_operation(operation: dict[str, Any], out: TextIO) -> None:
    error = operation.get("error")
    # a failed create: the cause read from HyperPod's lifecycle logs, its fix and the lines it rests on
    diagnosis = operation.get("diagnosis") or {}
    print_fields(
        [
            ("operation", operation["operationId"]),
            ("kind", operation["kind"]),
            ("cluster", operation["clusterName"]),
            ("status", operation["status"]),
            ("requested by", operation.get("requestedBy")),
            ("execution", operation.get("executionArn")),
            ("error", error and f"{error['error']}: {error['cause']}"),
            ("diagnosis", f"{diagnosis['category']}: {diagnosis['summary']}" if diagnosis else None),
            ("fix", diagnosis.get("fix")),
            *(("evidence", f"{e['stream']}: {e['line']}") for e in diagnosis.get("evidence") or []),
            ("rolled back", operation.get("rolledBack")),
            ("leftovers", ", ".join(operation.get("leftovers") or [])),
            ("node", operation.get("nodeId")),
            ("trigger", operation.get("trigger")),
            ("fault", _fault(operation.get("fault"))),
            ("repaired by", operation.get("actor")),
            ("successor", operation.get("successorNodeId")),
            *(("warning", warning) for warning in operation.get("warnings") or []),
        ],
        out,
    )
    for action in operation.get("actions") or []:
        print(
            "  " + "  ".join(f"{key}={value}" for key, value in action.items() if value is not None), file=out
        )
    for line in step_lines(operation):
        print(line, file=out)


def _fault(fault: dict[str, Any] | None) -> str | None:
    """A ReplaceNode's fault: the HMA fault type and HyperPod's reason, as the Node Health event said."""
    if not fault:
        return None
    return ": ".join(str(part) for part in (fault.get("faultType"), fault.get("reason")) if part) or None


def print_operations(operations: list[dict[str, Any]], out: TextIO) -> None:
    if not operations:
        print("no operations", file=out)
        return
    rows = [("OPERATION", "KIND", "STATUS", "CREATED", "UPDATED")]
    rows += [(o["operationId"], o["kind"], o["status"], o["createdAt"], o["updatedAt"]) for o in operations]
    print_table(rows, out)


def print_clusters(clusters: list[dict[str, Any]], out: TextIO) -> None:
    if not clusters:
        print("no clusters", file=out)
        return
    # CREATED BY: only the creator (and the stack's admins) may delete the cluster or pause its healing
    rows = [("NAME", "STATUS", "SAGEMAKER", "OWNER", "PROJECT", "CREATED BY", "LAST OPERATION")]
    rows += [
        (
            c["clusterName"],
            c["status"],
            c.get("sagemakerStatus") or "-",
            c.get("owner") or "-",
            c.get("project") or "-",
            _principal(c.get("createdBy")),
            c["lastOperationId"],
        )
        for c in clusters
    ]
    print_table(rows, out)


def _principal(arn: str | None) -> str:
    """``arn:aws:sts::1:assumed-role/Admin/ann`` -> ``assumed-role/Admin/ann``: the part that tells who."""
    if not arn:
        return "-"
    return arn.split(":", 5)[-1] if arn.startswith("arn:") else arn


def print_cluster(cluster: dict[str, Any], out: TextIO) -> None:
    live = cluster.get("sagemaker") or {}
    print_fields(
        [
            ("cluster", cluster["clusterName"]),
            ("autopilot", cluster.get("status") or "not managed by Autopilot"),
            ("sagemaker", live.get("ClusterStatus") or "not found"),
            ("owner", cluster.get("owner")),
            ("project", cluster.get("project")),
            ("budget", cluster.get("budgetName")),
            ("failure", live.get("FailureMessage")),
            ("agent", _agent(cluster.get("agent"))),
        ],
        out,
    )
    groups = live.get("InstanceGroups") or []
    if groups:
        rows = [("GROUP", "TYPE", "COUNT", "STATUS")]
        rows += [
            (
                g["InstanceGroupName"],
                g.get("InstanceType") or "-",
                f"{g.get('CurrentCount', '-')}/{g.get('TargetCount', '-')}",
                g.get("Status") or "-",
            )
            for g in groups
        ]
        print_table(rows, out)
    if "nodes" in cluster:
        print_nodes(cluster["nodes"], out)


def _agent(agent: dict[str, Any] | None) -> str | None:
    """The Slurm agent's status, with its version and last report when it ever reported."""
    if not agent:
        return None
    seen = f"last report {agent['lastSeen']}" if agent.get("lastSeen") else None
    return " ".join(str(p) for p in (agent["status"], agent.get("version"), seen and f"({seen})") if p)


def print_nodes(nodes: list[dict[str, Any]], out: TextIO) -> None:
    if not nodes:
        print("no nodes", file=out)
        return
    # SLURM: the node's state in Slurm as the cluster's agent last reported it ("-" without one)
    rows = [("NODE", "GROUP", "TYPE", "STATUS", "SLURM", "HEALTH", "REPAIR")]
    # by group, then oldest first: a replacement joins its group's end, not the list's
    ordered = sorted(
        nodes, key=lambda n: (n["InstanceGroupName"], str(n.get("LaunchTime") or ""), n["InstanceId"])
    )
    for node in ordered:
        health = node.get("health") or {}
        repair = node.get("repair") or {}
        rows.append(
            (
                node["InstanceId"],
                node["InstanceGroupName"],
                node["InstanceType"],
                node["InstanceStatus"]["Status"],
                _slurm(node.get("slurm")),
                " ".join(str(part) for part in (health.get("status"), health.get("reason")) if part) or "-",
                " ".join(
                    str(part)
                    for part in (repair.get("action"), repair.get("status"), repair.get("operationId"))
                    if part
                )
                or "-",
            )
        )
    print_table(rows, out)


def _slurm(slurm: dict[str, Any] | None) -> str:
    """``MIXED+DRAIN (autopilot op-1: replace) 2 jobs``: the state, Slurm's reason, the jobs on it."""
    if not slurm:
        return "-"
    jobs = len(slurm.get("jobs") or [])
    reason = f"({slurm['reason']})" if slurm.get("reason") else None
    return " ".join(
        p for p in (slurm["state"], reason, f"{jobs} job{'s' * (jobs != 1)}" if jobs else None) if p
    )


def print_plan(plan: dict[str, Any], out: TextIO) -> None:
    """A dry run: the checks passed, then what would be sent and created."""
    print(f"dry run: cluster {plan['clusterName']} would be created; nothing was", file=out)
    for check in plan["checks"]:
        print(f"  ok  {check}", file=out)
    for warning in plan.get("warnings") or []:
        print(f"  warning: {warning.get('file') or ''}: {warning['path']}: {warning['message']}", file=out)
    for label, budget in (("budget", plan.get("budget")), ("project budget", plan.get("projectBudget"))):
        if budget:
            print(f"{label}: {budget['budgetName']}, {budget['limitAmount']} USD a month", file=out)
    print("CreateCluster request:", file=out)
    print(json.dumps(plan["createClusterRequest"], indent=2), file=out)


def print_document(document: dict[str, Any], out: TextIO) -> None:
    """A flat object (healing state, cost) as ``label  value`` lines; nested objects indented."""
    for key, value in document.items():
        if isinstance(value, dict):
            print(key, file=out)
            for inner, item in value.items():
                print(f"  {inner:<22} {cell(item)}", file=out)
        else:
            print(f"{key:<24} {cell(value)}", file=out)
