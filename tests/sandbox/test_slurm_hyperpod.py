"""The HyperPod simulator drives real Slurm (sandbox/services/slurm/hyperpod.py) through its public API: a
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
from autopilot_agent.slurm import Slurm as AgentSlurm
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.slurm.agent import agent_files
from sandbox.services.slurm.hyperpod import HyperPodSlurm
from sandbox.services.slurm.processes import processes_using
from tests.sandbox.conftest import HYPERPOD_ACCOUNT, HYPERPOD_REGION, build_hyperpod_cluster_request

# slow tier: real Slurm daemons (an external tool, tests/README.md), their timeouts on wall time
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]

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


def put_lifecycle(prefix: str, files: dict[str, bytes]) -> str:
    """The cluster's lifecycle scripts in S3 (``s3://<AGENT_BUCKET>/<prefix>``): its SourceS3Uri."""
    s3 = boto3.client("s3", region_name=HYPERPOD_REGION)
    if AGENT_BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=AGENT_BUCKET)
    for key, body in {"on_create.sh": b"#!/bin/bash\n", **files}.items():
        s3.put_object(Bucket=AGENT_BUCKET, Key=f"{prefix}/{key}", Body=body)
    return f"s3://{AGENT_BUCKET}/{prefix}"


def create_with_scripts(world: World, name: str, files: dict[str, bytes]) -> dict[str, Any]:
    request = build_hyperpod_cluster_request(name, workers=1)
    source = put_lifecycle(name, files)
    for group in request["InstanceGroups"]:
        group["LifeCycleConfig"]["SourceS3Uri"] = source
    world.sagemaker.create_cluster(**request)
    world.advance(world.sim.timings.create_cluster + 1)
    return request


def controller_of(world: World, cluster: str) -> str:
    nodes = world.sagemaker.list_cluster_nodes(ClusterName=cluster)["ClusterNodeSummaries"]
    (controller,) = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller-machine"]
    return str(controller)


def reboot_controller(world: World, cluster: str) -> None:
    world.sagemaker.batch_reboot_cluster_nodes(ClusterName=cluster, NodeIds=[controller_of(world, cluster)])
    world.advance(world.sim.timings.reboot_node + 1)


def agent_environ(pid: int) -> dict[str, str]:
    text = Path(f"/proc/{pid}/environ").read_text()
    return dict(item.split("=", 1) for item in text.split("\0") if "=" in item)


# the operator's config.json: the real API's URL; no clusterName (the agent reads the node's resource config)
OPERATOR_CONFIG = {
    "apiUrl": "https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com/Prod",
    "region": HYPERPOD_REGION,
}


def test_the_agent_starts_where_the_controllers_scripts_install_it(world: World) -> None:
    request = create_with_scripts(world, "with-agent", agent_files(OPERATOR_CONFIG))
    slurm = world.slurm.cluster("with-agent")
    assert slurm is not None
    assert slurm.agent is not None
    controller = controller_of(world, "with-agent")
    role = request["InstanceGroups"][0]["ExecutionRole"]
    assert world.sessions == [(role, controller)]  # the controller's role, the instance as session
    root = slurm.node_root(controller)
    log = (root / "lifecycle.log").read_text()
    # install.sh ran on the "node": it installed, and found no systemd to start the service
    assert "installed in" in log
    assert "could not start the service" in log
    environ = agent_environ(slurm.agent.pid)
    assert environ["SLURM_CONF"] == str(slurm.slurm.conf)
    assert environ["AWS_ACCESS_KEY_ID"] != "testing"  # the assumed role's, not the sandbox's own
    assert environ["PYTHONPATH"] == str(root / "opt" / "autopilot-agent")  # the INSTALLED copy
    # the installed config, apiUrl and pollSeconds overridden; the cluster's name from the node
    config = json.loads(Path(environ["AUTOPILOT_AGENT_CONFIG"]).read_text())
    installed = json.loads((root / "etc" / "autopilot-agent" / "config.json").read_text())
    assert installed == OPERATOR_CONFIG
    assert config == {**OPERATOR_CONFIG, "apiUrl": "http://127.0.0.1:9/Prod", "pollSeconds": 0.5}
    resource = json.loads(Path(environ["SAGEMAKER_RESOURCE_CONFIG_PATH"]).read_text())
    assert resource["ClusterConfig"]["ClusterName"] == "with-agent"
    assert slurm.agent.poll() is None  # running (reporting to a URL where nothing answers)


def test_a_controller_reboot_restarts_the_installed_agent_and_runs_no_script(world: World) -> None:
    slurm = world.slurm.cluster("with-agent")
    assert slurm is not None
    before = slurm.agent
    assert before is not None
    s3 = boto3.client("s3", region_name=HYPERPOD_REGION)  # the scripts gone meanwhile: no matter
    for key in agent_files(None):
        s3.delete_object(Bucket=AGENT_BUCKET, Key=f"with-agent/{key}")
    controller = controller_of(world, "with-agent")
    world.sagemaker.batch_reboot_cluster_nodes(ClusterName="with-agent", NodeIds=[controller])
    world.advance(1)
    assert slurm.agent is None  # the instance is down: so is its agent
    assert before.poll() is not None
    world.advance(world.sim.timings.reboot_node)
    after = slurm.agent
    assert after is not None  # systemd starts the enabled unit again
    assert after.pid != before.pid
    log = (slurm.node_root(controller) / "lifecycle.log").read_text()
    assert log.count("installed in") == 1  # the lifecycle scripts ran once, at the launch


def test_install_sh_put_after_the_launch_changes_nothing_until_a_new_controller(world: World) -> None:
    create_with_scripts(world, "late-agent", {})
    slurm = world.slurm.cluster("late-agent")
    assert slurm is not None
    assert slurm.agent is None
    put_lifecycle("late-agent", agent_files(OPERATOR_CONFIG))
    reboot_controller(world, "late-agent")  # a reboot runs no lifecycle script
    assert slurm.agent is None
    assert not slurm.node_root(controller_of(world, "late-agent")).exists()
    world.sagemaker.delete_cluster(ClusterName="late-agent")
    world.sim.tick()


@pytest.mark.parametrize(
    ("name", "files", "why"),
    [
        ("no-config", agent_files(None), "config.json is missing"),
        ("bad-config", agent_files({**OPERATOR_CONFIG, "region": "nowhere"}), "region 'nowhere'"),
        (
            "bad-script",
            {**agent_files(OPERATOR_CONFIG), "autopilot-agent/install.sh": b"exit 7\n"},
            "install.sh exited 7",
        ),
    ],
)
def test_a_failed_install_leaves_the_cluster_without_an_agent_and_says_why(
    world: World, name: str, files: dict[str, bytes], why: str
) -> None:
    create_with_scripts(world, name, files)
    slurm = world.slurm.cluster(name)
    assert slurm is not None
    assert slurm.agent is None
    root = slurm.node_root(controller_of(world, name))
    assert why in (root / "lifecycle.log").read_text()
    assert not (root / "opt" / "autopilot-agent").exists()
    assert world.sessions[-1][1] != controller_of(world, name)  # no credentials taken for an agent
    world.sagemaker.delete_cluster(ClusterName=name)
    world.sim.tick()


def test_a_slurm_conf_without_gpu_gres_shows_the_agent_zero_gpus(world: World) -> None:
    # AWS's HyperPod slurm.conf may configure no gpu GRES (unverified: docs/sandbox.md)
    world.slurm.gres = False
    try:
        world.sagemaker.create_cluster(**build_hyperpod_cluster_request("no-gres", workers=1))
        world.advance(world.sim.timings.create_cluster + 1)
    finally:
        world.slurm.gres = True
    (name,) = world.workers("no-gres").values()
    world.wait_for("no-gres", "the worker idle", lambda: world.sinfo("no-gres") == {name: "idle"})
    slurm = world.slurm.cluster("no-gres")
    assert slurm is not None
    assert "GresTypes" not in slurm.slurm.conf.read_text()
    agent_view = AgentSlurm(run=lambda argv: slurm.slurm.run(*argv))  # the agent's own code
    assert [(view["name"], view["gpus"]) for view in agent_view.nodes()] == [(name, 0)]
    world.sagemaker.delete_cluster(ClusterName="no-gres")
    world.sim.tick()


def test_a_deleted_cluster_leaves_no_daemon_or_agent(world: World) -> None:
    slurm = world.slurm.cluster("with-agent")
    assert slurm is not None
    assert slurm.agent is not None
    agent, workdir = slurm.agent, str(slurm.slurm.workdir)
    assert processes_using(workdir)
    world.sagemaker.delete_cluster(ClusterName="with-agent")
    world.sim.tick()
    assert slurm.join(30)
    assert agent.poll() is not None
    assert not processes_using(workdir)
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
