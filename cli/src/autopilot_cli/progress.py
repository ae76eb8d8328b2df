"""The live lines ``--wait`` writes to stderr while HyperPod works (20-60 minutes on AWS).

One line whenever something moved (the workflow step, SageMaker's status, a group's count), and one
a minute while nothing did, so a long ``Creating`` still shows the clock running::

    CreateCluster ml-cluster (op-1)
      [   0m05s] Create Cluster (5s) | SageMaker Creating | controller 0/1 | workers 0/4
      [  12m00s] Wait For Cluster (11m55s) | SageMaker Creating | controller 1/1 | workers 2/4
    SUCCEEDED after 21m10s
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

HEARTBEAT_SECONDS = 60.0


# The fraction of a second in an ISO 8601 time, after hh:mm:ss.
_FRACTION = re.compile(r"(?<=:\d\d)\.(\d+)")


def parse_time(timestamp: str) -> datetime:
    """An ISO 8601 time as the API passes it on (its own, Step Functions', SageMaker's). Python
    3.10's ``fromisoformat`` takes neither ``Z`` nor a fraction of other than 3 or 6 digits."""
    six_digits = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), timestamp, count=1)
    return datetime.fromisoformat(six_digits.replace("Z", "+00:00"))


def duration(seconds: float) -> str:
    minutes, rest = divmod(max(int(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{rest:02d}s"
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def elapsed(start: str, end: str) -> str:
    return duration((parse_time(end) - parse_time(start)).total_seconds())


def sagemaker_state(cluster: dict[str, Any] | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    """SageMaker's ClusterStatus and each instance group's current/target count."""
    live = (cluster or {}).get("sagemaker")
    if cluster is None:
        return "unknown", ()
    if not live:
        return "not found", ()
    groups = tuple(
        (
            group["InstanceGroupName"],
            f"{_count(group.get('CurrentCount'))}/{_count(group.get('TargetCount'))}",
        )
        for group in live.get("InstanceGroups") or []
    )
    return str(live.get("ClusterStatus")), groups


def node_state(operation: dict[str, Any]) -> str | None:
    """A node repair's progress: the node (and its successor), who repairs it, the last action and how
    it ended, e.g. ``node i-0a1 -> i-0b2 (autopilot): replace succeeded``."""
    node = operation.get("nodeId")
    if not node:
        return None
    successor = operation.get("successorNodeId")
    text = f"node {node}" + (f" -> {successor}" if successor else "")
    if operation.get("actor"):
        text += f" ({operation['actor']})"
    actions = operation.get("actions") or []
    if actions:
        last = actions[-1]
        text += f": {last['action']} {last['result']}"
        if last.get("errorCode"):
            text += f" ({last['errorCode']})"
    return text


def _count(value: Any) -> str:
    return "?" if value is None else str(value)


class WaitProgress:
    def __init__(
        self,
        emit: Callable[[str], None],
        *,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self._emit = emit
        self._now = now  # the API's clock: the times shown are measured on it
        # the heartbeat is the reader's minute (a sandbox's clock may run 600 times faster)
        self._monotonic = monotonic or (lambda: now().timestamp())
        self._heartbeat = heartbeat_seconds
        self._shown: tuple[Any, ...] | None = None
        self._shown_at: float | None = None

    def update(self, operation: dict[str, Any], cluster: dict[str, Any] | None) -> None:
        now = self._now()
        steps = operation.get("steps") or []
        step = steps[-1] if steps else None
        status, groups = sagemaker_state(cluster)
        node = node_state(operation)
        state = (operation.get("status"), step and step["name"], status, groups, node)
        if self._shown is None:
            self._emit(
                f"{operation.get('kind')} {operation.get('clusterName')} ({operation.get('operationId')})"
            )
        quiet = self._shown_at is not None and self._monotonic() - self._shown_at < self._heartbeat
        if state == self._shown and quiet:
            return
        since_start = duration((now - parse_time(operation["createdAt"])).total_seconds())
        parts = [f"  [{since_start:>8}]"]
        if step is not None:
            parts.append(
                f"{step['name']} ({duration((now - parse_time(step['enteredAt'])).total_seconds())})"
            )
        else:
            parts.append(str(operation.get("status")))
        line = " ".join(parts) + f" | SageMaker {status}"
        line += "".join(f" | {name} {count}" for name, count in groups)
        if node:
            line += f" | {node}"
        self._emit(line)
        self._shown, self._shown_at = state, self._monotonic()

    def finish(self, operation: dict[str, Any]) -> None:
        took = elapsed(operation["createdAt"], operation["updatedAt"])
        self._emit(f"{operation.get('status')} after {took}")
