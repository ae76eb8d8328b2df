"""Research computing (issue 25): what each department's jobs cost, and login nodes kept behind their
load balancer.

The operator creates a Slurm cluster with its agent (docs/agent.md), its login target group (an ``ip``
group behind a Network Load Balancer) and a department budget; researchers of two departments run
jobs on real Slurm (sbatch -A, the job completion log the agent reads); finance reads GET
/clusters/{name}/usage, whose lines add up to the cluster's spend; the physics department crosses its
budget and is alerted once per threshold; HyperPod's health agent finds the login node broken and
Autopilot replaces it, its successor registered behind the load balancer in its place.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from sandbox.apps.demo.clusters import (
    AlertsInbox,
    NotificationsInbox,
    accepted,
    create_body,
    unique_name,
)
from sandbox.apps.demo.runner import DemoContext, ScenarioFailed, scenario
from sandbox.apps.demo.scenarios_healing import repairs_of
from sandbox.apps.demo.scenarios_slurm import (
    REPAIR_TIMEOUT_S,
    SLURM_TIMEOUT_S,
    WORKERS,
    Slurm,
    delete_with_leftover,
    install_agent,
)
from sandbox.services.pricing.list_prices import price_per_hour

LOGIN: Final = "login-group"
TARGET_GROUP: Final = "autopilot-login-ssh"  # the stack's LoginTargetGroupNamePrefix: autopilot-login-
LOGIN_FAULT: Final = (
    "NvidiaErrorTerminate"  # HMA: the remedy is a replace (of a login node: AllowLoginReplace)
)
JOBS_TIMEOUT_S: Final = 60.0
# USD a month: the physics department's budget, crossed by the long job below (2 nodes x 30 s of a
# p5.48xlarge is ~1.64 USD at list price) and not by the short one (~0.16 USD)
PHYSICS_BUDGET_USD: Final = 1.0
ALERT_KIND: Final = "AccountBudgetThresholdCrossed"


def login_target_group(ctx: DemoContext) -> str:
    """An ``ip`` target group on port 22 behind a Network Load Balancer, in a VPC of its own (the
    simulated nodes' IPs are outside it: registered with AvailabilityZone all, as a peered VPC's)."""
    ec2, elbv2 = ctx.aws("ec2"), ctx.aws("elbv2")
    vpc = ec2.create_vpc(CidrBlock="172.31.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.0.0/24")["Subnet"]["SubnetId"]
    arn = str(
        elbv2.create_target_group(Name=TARGET_GROUP, Protocol="TCP", Port=22, VpcId=vpc, TargetType="ip")[
            "TargetGroups"
        ][0]["TargetGroupArn"]
    )
    balancer = elbv2.create_load_balancer(Name=f"{TARGET_GROUP}-nlb", Type="network", Subnets=[subnet])
    elbv2.create_listener(
        LoadBalancerArn=balancer["LoadBalancers"][0]["LoadBalancerArn"],
        Protocol="TCP",
        Port=22,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": arn}],
    )
    ctx.info(f"  NLB {TARGET_GROUP}-nlb -> target group {TARGET_GROUP} (ip, TCP 22)")
    return arn


def targets(ctx: DemoContext, arn: str) -> set[str]:
    """The IPs the target group holds (any state but draining)."""
    described = ctx.aws("elbv2").describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
    return {d["Target"]["Id"] for d in described if d["TargetHealth"]["State"] != "draining"}


def node_ip(ctx: DemoContext, cluster: str, node_id: str) -> str:
    details = ctx.aws("sagemaker").describe_cluster_node(ClusterName=cluster, NodeId=node_id)["NodeDetails"]
    return str(details["PrivatePrimaryIp"])


def usage(ctx: DemoContext, cluster: str, month: str, by: str = "account") -> dict[str, Any]:
    return ctx.api.get_usage(cluster, by=by, month=month)


def jobs_counted(ctx: DemoContext, cluster: str, month: str, count: int) -> dict[str, Any] | None:
    report = usage(ctx, cluster, month)
    return report if sum(line["jobs"] for line in report["lines"]) >= count else None


def slurm_seconds(slurm: Slurm, job: str) -> int:
    """How long the job ran, as slurmctld itself shows it (StartTime to EndTime; it keeps a finished
    job MinJobAge, 300 s): the chargeback's time, read apart from the agent and the control plane."""
    fields = dict(
        word.split("=", 1) for word in slurm.run("scontrol", "show", "job", "-o", job).split() if "=" in word
    )
    try:
        start, end = (datetime.fromisoformat(fields[key]) for key in ("StartTime", "EndTime"))
    except (KeyError, ValueError) as exc:
        raise ScenarioFailed(f"scontrol show job {job}: no StartTime/EndTime ({exc})") from exc
    return int((end - start).total_seconds())


def slurm_gpus(slurm: Slurm, node: str) -> int:
    """The node's GPUs as Slurm is configured with them (sinfo %G: ``gpu:8`` or ``gpu:h100:8``)."""
    gres = slurm.run("sinfo", "-h", "-n", node, "-o", "%G").split()[0]
    count = gres.split("(", 1)[0].rsplit(":", 1)[-1]
    if not gres.startswith("gpu") or not count.isdigit():
        raise ScenarioFailed(f"sinfo -n {node} -o %G: no GPU count in {gres!r}")
    return int(count)


def expected_usd(
    jobs: list[dict[str, Any]], price_per_hour: Decimal, gpus_per_node: int
) -> dict[str, Decimal]:
    """Each account's USD as Slurm's own times and the list price give it: seconds x price x the share
    of each node's GPUs the job held (--gres=gpu:N is per node)."""
    found: dict[str, Decimal] = {}
    for job in jobs:
        share = min(Decimal(job["gpusPerNode"]) / gpus_per_node, Decimal(1)) * job["nodes"]
        usd = Decimal(job["seconds"]) / 3600 * price_per_hour * share
        found[job["account"]] = found.get(job["account"], Decimal(0)) + usd
    return found


def department_alerts(ctx: DemoContext, cluster: str) -> list[dict[str, Any]]:
    return [
        a
        for a in AlertsInbox.of(ctx).drain()
        if a.get("kind") == ALERT_KIND and a.get("clusterName") == cluster
    ]


@scenario(
    "department_chargeback",
    "jobs under two Slurm accounts -> usage per account adds up to the spend; a budget alerted once; "
    "a login node replaced and re-registered behind its NLB",
)
def department_chargeback(ctx: DemoContext) -> None:
    cluster = unique_name(ctx, "demo-dept")
    arn = login_target_group(ctx)
    nodes, login_id, login_ip = create_cluster(ctx, cluster, arn)
    report, thresholds, jobs, slurm_jobs = departments_run_jobs(ctx, cluster, nodes)
    successor, successor_ip, held = login_replaced(ctx, cluster, arn, login_id, login_ip)
    delete_with_leftover(ctx, cluster)
    total = sum(line["usd"] for line in report["lines"])
    ctx.details.update(
        cluster=cluster,
        jobs=jobs,
        slurmJobs=slurm_jobs,
        usage={line["name"]: line["usd"] for line in report["lines"]},
        clusterSpendUsd=report["clusterSpendUsd"],
        alerts=thresholds,
        login={"replaced": login_id, "successor": successor, "targets": sorted(held)},
    )
    ctx.summary = (
        f"{len(report['lines']) - 1} accounts + unused = {total:.2f} USD of {report['clusterSpendUsd']:.2f}; "
        f"alerts {thresholds}; login {login_ip} -> {successor_ip} behind the NLB"
    )


def create_cluster(ctx: DemoContext, cluster: str, arn: str) -> tuple[list[dict[str, Any]], str, str]:
    """The operator's part: the agent installed, POST /clusters with the login target group and the
    physics budget; until the agent reports and the login node is behind the load balancer."""
    body = create_body(cluster, ctx.api.region, budget=False)
    for group in body["clusterConfig"]["InstanceGroups"]:
        if group["InstanceGroupName"] == WORKERS:
            group["InstanceCount"] = 2
            group.pop("OnStartDeepHealthChecks", None)  # a replacement's checks are not this scenario's
    body["loginTargetGroupArns"] = [arn]
    body["accountBudgets"] = {"physics": PHYSICS_BUDGET_USD}
    install_agent(ctx, cluster, body)
    NotificationsInbox.of(ctx)
    AlertsInbox.of(ctx)
    result = ctx.call(f"POST /clusters ({cluster})", lambda: ctx.api.create_cluster(body), accepted)
    created = ctx.wait_for_operation(str(result["operationId"]))
    ctx.check(created["status"] == "SUCCEEDED", f"{cluster} created", json.dumps(created.get("error")))
    ctx.wait_until(
        "the agent to report",
        lambda: (
            True if (ctx.api.get_cluster(cluster).get("agent") or {}).get("status") == "connected" else None
        ),
        timeout_s=SLURM_TIMEOUT_S,
    )
    nodes = list(ctx.api.list_nodes(cluster))
    login_id = next(str(n["InstanceId"]) for n in nodes if n["InstanceGroupName"] == LOGIN)
    login_ip = node_ip(ctx, cluster, login_id)
    registered = ctx.wait_until(
        f"the login node {login_ip} registered in {TARGET_GROUP}",
        lambda: held if login_ip in (held := targets(ctx, arn)) else None,
        timeout_s=SLURM_TIMEOUT_S,
    )
    ctx.check(registered == {login_ip}, f"{TARGET_GROUP} holds the login node {login_ip}", str(registered))
    return nodes, login_id, login_ip


def departments_run_jobs(
    ctx: DemoContext, cluster: str, nodes: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[int], list[str], list[dict[str, Any]]]:
    """Two departments' jobs on the two GPU workers; the usage per account, the physics alerts."""
    slurm = Slurm(ctx, cluster)
    workers = {str(n["InstanceId"]) for n in nodes if n["InstanceGroupName"] == WORKERS}
    names: list[str] = ctx.wait_until(
        "both workers in Slurm, named as HyperPod names them",
        lambda: (
            found if len(found := sorted(n for i, n in slurm.names().items() if i in workers)) == 2 else None
        ),
        timeout_s=SLURM_TIMEOUT_S,
    )
    ctx.wait_until(
        "both workers idle in sinfo",
        lambda: True if {slurm.states().get(n) for n in names} == {"idle"} else None,
        timeout_s=SLURM_TIMEOUT_S,
    )
    month = f"{datetime.now(UTC):%Y-%m}"  # Slurm's clock is the machine's (the jobs' start and end)

    def sbatch(account: str, user: str, on: list[str], gpus: int, seconds: int) -> str:
        placement = ["-N", str(len(on)), "-w", ",".join(on), f"--gres=gpu:{gpus}"]
        argv = [
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "-D",
            "/",
            "-A",
            account,
            "--uid",
            user,
            *placement,
        ]
        job = slurm.run(*argv, "--wrap", f"sleep {seconds}").strip().split(";", 1)[0]
        ctx.info(
            f"  sbatch -A {account} --uid {user} {' '.join(placement)} --wrap 'sleep {seconds}': job {job}"
        )
        return job

    # each job as Slurm ran it: its account, nodes and GPUs per node, and (once reported) its seconds
    slurm_jobs: list[dict[str, Any]] = []

    def ran(job: str, account: str, on: list[str], gpus: int) -> None:
        slurm_jobs.append(
            {
                "id": job,
                "account": account,
                "nodes": len(on),
                "gpusPerNode": gpus,
                "seconds": slurm_seconds(slurm, job),
            }
        )

    short = sbatch("physics", "root", names, 8, 2)
    biology = sbatch("biology", "nobody", names[:1], 4, 4)
    first = ctx.wait_until(
        "the agent to report both jobs finished",
        lambda: jobs_counted(ctx, cluster, month, 2),
        timeout_s=JOBS_TIMEOUT_S,
    )
    ran(short, "physics", names, 8)
    ran(biology, "biology", names[:1], 4)
    lines = {line["name"]: line for line in first["lines"]}
    ctx.check(
        set(lines) == {"physics", "biology", "(unused capacity)"},
        f"GET /clusters/{cluster}/usage?by=account: physics {lines.get('physics', {}).get('usd')} USD, "
        f"biology {lines.get('biology', {}).get('usd')} USD",
        json.dumps(first["lines"]),
    )
    ctx.check(department_alerts(ctx, cluster) == [], "physics below half its budget: no alert yet")

    long = sbatch("physics", "root", names, 8, 30)
    ctx.wait_until(
        f"job {long} reported", lambda: jobs_counted(ctx, cluster, month, 3), timeout_s=JOBS_TIMEOUT_S + 30
    )
    ran(long, "physics", names, 8)
    alerts = ctx.wait_until(
        "the physics budget alerts",
        lambda: found if len(found := department_alerts(ctx, cluster)) >= 3 else None,
        timeout_s=SLURM_TIMEOUT_S,
    )
    again = sbatch("physics", "root", names[:1], 8, 1)
    ctx.wait_until(
        f"job {again} reported", lambda: jobs_counted(ctx, cluster, month, 4), timeout_s=JOBS_TIMEOUT_S
    )
    ran(again, "physics", names[:1], 8)
    alerts = department_alerts(ctx, cluster)
    thresholds = sorted(a["thresholdPercent"] for a in alerts)
    ctx.check(
        thresholds == [50, 80, 100] and {a["account"] for a in alerts} == {"physics"},
        "physics crossed 50/80/100 % of its budget: one alert each (none again for the next job)",
        json.dumps(thresholds),
    )
    eighty = next((a for a in alerts if a["thresholdPercent"] == 80), {})
    ctx.info(f"  alert: {eighty.get('summary')}")

    # --- the lines add up to the cluster's spend ---------------------------------------------------
    def metered() -> dict[str, Any] | None:
        report = usage(ctx, cluster, month)
        return report if report["clusterSpendUsd"] >= report["jobsUsd"] > 0 else None

    report = ctx.wait_until("the spend meter to count past the jobs", metered, timeout_s=SLURM_TIMEOUT_S)
    total = sum(line["usd"] for line in report["lines"])
    spend = report["clusterSpendUsd"]
    ctx.check(
        abs(total - spend) <= 0.01 * spend and not report["warnings"],
        f"lines add up to the cluster's spend: {total:.2f} of {spend:.2f} USD "
        f"({', '.join(f'{line["name"]} {line["usd"]:.2f}' for line in report['lines'])})",
        json.dumps(report),
    )
    # ... and each account's line is what Slurm's own times at the list price say, not only the rest of
    # the spend (the unused line makes the sum above hold whatever the accounts' lines are)
    worker = next(str(n["InstanceId"]) for n in nodes if n["InstanceGroupName"] == WORKERS)
    instance_type = str(
        ctx.aws("sagemaker").describe_cluster_node(ClusterName=cluster, NodeId=worker)["NodeDetails"][
            "InstanceType"
        ]
    )
    node_gpus = slurm_gpus(slurm, names[0])
    want = expected_usd(slurm_jobs, price_per_hour(instance_type), node_gpus)
    got = {line["name"]: line["usd"] for line in report["lines"]}
    ctx.check(
        all(abs(got.get(a, 0.0) - float(usd)) <= 0.01 + 0.01 * float(usd) for a, usd in want.items()),
        "each account's line is Slurm's elapsed x list price x GPU share: "
        + ", ".join(f"{a} {got.get(a, 0.0):.2f} (Slurm: {usd:.2f})" for a, usd in sorted(want.items())),
        json.dumps({"lines": report["lines"], "slurmJobs": slurm_jobs, "instanceType": instance_type}),
    )
    by_user = usage(ctx, cluster, month, by="user")
    ctx.check(
        {line["name"] for line in by_user["lines"]} == {"root", "nobody", "(unused capacity)"},
        "by=user: root, nobody and the unused capacity",
        json.dumps(by_user["lines"]),
    )
    for job in slurm_jobs:
        job.update(instanceType=instance_type, nodeGpus=node_gpus)
    return report, thresholds, [short, biology, long, again], slurm_jobs


def login_replaced(
    ctx: DemoContext, cluster: str, arn: str, login_id: str, login_ip: str
) -> tuple[str, str, set[str]]:
    """HyperPod's health agent finds the login node broken: replaced (AllowLoginReplace), its successor
    registered in the target group in its place."""
    ctx.fault("node_unhealthy", cluster=cluster, node_id=login_id, fault_type=LOGIN_FAULT)
    found = ctx.wait_until(
        f"a ReplaceNode operation for the login node {login_id}",
        lambda: next(iter(repairs_of(ctx, cluster, login_id)), None),
        timeout_s=REPAIR_TIMEOUT_S,
    )
    repair = ctx.wait_for_operation(str(found["operationId"]), timeout_s=REPAIR_TIMEOUT_S)
    steps = [(a.get("action"), a.get("result")) for a in repair.get("actions") or []]
    ctx.check(
        repair["status"] == "SUCCEEDED", f"login repair SUCCEEDED: {steps}", json.dumps(repair.get("error"))
    )
    successor = str(repair.get("successorNodeId") or "")
    successor_ip = node_ip(ctx, cluster, successor) if successor else ""
    held = targets(ctx, arn)
    ctx.check(
        bool(successor) and held == {successor_ip},
        f"{TARGET_GROUP}: {login_ip} deregistered, successor {successor} ({successor_ip}) registered",
        json.dumps(sorted(held)),
    )
    return successor, successor_ip, held
