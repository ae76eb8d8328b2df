"""The HyperPod simulator drives real Slurm (sandbox/slurm/hyperpod.py) through its public API: a
create puts the workers in sinfo under HyperPod's names, a replacement swaps the name, a reboot and an
instance failure act on the node's slurmd, a delete stops everything; the agent starts only where the
controller's lifecycle scripts install it, with the controller role's credentials. One simulator and one
HyperPodSlurm serve the module, in order, on a frozen clock the tests advance."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sandbox.clock import SandboxClock
from sandbox.hyperpod import HyperPodSimulator
from sandbox.slurm.cluster import _processes_using
from sandbox.slurm.hyperpod import HyperPodSlurm
from tests.sandbox.conftest import HYPERPOD_ACCOUNT, HYPERPOD_REGION, build_hyperpod_cluster_request

pytestmark = pytest.mark.usefixtures("slurm_required")

AGENT_BUCKET = "lifecycle-with-agent"


class World:
    def __init__(self, sim: HyperPodSimulator, slurm: HyperPodSlurm, sessions: list[tuple[str, str]]) -> None:
        self.sim = sim
        self.slurm = slurm
        self.sessions = sessions  # (role ARN, session name) of every AssumeRole for an agent
        self.sagemaker = boto3.client("sagemaker", region_name=HYPERPOD_REGION)

    def advance(self, seconds: float) -> None:
        self.sim.clock.advance(seconds)
        self.sim.tick()
        assert self.slurm.settle(60), "Slurm did not catch up with the simulator"
        assert not self.slurm.errors

    def workers(self, cluster: str) -> dict[str, str]:
        """instance id → Slurm node name as HyperPod names it (first label of PrivateDnsHostname)."""
        nodes = self.sagemaker.list_cluster_nodes(ClusterName=cluster)["ClusterNodeSummaries"]
        return {
            n["InstanceId"]: n["PrivateDnsHostname"].split(".")[0]
            for n in nodes
            if n["InstanceGroupName"] == "worker-group-1"
        }

    def sinfo(self, cluster: str) -> dict[str, str]:
        slurm = self.slurm.cluster(cluster)
        assert slurm is not None
        lines = slurm.slurm.run("sinfo", "-h", "-N", "-o", "%N %T").split("\n")
        return dict(line.split() for line in lines if line.strip())

    def wait_for(self, cluster: str, what: str, check: Any, timeout: float = 30.0) -> None:
        slurm = self.slurm.cluster(cluster)
        assert slurm is not None
        slurm.slurm.wait_for(what, check, timeout)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    sessions: list[tuple[str, str]] = []
    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": HYPERPOD_REGION,
        }.items():
            env.setenv(name, value)
        with mock_aws():
            sts = boto3.client("sts", region_name=HYPERPOD_REGION)

            def credentials(role: str, session: str) -> dict[str, str]:
                sessions.append((role, session))
                assumed = sts.assume_role(RoleArn=role, RoleSessionName=session)["Credentials"]
                return {
                    "AWS_ACCESS_KEY_ID": assumed["AccessKeyId"],
                    "AWS_SECRET_ACCESS_KEY": assumed["SecretAccessKey"],
                    "AWS_SESSION_TOKEN": assumed["SessionToken"],
                }

            slurm = HyperPodSlurm(
                api_url=lambda: "http://127.0.0.1:9/Prod",  # nothing listens: the agent retries, harmlessly
                credentials=credentials,
                slurmd_timeout=3,
            )  # its own work directory, removed by stop()
            clock = SandboxClock(speed=0)
            sim = HyperPodSimulator(clock, region=HYPERPOD_REGION, account_id=HYPERPOD_ACCOUNT, seed=21)
            sim.hooks = slurm
            with sim:
                try:
                    yield World(sim, slurm, sessions)
                finally:
                    slurm.stop()


def test_a_created_clusters_workers_are_in_sinfo_under_hyperpods_names(world: World) -> None:
    world.sagemaker.create_cluster(**build_hyperpod_cluster_request("lab", workers=2))
    world.advance(world.sim.timings.create_cluster + 1)
    workers = world.workers("lab")
    view = world.slurm.view("lab")
    assert view is not None
    assert view["nodes"] == workers  # the controller runs slurmctld, not a slurmd
    world.wait_for(
        "lab", "both workers idle", lambda: world.sinfo("lab") == dict.fromkeys(workers.values(), "idle")
    )
    slurm = world.slurm.cluster("lab")
    assert slurm is not None
    assert Path(view["slurmConf"]) == slurm.slurm.conf
    first = next(iter(workers.values()))
    assert slurm.slurm.node_state(first)["Gres"] == "gpu:8"  # ml.p5.48xlarge
    assert slurm.agent is None  # its lifecycle scripts do not install the agent
    assert world.sessions == []


def test_a_replacement_is_in_sinfo_under_its_own_name_and_the_old_name_is_gone(world: World) -> None:
    old_id, old_name = sorted(world.workers("lab").items())[0]
    world.sagemaker.batch_replace_cluster_nodes(ClusterName="lab", NodeIds=[old_id])
    world.advance(world.sim.timings.replace_node + 1)
    workers = world.workers("lab")
    assert old_id not in workers
    assert len(workers) == 2
    world.wait_for(
        "lab", "the successor idle", lambda: world.sinfo("lab") == dict.fromkeys(workers.values(), "idle")
    )
    assert old_name not in world.sinfo("lab")
    view = world.slurm.view("lab")
    assert view is not None
    assert view["nodes"] == workers


def test_a_reboot_leaves_the_node_down_as_unexpectedly_rebooted(world: World) -> None:
    node_id, name = sorted(world.workers("lab").items())[-1]
    world.sagemaker.batch_reboot_cluster_nodes(ClusterName="lab", NodeIds=[node_id])
    world.advance(world.sim.timings.reboot_node + 1)
    world.wait_for("lab", "DOWN after the reboot", lambda: world.sinfo("lab")[name] == "down")
    slurm = world.slurm.cluster("lab")
    assert slurm is not None
    assert slurm.slurm.node_state(name)["Reason"] == "Node unexpectedly rebooted"
    slurm.slurm.run("scontrol", "update", f"NodeName={name}", "State=RESUME")


def test_a_gpu_fault_leaves_slurm_alone_and_an_instance_failure_takes_slurmd_down(world: World) -> None:
    (gpu_id, gpu_name), (failed_id, failed_name) = sorted(world.workers("lab").items())
    world.sim.apply_fault("node_unhealthy", {"cluster": "lab", "node_id": gpu_id})
    world.sim.apply_fault(
        "node_unhealthy", {"cluster": "lab", "node_id": failed_id, "instance_status": "Failure"}
    )
    world.advance(1)
    world.wait_for("lab", "DOWN* (not responding)", lambda: world.sinfo("lab")[failed_name] == "down*")
    assert world.sinfo("lab")[gpu_name] == "idle"  # HMA's verdict alone changes nothing in Slurm


def test_a_scale_down_takes_the_node_out_of_slurm(world: World) -> None:
    request = build_hyperpod_cluster_request("scaled", workers=2)
    world.sagemaker.create_cluster(**request)
    world.advance(world.sim.timings.create_cluster + 1)
    before = world.workers("scaled")
    world.wait_for("scaled", "two workers", lambda: set(world.sinfo("scaled")) == set(before.values()))
    workers = {**request["InstanceGroups"][1], "InstanceCount": 1}
    world.sagemaker.update_cluster(ClusterName="scaled", InstanceGroups=[workers])
    timings = world.sim.timings
    world.advance(max(timings.scale_down, timings.scale_up, timings.update_minimum) + 1)
    after = world.workers("scaled")
    assert len(after) == 1
    world.wait_for("scaled", "one worker", lambda: set(world.sinfo("scaled")) == set(after.values()))
    view = world.slurm.view("scaled")
    assert view is not None
    assert view["nodes"] == after
    world.sagemaker.delete_cluster(ClusterName="scaled")
    world.sim.tick()


def test_the_agent_starts_where_the_controllers_scripts_install_it(world: World) -> None:
    s3 = boto3.client("s3", region_name=HYPERPOD_REGION)
    s3.create_bucket(Bucket=AGENT_BUCKET)
    s3.put_object(Bucket=AGENT_BUCKET, Key="scripts/autopilot-agent/install.sh", Body=b"#!/bin/bash\n")
    request = build_hyperpod_cluster_request("with-agent", workers=1)
    for group in request["InstanceGroups"]:
        group["LifeCycleConfig"]["SourceS3Uri"] = f"s3://{AGENT_BUCKET}/scripts"
    world.sagemaker.create_cluster(**request)
    world.advance(world.sim.timings.create_cluster + 1)
    slurm = world.slurm.cluster("with-agent")
    assert slurm is not None
    assert slurm.agent is not None
    nodes = world.sagemaker.list_cluster_nodes(ClusterName="with-agent")["ClusterNodeSummaries"]
    (controller,) = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller-machine"]
    role = request["InstanceGroups"][0]["ExecutionRole"]
    assert world.sessions == [(role, controller)]  # the controller's role, the instance as session
    environ = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{slurm.agent.pid}/environ").read_text().split("\0")
        if "=" in item
    )
    assert environ["SLURM_CONF"] == str(slurm.slurm.conf)
    assert environ["AWS_ACCESS_KEY_ID"] != "testing"  # the assumed role's, not the sandbox's own
    assert environ["PYTHONPATH"].endswith("/agent")
    config = json.loads(Path(environ["AUTOPILOT_AGENT_CONFIG"]).read_text())
    assert config == {
        "apiUrl": "http://127.0.0.1:9/Prod",
        "region": HYPERPOD_REGION,
        "clusterName": "with-agent",
        "pollSeconds": 0.5,
    }
    assert slurm.agent.poll() is None  # running (reporting to a URL where nothing answers)


def test_a_deleted_cluster_leaves_no_daemon_or_agent(world: World) -> None:
    slurm = world.slurm.cluster("with-agent")
    assert slurm is not None
    assert slurm.agent is not None
    agent, workdir = slurm.agent, str(slurm.slurm.workdir)
    assert _processes_using(workdir)
    world.sagemaker.delete_cluster(ClusterName="with-agent")
    world.sim.tick()
    assert slurm.join(30)
    assert agent.poll() is not None
    assert not _processes_using(workdir)
    assert world.slurm.view("with-agent") is None


def test_a_login_group_named_by_the_provisioning_parameters_runs_no_slurmd(world: World) -> None:
    """The workshops' clusters name their controller and login groups in provisioning_parameters.json,
    not SlurmConfig: the login node must not join Slurm as a compute node (jobs landed on it)."""
    request = build_hyperpod_cluster_request("workshop", workers=1)
    groups = request["InstanceGroups"]
    groups.append({**groups[0], "InstanceGroupName": "login-group", "InstanceType": "ml.m5.4xlarge"})
    parameters = {"controller_group": "controller-machine", "login_group": "login-group"}
    s3 = boto3.client("s3", region_name=HYPERPOD_REGION)
    s3.create_bucket(Bucket="workshop-lifecycle")
    key = "src/provisioning_parameters.json"
    s3.put_object(Bucket="workshop-lifecycle", Key=key, Body=json.dumps(parameters))
    source = "s3://workshop-lifecycle/src"
    for group in groups:
        group.pop("SlurmConfig", None)
        group["LifeCycleConfig"] = {**group["LifeCycleConfig"], "SourceS3Uri": source}
    world.sagemaker.create_cluster(**request)
    world.advance(world.sim.timings.create_cluster + 1)
    view = world.slurm.view("workshop")
    assert view is not None
    assert view["nodes"] == world.workers("workshop")  # the worker only: no slurmd on the login node
