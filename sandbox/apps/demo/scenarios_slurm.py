"""Slurm-aware healing (issue 21): a job survives the repair of one of its nodes.

`make demo` runs real Slurm for every Slurm cluster (sandbox/services/slurm/: slurmctld, one slurmd per
worker). The scenario does what people do, through public surfaces only: the operator installs the agent as
docs/agent.md says (the execution role with the agent's statement, the lifecycle prefix in S3 holding
provisioning_parameters.json and ``autopilot-agent/`` with its config.json) and creates the cluster
through the API; a researcher submits a job with sbatch (SLURM_CONF from the admin route); HyperPod's
health agent finds a GPU fault. Autopilot and its agent do the rest, and the timeline shows what Slurm
says (sinfo, squeue) after each step of the repair.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Any, Final
from urllib.parse import urlparse

from sandbox.apps.demo.clusters import (
    ROOT,
    AlertsInbox,
    NotificationsInbox,
    accepted,
    create_body,
    unique_name,
)
from sandbox.apps.demo.runner import POLL_S, DemoContext, ScenarioFailed, scenario
from sandbox.apps.demo.scenarios_healing import repairs_of

AGENT_DIR: Final = ROOT / "agent"
WORKERS: Final = "worker-group-1"
FAULT_TYPE: Final = "NvidiaErrorTerminate"  # HMA: the GPU is gone, the remedy is a replace
PREFIX: Final = "src/"
SLURM_TIMEOUT_S: Final = 30.0
# A Slurm client's errors while slurmctld cannot answer (restarting, reconfiguring, busy)
SLURMCTLD_AWAY: Final = re.compile(
    r"Connection (reset|refused)|Unable to contact slurm controller|Socket timed out|"
    r"Zero Bytes were transmitted|Transport endpoint is not connected",
    re.IGNORECASE,
)
REPAIR_TIMEOUT_S: Final = 120.0
REQUEUED_JOB_TIMEOUT_S: Final = 60.0
BACK_IN_SLURM: Final = frozenset({"idle", "allocated", "mixed"})
SAGEMAKER_TRUST: Final = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
# on_create.sh's lines for the agent (docs/agent.md, "Install"): the controller is the node running slurmctld
ON_CREATE: Final = """#!/bin/bash
set -euo pipefail
python3 lifecycle_script.py -method install -config provisioning_parameters.json
# Autopilot agent (docs/agent.md): the Slurm controller only, the node that runs slurmctld
if pgrep -x slurmctld > /dev/null; then
  bash ./autopilot-agent/install.sh
fi
"""


class Slurm:
    """The cluster's Slurm as a person on the controller sees it: its commands with SLURM_CONF."""

    def __init__(self, ctx: DemoContext, cluster: str) -> None:
        view = ctx.env.slurm(cluster)
        if view is None:
            raise ScenarioFailed(f"GET /_sandbox/slurm/{cluster}: no Slurm for the cluster")
        self._ctx, self._cluster = ctx, cluster
        self._env = {**os.environ, "SLURM_CONF": str(view["slurmConf"])}

    def names(self) -> dict[str, str]:
        """Slurm node name by instance id (the admin route: a replace changes it)."""
        view = self._ctx.env.slurm(self._cluster) or {}
        return {str(k): str(v) for k, v in (view.get("nodes") or {}).items()}

    def run(self, *argv: str) -> str:
        # slurmctld restarts when a successor joins (as on HyperPod): a person on the controller
        # tries again, as the agent does (its TRANSIENT); anything else fails the scenario
        deadline = time.monotonic() + SLURM_TIMEOUT_S
        while True:
            done = subprocess.run(
                list(argv), env=self._env, capture_output=True, text=True, timeout=30, check=False
            )
            if done.returncode == 0:
                return done.stdout
            if not SLURMCTLD_AWAY.search(done.stderr) or time.monotonic() > deadline:
                raise ScenarioFailed(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
            time.sleep(POLL_S)

    def states(self) -> dict[str, str]:
        """sinfo: each node's state (idle, allocated, draining, drained, down, …)."""
        lines = self.run("sinfo", "-h", "-N", "-o", "%N|%T").split()
        return dict(line.split("|", 1) for line in lines)

    def job(self, job_id: str) -> tuple[str, str]:
        """squeue: the job's state and its nodes, or why it is pending ("" when Slurm has no such job)."""
        for line in self.run("squeue", "-h", "-o", "%i|%T|%N|%r").splitlines():
            found, state, nodes, reason = line.split("|", 3)
            if found == job_id:
                return state, nodes if state != "PENDING" else f"({reason})"
        return "", ""

    def show(self, when: str, job_id: str) -> None:
        nodes = ", ".join(f"{name} {state}" for name, state in sorted(self.states().items()))
        state, where = self.job(job_id)
        self._ctx.info(f"  sinfo  {when}: {nodes}")
        where = where if where.startswith("(") or not where else f"on {where}"
        self._ctx.info(f"  squeue {when}: job {job_id} {state or 'gone'} {where}".rstrip())


def install_agent(ctx: DemoContext, cluster: str, body: dict[str, Any]) -> str:
    """What the operator does (docs/agent.md): the execution role with the agent's statement, the
    lifecycle prefix with provisioning_parameters.json and autopilot-agent/ with its config.json.
    Returns the role's ARN."""
    region = ctx.api.region
    account = ctx.aws("sts").get_caller_identity()["Account"]
    api_url = ctx.env.stack_output("ApiUrl")
    api_id = str(urlparse(api_url).hostname).split(".", 1)[0]
    role = f"{cluster}-hyperpod-execution-role"  # the stack passes only *hyperpod* roles to SageMaker
    iam = ctx.aws("iam")
    role_arn = str(
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))["Role"]["Arn"]
    )
    statement = {
        "Sid": "AutopilotAgentReports",
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": f"arn:aws:execute-api:{region}:{account}:{api_id}/*/POST/agent/{cluster}/reports",
    }
    iam.put_role_policy(
        RoleName=role,
        PolicyName="autopilot-agent",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
    )
    ctx.info(
        f"  IAM role {role} (trusts sagemaker.amazonaws.com): execute-api:Invoke on {statement['Resource']}"
    )

    s3 = ctx.aws("s3")
    bucket = f"{cluster}-lifecycle"
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=bucket, **location)
    files: dict[str, bytes] = {
        "on_create.sh": ON_CREATE.encode(),
        "provisioning_parameters.json": json.dumps(body["provisioningParameters"], indent=2).encode(),
        "autopilot-agent/config.json": json.dumps(
            {"apiUrl": api_url, "region": region, "clusterName": cluster}, indent=2
        ).encode(),
    }
    for path in sorted(AGENT_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[f"autopilot-agent/{path.relative_to(AGENT_DIR).as_posix()}"] = path.read_bytes()
    for key, content in files.items():
        s3.put_object(Bucket=bucket, Key=f"{PREFIX}{key}", Body=content)
    ctx.info(
        f"  s3://{bucket}/{PREFIX}: on_create.sh, provisioning_parameters.json, "
        f"autopilot-agent/ ({len(files) - 2} files)"
    )
    for group in body["clusterConfig"]["InstanceGroups"]:
        group["LifeCycleConfig"]["SourceS3Uri"] = f"s3://{bucket}/{PREFIX}"
        group["ExecutionRole"] = role_arn
    return role_arn


def follow_with_slurm(ctx: DemoContext, operation_id: str, slurm: Slurm, job_id: str) -> None:
    """Put each action of the repair on the timeline as it is recorded, with Slurm's view then."""
    shown = 0
    started = time.monotonic()
    while True:
        operation = ctx.api.get_operation(operation_id)
        actions: list[dict[str, Any]] = operation.get("actions") or []
        for action in actions[shown:]:
            message = f": {action['message']}" if action.get("message") else ""
            ctx.info(f"  action {action.get('action')} {action.get('result')}{message}")
            slurm.show(f"after {action.get('action')}", job_id)
        shown = len(actions)
        if operation.get("status") in ("SUCCEEDED", "FAILED"):
            return
        if time.monotonic() - started > REPAIR_TIMEOUT_S:
            raise ScenarioFailed(
                f"repair {operation_id} still {operation.get('status')} after {REPAIR_TIMEOUT_S:g} s"
            )
        time.sleep(POLL_S)


def create_with_agent(ctx: DemoContext, cluster: str) -> None:
    """The operator's part: install the agent, POST /clusters, until the agent reports."""
    body = create_body(cluster, ctx.api.region, budget=False)
    # The controller and two workers: no login node (the sandbox gives a login group named only in
    # provisioning_parameters.json a slurmd, where Slurm would have placed half the job).
    groups = body["clusterConfig"]["InstanceGroups"]
    login = body["provisioningParameters"].pop("login_group", None)
    body["clusterConfig"]["InstanceGroups"] = groups = [g for g in groups if g["InstanceGroupName"] != login]
    for group in groups:
        if group["InstanceGroupName"] == WORKERS:
            group["InstanceCount"] = 2  # the job takes both: it runs again only once the node is back
            # a replacement's two hours of deep health checks would be 6 s of the demo's 3 minutes
            group.pop("OnStartDeepHealthChecks", None)
    install_agent(ctx, cluster, body)

    NotificationsInbox.of(ctx)
    AlertsInbox.of(ctx)
    result = ctx.call(f"POST /clusters ({cluster})", lambda: ctx.api.create_cluster(body), accepted)
    created = ctx.wait_for_operation(str(result["operationId"]))
    ctx.check(created["status"] == "SUCCEEDED", f"{cluster} created", json.dumps(created.get("error")))
    agent = ctx.wait_until(
        "the agent to report",
        lambda: (
            a if (a := ctx.api.get_cluster(cluster).get("agent") or {}).get("status") == "connected" else None
        ),
        timeout_s=SLURM_TIMEOUT_S,
    )
    ctx.check(True, f"GET /clusters/{cluster}: agent connected (version {agent.get('version')})")


def delete_with_leftover(ctx: DemoContext, cluster: str) -> None:
    """DELETE the cluster here, not in cleanup_leaves_nothing: its lifecycle bucket carries its cost tags
    (CostTaggerFunction) and outlives it, which the cleanup reports as a leftover, never deletes."""
    result = ctx.call(f"DELETE /clusters/{cluster}", lambda: ctx.api.delete_cluster(cluster), accepted)
    deleted = ctx.wait_for_operation(str(result["operationId"]))
    ctx.check(deleted["status"] == "SUCCEEDED", f"{cluster} deleted", json.dumps(deleted.get("error")))
    bucket = f"arn:aws:s3:::{cluster}-lifecycle"
    ctx.check(
        deleted.get("leftovers") == [bucket],
        f"the operator's lifecycle bucket is reported as a leftover ({bucket}), not deleted",
        json.dumps(deleted.get("leftovers")),
    )
    ctx.check(ctx.env.slurm(cluster) is None, f"GET /_sandbox/slurm/{cluster}: 404, its Slurm stopped")


@scenario(
    "slurm_job_survives_repair",
    "a job on two Slurm workers, one's GPU fails -> drain, requeue, replace, resume; the job runs again",
)
def slurm_job_survives_repair(ctx: DemoContext) -> None:
    cluster = unique_name(ctx, "demo-slurm")
    create_with_agent(ctx, cluster)

    slurm = Slurm(ctx, cluster)
    workers = {str(n["InstanceId"]) for n in ctx.api.list_nodes(cluster) if n["InstanceGroupName"] == WORKERS}
    names = {i: name for i, name in slurm.names().items() if i in workers}
    ctx.check(len(names) == 2, "both workers in Slurm, named as HyperPod names them", json.dumps(names))
    ctx.wait_until(
        "both workers idle in sinfo",
        lambda: True if {slurm.states().get(n) for n in names.values()} == {"idle"} else None,
        timeout_s=SLURM_TIMEOUT_S,
    )
    submitted = slurm.run(
        "sbatch", "-N2", "--requeue", "--job-name=pretrain", "-o", "/dev/null", "--wrap", "sleep 100000"
    )
    job_id = submitted.split()[-1]
    ctx.info(f"  sbatch -N2 --requeue: {submitted.strip()}")
    ctx.wait_until(
        f"job {job_id} running",
        lambda: True if slurm.job(job_id)[0] == "RUNNING" else None,
        timeout_s=SLURM_TIMEOUT_S,
    )
    slurm.show("job submitted", job_id)

    node_id, node_name = sorted(names.items())[0]
    ctx.fault("node_unhealthy", cluster=cluster, node_id=node_id, fault_type=FAULT_TYPE)
    found = ctx.wait_until(
        f"a ReplaceNode operation for {node_id}",
        lambda: next(iter(repairs_of(ctx, cluster, node_id)), None),
        timeout_s=REPAIR_TIMEOUT_S,
    )
    operation_id = str(found["operationId"])
    ctx.info(f"  Autopilot started {operation_id} ({found.get('trigger')}) for {node_id} ({node_name})")
    follow_with_slurm(ctx, operation_id, slurm, job_id)
    repair = ctx.wait_for_operation(operation_id, timeout_s=REPAIR_TIMEOUT_S)

    ctx.check(repair["status"] == "SUCCEEDED", "the repair SUCCEEDED", json.dumps(repair.get("error")))
    steps = [(a.get("action"), a.get("result")) for a in repair.get("actions") or []]
    ctx.check(
        steps
        == [
            ("drain", "succeeded"),
            ("requeue", "succeeded"),
            ("replace", "succeeded"),
            ("resume", "succeeded"),
        ],
        "actions: drain, requeue, replace, resume (no wait for the jobs: the fault took the GPUs)",
        json.dumps(steps),
    )
    ctx.check(
        not repair.get("warnings"),
        "no warning: the repair was Slurm-aware",
        json.dumps(repair.get("warnings")),
    )
    successor = str(repair.get("successorNodeId") or "")
    after = slurm.names()
    successor_name = after.get(successor, "")
    states = slurm.states()
    ctx.check(
        bool(successor_name) and node_name not in states and node_id not in after,
        f"{node_name} left Slurm; successor {successor} joined as {successor_name}",
        json.dumps({"nodes": after, "sinfo": states}),
    )
    ctx.check(
        set(states.values()) <= BACK_IN_SLURM and states.get(successor_name) in BACK_IN_SLURM,
        f"sinfo: every node idle or allocated ({', '.join(f'{n} {s}' for n, s in sorted(states.items()))})",
        json.dumps(states),
    )
    released: list[bool] = []

    def running_again() -> tuple[str, str] | None:
        job = slurm.job(job_id)
        if job == ("PENDING", "(BeginTime)"):
            # Slurm holds a requeued batch job about two minutes (its begin time; wall time, Slurm's clock
            # is not the sandbox's): the researcher lets it go now rather than make the demo wait. Asked
            # at every poll: the hold may be set only after the requeue has gone through
            slurm.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
            if not released:
                released.append(True)
                ctx.info(f"  scontrol update JobId={job_id} StartTime=now (Slurm's hold on a requeued job)")
        return job if job[0] == "RUNNING" else None

    state, on = ctx.wait_until(
        f"job {job_id} running again", running_again, timeout_s=REQUEUED_JOB_TIMEOUT_S, interval_s=1.0
    )
    slurm.show("repair done", job_id)
    ctx.check(
        successor_name in slurm.run("scontrol", "show", "hostnames", on).split(),
        f"job {job_id} ({state}) runs again on two nodes, the successor among them ({on})",
    )
    delete_with_leftover(ctx, cluster)
    ctx.details.update(
        cluster=cluster,
        node=node_id,
        successor=successor,
        operationId=operation_id,
        job=job_id,
        actions=steps,
    )
    ctx.summary = (
        f"job {job_id} requeued off {node_name} ({FAULT_TYPE}), back on {on} after drain/replace/resume"
    )
