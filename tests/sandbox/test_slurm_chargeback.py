"""Chargeback through the whole sandbox: jobs run under two Slurm accounts on a sandbox cluster's real Slurm
(its job completion log), the agent the sandbox installed reports them, AgentFunction prices and counts
them into the state table's month totals per (account, user). The agent's side of the wire meets the
control plane's here, with nothing faked between them. (``GET /clusters/{name}/usage`` reads those totals
for clusters Autopilot created: its own tests.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from autopilot.dal.state_table import StateTable
from autopilot.dal.usage import UsageTable, usage_scope
from autopilot.models.usage import JobCost
from boto3.dynamodb.types import TypeDeserializer

from sandbox.emulator.clock import SandboxClock
from sandbox.harness.core import Sandbox
from sandbox.services.slurm.agent import create_agent_role
from sandbox.services.slurm.cluster import Accounting, SlurmCluster
from tests.sandbox.test_slurm_sandbox import ROLE, create_cluster

# slow tier: a whole Sandbox with real Slurm daemons and the agent as a process (tests/README.md)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    # the sample API events' caller an admin: the usage of a cluster Autopilot did not create
    admin = {"AdminPrincipalArns": "arn:aws:iam::123456789012:role/ResearcherRole"}
    with Sandbox(clock=SandboxClock(speed=0), slurm=True, schedules=False, parameters=admin) as sb:
        yield sb


@pytest.fixture(scope="module")
def agent_role(sandbox: Sandbox) -> None:
    create_agent_role(sandbox.client("iam"), ROLE)


def scope(sandbox: Sandbox, name: str) -> str:
    """The cluster's incarnation, which keys its usage items (dal/usage.py usage_scope)."""
    cluster = StateTable(sandbox.stack.physical_id("StateTable"), sandbox.client("dynamodb")).get_cluster(
        name
    )
    # a cluster made in SageMaker directly (no registry record): its usage items are keyed by its name
    return usage_scope(name, cluster.created_at if cluster else None)


def jobs(sandbox: Sandbox, name: str) -> dict[str, JobCost]:
    """The priced jobs AgentFunction recorded for the cluster (``USAGEJOB#<jobId>@<start>``)."""
    found = sandbox.client("dynamodb").query(
        TableName=sandbox.stack.physical_id("StateTable"),
        KeyConditionExpression="pk = :pk AND begins_with(sk, :job)",
        ExpressionAttributeValues={
            ":pk": {"S": f"CLUSTER#{scope(sandbox, name)}"},
            ":job": {"S": "USAGEJOB#"},
        },
        ConsistentRead=True,
    )["Items"]
    deserialize = TypeDeserializer().deserialize
    costs = [JobCost.model_validate({k: deserialize(v) for k, v in item.items()}) for item in found]
    return {cost.job_id: cost for cost in costs}


def slurm_time(slurm: SlurmCluster, job: str, key: str) -> str:
    """StartTime / EndTime as slurmctld shows them (this machine's local time), in UTC."""
    fields = dict(
        word.split("=", 1) for word in slurm.run("scontrol", "show", "job", "-o", job).split() if "=" in word
    )
    return datetime.strptime(fields[key], "%Y-%m-%dT%H:%M:%S").astimezone(UTC).isoformat()


@pytest.mark.parametrize(("name", "accounting"), [("chargeback", "jobcomp"), ("chargeback-dbd", "slurmdbd")])
@pytest.mark.usefixtures("agent_role")
def test_jobs_under_two_accounts_are_priced_and_counted_per_account_and_user(
    sandbox: Sandbox, name: str, accounting: Accounting
) -> None:
    sandbox.slurm.accounting = accounting  # the clusters created from now on (Sandbox has no option for it)
    create_cluster(sandbox, name, with_agent=True)
    cluster = sandbox.slurm.cluster(name)
    assert cluster is not None
    assert cluster.agent is not None
    slurm = cluster.slurm
    assert slurm.accounting == accounting
    first, second = sorted(slurm.node_names())
    slurm.add_accounts({"physics": ["root"], "biology": ["nobody"]})  # slurmdbd enforces associations

    physics = slurm.run_job("physics", nodes=[first], gpus_per_node=8, seconds=2)
    biology = slurm.run_job("biology", user="nobody", nodes=[second], gpus_per_node=4, seconds=2)

    log = cluster.node_root(cluster.agent_instance) / "agent.log"
    deadline = time.monotonic() + 60
    while {physics, biology} - set(jobs(sandbox, name)):
        assert time.monotonic() < deadline, (
            f"jobs {physics}, {biology} never counted; agent log:\n" + (log.read_text()[-3000:])
        )
        time.sleep(0.5)

    counted = jobs(sandbox, name)
    assert (counted[physics].account, counted[physics].user, counted[physics].gpus) == ("physics", "root", 8)
    assert (counted[biology].account, counted[biology].user, counted[biology].gpus) == (
        "biology",
        "nobody",
        4,
    )
    for job in (physics, biology):
        assert counted[job].node_count == 1
        assert counted[job].start.isoformat() == slurm_time(slurm, job, "StartTime")
        assert counted[job].end.isoformat() == slurm_time(slurm, job, "EndTime")
        assert counted[job].usd > 0  # priced at the node's list price (ml.p5.48xlarge)
    month = counted[physics].ended_month
    totals = UsageTable(sandbox.stack.physical_id("StateTable"), sandbox.client("dynamodb")).month_totals(
        scope(sandbox, name), month
    )
    assert {(t.account, t.user, t.jobs) for t in totals} >= {("physics", "root", 1), ("biology", "nobody", 1)}
    assert "refused" not in log.read_text()  # every report carrying the jobs was taken
