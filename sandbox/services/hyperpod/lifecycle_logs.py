"""The lifecycle-script logs HyperPod writes to CloudWatch Logs (moto's), and the ``lifecycle_failure``
fault that replays any log excerpt as a failed launch.

HyperPod writes each instance's lifecycle-script output to the log group
``/aws/sagemaker/Clusters/<cluster-name>/<cluster-id>``, one stream per instance,
``LifecycleConfig/<instance-group>/<instance-id>`` (the naming is unconfirmed against AWS:
docs/sandbox.md). The healthy lines are those the workshop's lifecycle_script.py prints
(aws-samples/awsome-distributed-training, LifecycleScripts/base-config).

Events are written into moto's log group directly, stamped with the simulated time: moto's PutLogEvents
drops events more than 2 hours from the wall clock, which a simulated clock leaves behind in minutes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from moto.logs.models import logs_backends

# The catalog's data file (read as data: the simulator does not import Autopilot's code).
CATALOG_FILE = Path(__file__).resolve().parents[3] / "layers/autopilot/autopilot/diagnosis/catalog.json"
HEALTHY_LINES = (
    "Execute script: ./add_users.sh",
    "Script ./add_users.sh executed successully",
    "Execute script: ./utils/motd.sh",
    "Script ./utils/motd.sh executed successully",
    "[INFO]: Success: All provisioning scripts completed",
)
# What runs before a script fails: the steps that went well (the last, success line never comes).
STARTED_LINES = HEALTHY_LINES[:2]
# SageMaker's FailureMessage when an instance's lifecycle scripts fail (awslabs/awsome-distributed-ai
# issues #188 and #632, word for word).
LIFECYCLE_FAILED_MESSAGE = (
    'Instance {instance_id} failed to provision with the following error: "Lifecycle scripts did not run '
    "successfully. Ensure the scripts exist in provided S3 path, are accessible, and run without errors. "
    'Please see CloudWatch logs for lifecycle script execution details." Note that multiple instances may '
    "be impacted."
)


def log_group_name(cluster_name: str, cluster_id: str) -> str:
    return f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_id}"


def stream_name(group: str, instance_id: str) -> str:
    return f"LifecycleConfig/{group}/{instance_id}"


@dataclass
class LifecycleFailure:
    """The next launch in ``group`` of ``cluster`` (any, when None) fails: ``lines`` end the instance's
    lifecycle stream and ``failure_message`` (else SageMaker's usual one) is the FailureMessage."""

    lines: tuple[str, ...]
    cluster: str | None = None
    group: str | None = None
    failure_message: str | None = None

    def covers(self, cluster: str, group: str) -> bool:
        return self.cluster in (None, cluster) and self.group in (None, group)

    def message(self, instance_id: str) -> str:
        return self.failure_message or LIFECYCLE_FAILED_MESSAGE.format(instance_id=instance_id)


def lifecycle_failure(
    *,
    cluster: str | None = None,
    group: str | None = None,
    lines: list[str] | None = None,
    failure_message: str | None = None,
    category: str | None = None,
) -> LifecycleFailure:
    """The fault from its parameters: ``lines`` (any real excerpt), or ``category`` for the catalog's
    example lines of that cause (the canned faults)."""
    if category is not None:
        if lines:
            raise ValueError("give lines or category, not both")
        lines = category_lines(category)
    if not lines or not all(isinstance(line, str) for line in lines):
        raise ValueError("lines must be a non-empty list of strings (or give a category)")
    return LifecycleFailure(tuple(lines), cluster, group, failure_message)


def category_lines(category: str) -> list[str]:
    entries = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))["entries"]
    for entry in entries:
        if entry["category"] == category:
            return [str(entry["examples"][0]["line"])]
    known = ", ".join(sorted(str(e["category"]) for e in entries))
    raise ValueError(f"unknown category {category!r}; known: {known}")


def write_stream(
    account_id: str,
    region: str,
    *,
    cluster_name: str,
    cluster_id: str,
    group: str,
    instance_id: str,
    at: datetime,
    lines: tuple[str, ...] | list[str],
) -> None:
    """Append ``lines`` to the instance's lifecycle stream, a second apart, ending at ``at``."""
    backend = logs_backends[account_id][region]
    name = log_group_name(cluster_name, cluster_id)
    if name not in backend.groups:
        backend.create_log_group(name, {})
    log_group = backend.groups[name]
    stream = stream_name(group, instance_id)
    if stream not in log_group.streams:
        log_group.create_log_stream(stream)
    end = int(at.timestamp() * 1000)
    events: list[dict[str, Any]] = [
        {"timestamp": end - 1000 * (len(lines) - 1 - index), "message": line}
        for index, line in enumerate(lines)
    ]
    log_group.put_log_events(stream, events)
