"""Self-healing figures (issue 9): reaction time, spread faults, a correlated storm, in the sandbox.

One NodeRecovery None cluster of ``nodes`` nodes is created through the API on the real template; the
HyperPod simulator's ``node_unhealthy`` fault drives everything else, nothing calls a handler:

- **reaction**: a Node Health event reaching the bus → the Batch*ClusterNodes call that repairs its
  node, wall milliseconds (p50 / p99), faults one at a time (each repair has a free slot). The path
  is event → rule → SQS → ClusterEventsFunction → StartExecution → lease → Batch* call, with no poll
  in between on AWS either (the sandbox's SQS poller stands in for Lambda's event source mapping).
- **spread**: ``spread_failures`` nodes failing evenly over ``spread_hours`` simulated hours, each
  event on the bus ``copies`` times → every node repaired once, none acted on twice, never more
  repairs holding a slot than MaxConcurrentRepairs (the healing item's ``leaseHolders``, sampled every
  10 ms; the operations' own times cannot tell: the workflow stamps them on the sandbox clock, the
  functions on the wall clock), every node Running at the end.
- **storm**: ``storm_failures`` nodes failing at once → the breaker trips at the threshold
  (MaxUnhealthyPercent of the nodes), no Batch call beyond the slots taken before the trip while
  paused, one alert; PUT /clusters/{name}/healing {"paused": false} → every node repaired, at the cap.

Two taps, both outside the control plane: ``sandbox.emulator.bus.emit`` is wrapped to time (and repeat) the
simulator's Node Health events, and a botocore ``before-parameter-build`` handler times each
Batch*ClusterNodes call and the nodes it names.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import threading
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import boto3
import botocore.handlers

from sandbox.apps.demo.clusters import create_body
from sandbox.apps.demo.runner import DEMO_PARAMETERS, SandboxEnvironment
from sandbox.emulator import bus

CLUSTER: Final = "bench-heal"
WORKERS: Final = "worker-group-1"
HEALTH_EVENT: Final = "SageMaker HyperPod Cluster Node Health Event"
BATCH_CALLS: Final = ("BatchRebootClusterNodes", "BatchReplaceClusterNodes")
# Simulated deadlines far beyond the simulated repairs (a starved process lags while the clock runs),
# and the sweep once a day: the events alone start repairs, except the resume's own sweep.
BENCH_PARAMETERS: Final = {
    **DEMO_PARAMETERS,
    # The template's default: a replaced node's successor sends no Node Health event in the simulator,
    # so a replace ends on this check; at 3600 every repair held its slot an hour and the storm's
    # backlog of 100 outlasted its lease deadline (24 NoRepairSlot at x120).
    "FallbackPollSeconds": 300,
    "CreateTimeoutSeconds": 82800,
    # 100 storm repairs at 4 at a time (~20 simulated min each) would outwait ReplaceDeadlineMinutes'
    # longest (6 h): a repair waits for its slot within that deadline (docs/operations.md).
    "MaxConcurrentRepairs": 8,
    "MaxUnhealthyPercent": 20,
    "BreakerWindowMinutes": 10,
    "ReplaceDeadlineMinutes": 360,
    "RebootDeadlineMinutes": 60,
    "HealingSweepScheduleExpression": "rate(1 day)",
}
DEADLINE_S: Final = 1800.0


@dataclass
class Taps:
    """Wall times of the Node Health events put on the bus and of the Batch* calls, per node."""

    copies: int = 1
    unhealthy_on_bus: dict[str, float] = field(default_factory=dict)
    batch_calls: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def emit(self, original: Callable[..., str]) -> Callable[..., str]:
        def emit(source: str, detail_type: str, detail: dict[str, Any], **kwargs: Any) -> str:
            if detail_type != HEALTH_EVENT:
                return original(source, detail_type, detail, **kwargs)
            if detail.get("HealthSummary", {}).get("HealthStatus") == "Unhealthy":
                with self.lock:
                    self.unhealthy_on_bus.setdefault(detail["InstanceId"], time.perf_counter())
            for _ in range(self.copies - 1):
                original(source, detail_type, detail, **kwargs)
            return original(source, detail_type, detail, **kwargs)

        return emit

    def on_call(self, params: dict[str, Any] | None = None, model: Any = None, **_: Any) -> None:
        if model is None or model.name not in BATCH_CALLS or not params:
            return
        at = time.perf_counter()
        with self.lock:
            for node_id in params.get("NodeIds", []):
                self.batch_calls[node_id].append(at)

    def calls_of(self, node_ids: list[str]) -> int:
        with self.lock:
            return sum(len(self.batch_calls.get(n, [])) for n in node_ids)


@contextlib.contextmanager
def tapped(taps: Taps) -> Iterator[None]:
    handler = ("before-parameter-build.sagemaker", taps.on_call)
    original = bus.emit
    botocore.handlers.BUILTIN_HANDLERS.append(handler)
    if boto3.DEFAULT_SESSION is not None:
        boto3.DEFAULT_SESSION._session.register(*handler)
    bus.emit = taps.emit(original)  # the simulator calls bus.emit: every HyperPod event passes here
    try:
        yield
    finally:
        bus.emit = original
        botocore.handlers.BUILTIN_HANDLERS.remove(handler)
        if boto3.DEFAULT_SESSION is not None:
            boto3.DEFAULT_SESSION._session.unregister(*handler)


class LeaseSampler(threading.Thread):
    """The most repair slots held at once, read from the healing item every few milliseconds."""

    def __init__(self, env: SandboxEnvironment, period_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.table = env.sandbox.stack.physical_id("StateTable")
        self.dynamodb = env.sandbox.client("dynamodb")
        self.period_s = period_s
        self.max_holders = 0
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        key = {"pk": {"S": f"CLUSTER#{CLUSTER}"}, "sk": {"S": "HEALING"}}
        while not self._done.wait(self.period_s):
            item = self.dynamodb.get_item(TableName=self.table, Key=key).get("Item", {})
            self.max_holders = max(self.max_holders, len(item.get("leaseHolders", {}).get("SS", [])))
            self.samples += 1

    def stop(self) -> None:
        self._done.set()
        self.join()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def wait_for[T](
    check: Callable[[], T | None], what: str, timeout: float = DEADLINE_S, period: float = 0.05
) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        time.sleep(period)
    raise TimeoutError(f"no {what} within {timeout} s")


class Bench:
    def __init__(self, env: SandboxEnvironment, taps: Taps, node_count: int) -> None:
        self.env, self.taps, self.node_count = env, taps, node_count
        self.sagemaker = env.sandbox.client("sagemaker")

    def create_cluster(self, request: dict[str, Any]) -> None:
        operation_id = self.env.api.create_cluster(request)["operationId"]
        done = wait_for(
            lambda: op if (op := self.env.api.get_operation(operation_id))["status"] != "RUNNING" else None,
            "finished create",
        )
        if done["status"] != "SUCCEEDED":
            raise RuntimeError(f"the bench cluster was not created: {done.get('error')}")

    def nodes(self) -> dict[str, tuple[str, str]]:
        """Instance id → (group, InstanceStatus), every page."""
        found: dict[str, tuple[str, str]] = {}
        kwargs: dict[str, Any] = {"ClusterName": CLUSTER, "MaxResults": 100}
        while True:
            page = self.sagemaker.list_cluster_nodes(**kwargs)
            for n in page["ClusterNodeSummaries"]:
                found[n["InstanceId"]] = (n["InstanceGroupName"], n["InstanceStatus"]["Status"])
            if not page.get("NextToken"):
                return found
            kwargs["NextToken"] = page["NextToken"]

    def healthy_workers(self, count: int) -> list[str]:
        workers = sorted(
            n for n, (group, status) in self.nodes().items() if group == WORKERS and status == "Running"
        )
        if len(workers) < count:
            raise RuntimeError(f"only {len(workers)} Running workers, {count} wanted")
        return workers[:count]

    def fail(self, node_id: str) -> None:
        self.env.apply_fault(
            "node_unhealthy", {"cluster": CLUSTER, "node_id": node_id, "fault_type": "NvidiaErrorTerminate"}
        )

    def repairs(self) -> dict[str, list[dict[str, Any]]]:
        by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for operation in self.env.api.list_operations(CLUSTER, kind="ReplaceNode"):
            by_node[operation["nodeId"]].append(operation)
        return by_node

    def finished(self, node_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Until every node in ``node_ids`` had a repair claimed and none is open (the node items, one
        Query a round: listing every operation through the API each round would load the very
        control plane measured); then their operations, through the API."""
        table = self.env.sandbox.stack.physical_id("StateTable")
        dynamodb = self.env.sandbox.client("dynamodb")

        def done() -> bool | None:
            items: list[dict[str, Any]] = []
            kwargs: dict[str, Any] = {
                "TableName": table,
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :node)",
                "ExpressionAttributeValues": {":pk": {"S": f"CLUSTER#{CLUSTER}"}, ":node": {"S": "NODE#"}},
                "ConsistentRead": True,
            }
            while True:
                page = dynamodb.query(**kwargs)
                items += page["Items"]
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
            closed = {
                i["sk"]["S"].removeprefix("NODE#")
                for i in items
                if "lastFaultAt" in i and "openRepair" not in i
            }
            return True if closed >= set(node_ids) else None

        wait_for(done, f"finished repairs of {len(node_ids)} nodes", period=0.2)

        def recorded() -> dict[str, list[dict[str, Any]]] | None:
            # the workflow frees the node before its execution ends and the operation's status follows
            found = self.repairs()
            ended = all(found.get(n) and all(o["status"] != "RUNNING" for o in found[n]) for n in node_ids)
            return found if ended else None

        return wait_for(recorded, f"the operations of {len(node_ids)} repairs ended", period=0.5)

    def aws_calls(self) -> int:
        return sum(self.env.sandbox.metrics()["aws_calls"].values())

    def all_running(self) -> bool:
        statuses = [status for _, status in self.nodes().values()]
        return len(statuses) == self.node_count and all(s == "Running" for s in statuses)

    def settle_running(self) -> bool:
        try:
            wait_for(lambda: True if self.all_running() else None, "every node Running", timeout=120.0)
        except TimeoutError:
            return False
        return True

    def events_handled(self) -> None:
        """Until the cluster-events queue is empty (the sandbox never idles as a whole: schedules
        keep firing on its running clock)."""
        sqs = self.env.sandbox.client("sqs")
        url = self.env.sandbox.stack.physical_id("ClusterEventsQueue")
        names: list[Any] = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]

        def empty() -> bool | None:
            counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
            return True if all(counts[n] == "0" for n in names) else None

        wait_for(empty, "an empty cluster-events queue", timeout=300.0)

    def called(self, node_id: str) -> bool | None:
        return True if self.taps.calls_of([node_id]) else None

    def reached(self, minute: float) -> bool | None:
        return True if self.simulated_minutes() >= minute else None

    def simulated_minutes(self) -> float:
        return float(self.env.sandbox.clock.elapsed()) / 60


def reaction(bench: Bench, samples: int) -> dict[str, Any]:
    """Faults one at a time, each with a free slot: event on the bus → Batch call, wall ms."""
    millis: list[float] = []
    for node in bench.healthy_workers(samples):
        bench.fail(node)
        wait_for(functools.partial(bench.called, node), f"a repair call for {node}")
        with bench.taps.lock:
            millis.append((bench.taps.batch_calls[node][0] - bench.taps.unhealthy_on_bus[node]) * 1000)
        bench.finished([node])
    return {
        "samples": len(millis),
        "p50_ms": round(statistics.median(millis), 1),
        "p99_ms": round(percentile(millis, 99), 1),
        "max_ms": round(max(millis), 1),
        "aim_p99_ms": 100,
    }


def spread(bench: Bench, failures: int, hours: float, cap: int) -> dict[str, Any]:
    """``failures`` nodes failing evenly over ``hours`` simulated hours; each event on the bus
    ``copies`` times."""
    nodes = bench.healthy_workers(failures)
    calls_before, wall_start = bench.aws_calls(), time.perf_counter()
    sampler = LeaseSampler(bench.env)
    sampler.start()
    interval_min = hours * 60 / failures
    started_min = bench.simulated_minutes()
    for index, node in enumerate(nodes):
        due = started_min + index * interval_min
        wait_for(functools.partial(bench.reached, due), "the next fault's time")
        bench.fail(node)
    repairs = bench.finished(nodes)
    sampler.stop()
    running = bench.settle_running()
    wall = time.perf_counter() - wall_start
    acted = Counter({n: len(bench.taps.batch_calls.get(n, [])) for n in nodes})
    return {
        "nodes": bench.node_count,
        "failures": failures,
        "simulated_hours": hours,
        "copies_per_event": bench.taps.copies,
        "repaired": sum(1 for n in nodes if any(o["status"] == "SUCCEEDED" for o in repairs.get(n, []))),
        "operations": sum(len(repairs.get(n, [])) for n in nodes),
        "acted_on_twice": sum(1 for n in nodes if acted[n] > 1),
        "max_concurrent_repairs": cap,
        "max_lease_holders_sampled": sampler.max_holders,
        "lease_samples": sampler.samples,
        "all_running_at_end": running,
        "aws_calls_per_repaired_node": round((bench.aws_calls() - calls_before) / max(1, failures), 1),
        "wall_s": round(wall, 1),
    }


def storm(
    bench: Bench, failures: int, cap: int, max_unhealthy_percent: int, alerts: Callable[[], int]
) -> dict[str, Any]:
    """``failures`` nodes failing at once; the breaker trips; resume; every node repaired at the cap."""
    nodes = bench.healthy_workers(failures)
    api = bench.env.api
    alerts_before, wall_start = alerts(), time.perf_counter()
    started_min = bench.simulated_minutes()
    for node in nodes:
        bench.fail(node)
    injected_in_min = bench.simulated_minutes() - started_min
    healing = wait_for(lambda: h if (h := api.get_healing(CLUSTER))["paused"] else None, "a paused cluster")
    paused_seen = time.perf_counter()
    # Every copy of the storm's events handled: the repairs claimed before the trip either took a slot
    # then (and act) or wait, paused, for one; the resume comes well within their deadline.
    bench.events_handled()
    before_resume = bench.taps.calls_of(nodes)
    with bench.taps.lock:
        # a repair whose slot was taken just before the trip may still call after it: at most the cap
        after_pause = sum(1 for n in nodes for at in bench.taps.batch_calls.get(n, []) if at > paused_seen)
    paused_alerts = alerts() - alerts_before
    still_paused = api.get_healing(CLUSTER)["paused"]
    sampler = LeaseSampler(bench.env)
    sampler.start()
    api.set_healing(CLUSTER, paused=False)
    repairs = bench.finished(nodes)
    sampler.stop()
    running = bench.settle_running()
    threshold = max_unhealthy_percent * bench.node_count // 100 + 1
    return {
        "nodes": bench.node_count,
        "failures": failures,
        "injected_within_simulated_minutes": round(injected_in_min, 2),
        "trip_threshold_reports": threshold,
        # the pause's reason counts the reports of the write that tripped: "N of M nodes reported …"
        "tripped_at_reports": int(healing["pausedReason"].split(" of ", 1)[0]),
        "reports_in_window_when_paused": healing["breaker"]["unhealthyInWindow"],
        "paused_by": healing["pausedBy"],
        # the storm's events take a while to be handled: repairs claimed before the trip act meanwhile
        "repair_calls_before_resume": before_resume,
        "repair_calls_after_pause_seen": after_pause,
        "max_concurrent_repairs": cap,
        "alerts": paused_alerts,
        "paused_until_resume": still_paused,
        "repaired_after_resume": sum(
            1 for n in nodes if any(o["status"] == "SUCCEEDED" for o in repairs.get(n, []))
        ),
        "failed_repairs": sum(1 for n in nodes for o in repairs.get(n, []) if o["status"] == "FAILED"),
        "failure_causes": dict(
            Counter(
                (o.get("error") or {}).get("error", "unknown")
                for n in nodes
                for o in repairs.get(n, [])
                if o["status"] == "FAILED"
            )
        ),
        "acted_on_twice": sum(1 for n in nodes if len(bench.taps.batch_calls.get(n, [])) > 1),
        "max_lease_holders_sampled": sampler.max_holders,
        "all_running_at_end": running,
        "wall_s": round(time.perf_counter() - wall_start, 1),
    }


def alert_counter(env: SandboxEnvironment) -> Callable[[], int]:
    """How many Healing Paused alerts an operator's subscription to the alerts topic got so far."""
    sqs, sns = env.sandbox.client("sqs"), env.sandbox.client("sns")
    url = sqs.create_queue(QueueName="bench-heal-alerts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=env.sandbox.stack.outputs["AlertsTopicArn"],
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    seen = 0

    def count() -> int:
        nonlocal seen
        while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            seen += sum(1 for m in messages if "Healing Paused" in m["Body"])
            for m in messages:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return seen

    return count


def measure(
    *,
    nodes: int = 256,
    reaction_samples: int = 20,
    spread_failures: int = 40,
    spread_hours: float = 2.0,
    copies: int = 3,
    storm_failures: int = 100,
    speed: float = 600.0,
    log_path: Path | None = None,
) -> dict[str, Any]:
    """The three healing figures on one ``nodes``-node cluster (1 controller, 1 login, the rest workers)."""
    from sandbox.harness.core import Sandbox  # noqa: PLC0415 - keeps the module importable without moto started

    cap = int(BENCH_PARAMETERS["MaxConcurrentRepairs"])
    taps = Taps()
    wall_start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = stack.enter_context(log_path.open("w"))
            # the functions' logs and metrics (Powertools writes EMF to stdout) go there, not into the table
            stack.enter_context(contextlib.redirect_stderr(log))
            stack.enter_context(contextlib.redirect_stdout(log))
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        stack.enter_context(tapped(taps))
        sandbox = stack.enter_context(Sandbox(parameters=BENCH_PARAMETERS, speed=speed))
        env = SandboxEnvironment(sandbox, sandbox.serve_api(0))
        request = create_body(CLUSTER, sandbox.region)  # NodeRecovery None: Autopilot repairs
        for group in request["clusterConfig"]["InstanceGroups"]:
            if group["InstanceGroupName"] == WORKERS:
                group["InstanceCount"] = nodes - 2
                # as make simulate: a replacement goes straight to Running, so a repair holds its slot the
                # ~20 simulated minutes the storm's figures assume, not HyperPod's 2 h of deep health
                # checks (100 repairs 8 at a time would then outlast their lease deadline)
                group.pop("OnStartDeepHealthChecks", None)
        bench = Bench(env, taps, nodes)
        bench.create_cluster(request)
        alerts = alert_counter(env)
        result: dict[str, Any] = {"reaction": reaction(bench, reaction_samples)}
        taps.copies = copies
        result["spread"] = spread(bench, spread_failures, spread_hours, cap)
        taps.copies = 1
        result["storm"] = storm(
            bench, storm_failures, cap, int(BENCH_PARAMETERS["MaxUnhealthyPercent"]), alerts
        )
        result["iam_denials"] = len(sandbox.metrics()["iam_denials"])
    result["clock_speed"] = speed
    result["wall_s"] = round(time.perf_counter() - wall_start, 1)
    return result
