"""The Autopilot agent on a sandbox controller node, installed and started as on a node.

On AWS the controller's lifecycle scripts (``LifeCycleConfig.SourceS3Uri``) run once, when the instance
launches: the operator's on_create.sh calls ``autopilot-agent/install.sh`` (docs/agent.md), which checks
``config.json``, copies the agent to /opt/autopilot-agent and its config to /etc/autopilot-agent, and
enables a systemd unit. The sandbox does the same at the controller's first launch, in a directory that
stands for the node's root file system (``node_root``):
- ``install_agent`` copies the ``autopilot-agent/`` prefix from (moto's) S3 and runs its install.sh with
  ``AUTOPILOT_AGENT_ROOT=<node root>`` and a PATH without systemctl (install.sh installs the files and says it
  could not start the service). Its output is the node's lifecycle log (``<node root>/lifecycle.log``). A
  missing or unusable config.json, or any install.sh that fails, leaves the node without an agent.
- ``start_agent`` then does what systemd does with the unit: runs the INSTALLED copy with the INSTALLED
  config, overriding only ``apiUrl`` (the local API) and ``pollSeconds`` (sandbox-only: its clock runs
  faster than a node's), with the controller role's credentials and nothing else of this process's
  environment.
A reboot runs no lifecycle script: the agent comes back only where it was installed (the unit is enabled).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from moto.s3.models import s3_backends

AGENT_DIR: Final = Path(__file__).resolve().parents[3] / "agent"
AGENT_MODULE: Final = "autopilot_agent"
AGENT_PREFIX: Final = "autopilot-agent/"
INSTALL_SCRIPT: Final = AGENT_PREFIX + "install.sh"
POLL_SECONDS: Final = 0.5  # wall seconds: the sandbox's time runs faster than a node's
# what install.sh runs besides bash's builtins; systemctl deliberately not (no systemd on this "node")
_NODE_TOOLS: Final = ("bash", "dirname", "mkdir", "rm", "cp", "mv", "find", "install", "env", "pgrep")
_INSTALL_SECONDS: Final = 60.0
_STOP_SECONDS: Final = 5.0


def create_agent_role(iam: Any, role_name: str, cluster: str = "*") -> None:
    """The execution role an operator creates for a cluster whose controller runs the agent: trusted by
    SageMaker, allowed to report for ``cluster`` only (docs/agent.md, "Permissions")."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    iam.create_role(RoleName=role_name, AssumeRolePolicyDocument=json.dumps(trust))
    report = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": f"arn:aws:execute-api:*:*:*/*/POST/agent/{cluster}/reports",
    }
    iam.put_role_policy(
        RoleName=role_name,
        PolicyName="agent",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [report]}),
    )


def agent_files(config: Mapping[str, object] | None) -> dict[str, bytes]:
    """What an operator puts in the lifecycle prefix (docs/agent.md): ``autopilot-agent/`` = the repo's
    ``agent/`` plus ``config.json`` (None: without one). Keys relative to the prefix."""
    files = {
        AGENT_PREFIX + path.relative_to(AGENT_DIR).as_posix(): path.read_bytes()
        for path in sorted(AGENT_DIR.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    if config is not None:
        files[AGENT_PREFIX + "config.json"] = json.dumps(config).encode()
    return files


def _prefix(source_s3_uri: str) -> tuple[str, str] | None:
    """(bucket, key prefix of ``autopilot-agent/``) of a lifecycle SourceS3Uri."""
    if not source_s3_uri.startswith("s3://"):
        return None
    bucket, _, prefix = source_s3_uri[len("s3://") :].partition("/")
    return bucket, f"{prefix.strip('/')}/{AGENT_PREFIX}".lstrip("/")


def installs_agent(account_id: str, source_s3_uri: str) -> bool:
    """Whether ``<SourceS3Uri>/autopilot-agent/install.sh`` is in (moto's) S3 now."""
    where = _prefix(source_s3_uri)
    backend = s3_backends[account_id]["aws"]
    if where is None or where[0] not in backend.buckets:
        return False
    return backend.get_object(where[0], where[1] + "install.sh") is not None


def install_agent(
    node_root: Path, *, account_id: str, source_s3_uri: str, resource_config: Mapping[str, object]
) -> bool:
    """The lifecycle step: ``autopilot-agent/`` from S3 into ``<node root>/lifecycle``, then
    ``bash autopilot-agent/install.sh`` from there as root would run it. True when it installed the agent.

    ``resource_config``: what HyperPod writes to /opt/ml/config/resource_config.json (the agent reads the
    cluster's name there when config.json has none)."""
    where = _prefix(source_s3_uri)
    backend = s3_backends[account_id]["aws"]
    if where is None or where[0] not in backend.buckets:
        return False
    bucket, prefix = where
    keys, _, _, _ = backend.list_objects(backend.buckets[bucket], prefix, None, None, None)
    files = {AGENT_PREFIX + key.name[len(prefix) :]: key.value for key in keys}
    return install_agent_files(node_root, files, resource_config=resource_config)


def install_agent_files(
    node_root: Path, files: Mapping[str, bytes], *, resource_config: Mapping[str, object]
) -> bool:
    """``install_agent`` from the lifecycle prefix's files (``agent_files``' keys: ``autopilot-agent/...``)
    rather than S3: copied into ``<node root>/lifecycle``, then install.sh run as on the node."""
    lifecycle = node_root / "lifecycle"
    for name, body in files.items():
        relative = name[len(AGENT_PREFIX) :] if name.startswith(AGENT_PREFIX) else ""
        if not relative or relative.endswith("/") or ".." in relative.split("/"):
            continue
        target = lifecycle / "autopilot-agent" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    resource = node_root / "opt" / "ml" / "config" / "resource_config.json"
    resource.parent.mkdir(parents=True, exist_ok=True)
    resource.write_text(json.dumps(resource_config))
    log = node_root / "lifecycle.log"
    with log.open("ab") as output:
        result = subprocess.run(
            ["bash", "./autopilot-agent/install.sh"],
            env=_node_env(node_root, {"AUTOPILOT_AGENT_ROOT": str(node_root)}),
            cwd=lifecycle,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=_INSTALL_SECONDS,
            check=False,
        )
        if result.returncode != 0:
            output.write(f"[sandbox] install.sh exited {result.returncode}: no agent on this node\n".encode())
    return result.returncode == 0 and installed(node_root)


def installed(node_root: Path) -> bool:
    """Whether install.sh left an agent and its config on the node (what the systemd unit runs)."""
    return (node_root / "opt" / "autopilot-agent" / AGENT_MODULE).is_dir() and _config(node_root).is_file()


def start_agent(
    node_root: Path,
    *,
    api_url: str,
    slurm_conf: Path,
    credentials: Mapping[str, str],
    module: str = AGENT_MODULE,
) -> subprocess.Popen[bytes]:
    """Start the installed agent as its systemd unit does; its log (journald's) ``<node root>/agent.log``.

    ``credentials``: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN of the controller's
    role. The config is the installed one with apiUrl and pollSeconds replaced (anything else in it,
    right or wrong, is what the agent gets on a node)."""
    settings = json.loads(_config(node_root).read_text())
    config = node_root / "sandbox-agent.json"
    config.write_text(json.dumps({**settings, "apiUrl": api_url, "pollSeconds": POLL_SECONDS}))
    env = _node_env(
        node_root,
        {
            "PYTHONPATH": str(node_root / "opt" / "autopilot-agent"),
            "AUTOPILOT_AGENT_CONFIG": str(config),
            "SLURM_CONF": str(slurm_conf),
            # what systemd gives the unit's StateDirectory=autopilot-agent: the finished jobs' cursor lives
            # there, on the node's root volume (kept across a reboot, gone with a replaced instance)
            "STATE_DIRECTORY": str(state_dir(node_root)),
            **credentials,
        },
    )
    env["PATH"] = f"{env['PATH']}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # + Slurm's client tools
    with (node_root / "agent.log").open("ab") as log:
        return subprocess.Popen(
            [_python(), "-m", module],
            env=env,
            cwd=node_root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_agent(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the agent finishes its poll and exits), SIGKILL if it does not."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(_STOP_SECONDS)


def state_dir(node_root: Path) -> Path:
    """The agent's /var/lib/autopilot-agent on the node (created as systemd creates a StateDirectory)."""
    path = node_root / "var" / "lib" / "autopilot-agent"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _config(node_root: Path) -> Path:
    return node_root / "etc" / "autopilot-agent" / "config.json"


def _python() -> str:
    """The interpreter itself, not this virtualenv's: the agent has only the standard library on a node."""
    return os.path.realpath(sys.executable)


def _node_env(node_root: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The node's environment: a PATH of the tools install.sh uses and python3, no systemctl; the
    resource config where HyperPod's lifecycle scripts find it (SAGEMAKER_RESOURCE_CONFIG_PATH)."""
    bin_dir = node_root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in _NODE_TOOLS:
        found = shutil.which(tool)
        if found is not None and not (bin_dir / tool).is_symlink():
            (bin_dir / tool).symlink_to(found)
    if not (bin_dir / "python3").is_symlink():
        (bin_dir / "python3").symlink_to(_python())
    return {
        "PATH": str(bin_dir),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "SAGEMAKER_RESOURCE_CONFIG_PATH": str(node_root / "opt" / "ml" / "config" / "resource_config.json"),
        **extra,
    }
