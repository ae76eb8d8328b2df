"""The Autopilot agent as a subprocess (``python -m autopilot_agent``, the code a controller node runs),
started for a cluster exactly when it would run on AWS: its controller group's lifecycle scripts
(``LifeCycleConfig.SourceS3Uri``) hold ``autopilot-agent/install.sh`` in S3 when the controller launches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from moto.s3.models import s3_backends

AGENT_DIR: Final = Path(__file__).resolve().parents[2] / "agent"
AGENT_MODULE: Final = "autopilot_agent"
INSTALL_SCRIPT: Final = "autopilot-agent/install.sh"
POLL_SECONDS: Final = 0.5  # wall seconds: the sandbox's time runs faster than a node's
_STOP_SECONDS: Final = 5.0


def installs_agent(account_id: str, source_s3_uri: str) -> bool:
    """Whether ``<SourceS3Uri>/autopilot-agent/install.sh`` is in (moto's) S3 now."""
    if not source_s3_uri.startswith("s3://"):
        return False
    bucket, _, prefix = source_s3_uri[len("s3://") :].partition("/")
    backend = s3_backends[account_id]["aws"]
    if bucket not in backend.buckets:
        return False
    key = f"{prefix.strip('/')}/{INSTALL_SCRIPT}".lstrip("/")
    return backend.get_object(bucket, key) is not None


def start_agent(
    workdir: Path,
    *,
    api_url: str,
    region: str,
    cluster_name: str,
    slurm_conf: Path,
    credentials: Mapping[str, str],
    module: str = AGENT_MODULE,
    python_path: Path = AGENT_DIR,
) -> subprocess.Popen[bytes]:
    """Start the agent for one cluster; its config in ``workdir/agent.json``, its log ``workdir/agent.log``.

    ``credentials``: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN of the controller's
    role. Nothing else of this process's environment reaches the agent (not the sandbox's own keys)."""
    config = workdir / "agent.json"
    config.write_text(
        json.dumps(
            {"apiUrl": api_url, "region": region, "clusterName": cluster_name, "pollSeconds": POLL_SECONDS}
        )
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "PYTHONPATH": str(python_path),
        "AUTOPILOT_AGENT_CONFIG": str(config),
        "SLURM_CONF": str(slurm_conf),
        "AWS_DEFAULT_REGION": region,
        **credentials,
    }
    with (workdir / "agent.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module],
            env=env,
            cwd=workdir,
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
