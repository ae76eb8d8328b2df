"""The Sandbox: the whole control plane in one process on moto, with the simulators.

    with Sandbox() as sandbox:                      # deploys /work/main/template.yaml
        sandbox.invoke("ApiFunction", event)        # in-process Lambda, real LambdaContext
        sandbox.client("stepfunctions").list_state_machines()
        sandbox.hyperpod.apply_fault("node_unhealthy", {...})
        url = sandbox.serve_api(3000)               # like `sam local start-api`, SigV4 (AWS_IAM)
        aws = sandbox.serve_aws(5000)               # moto server sharing the same backends
        sandbox.metrics()

Start order: credentials env → ``mock_aws`` (Step Functions executes ASL; Lambda without Docker)
→ seams (sandbox.emulator.seams) → simulators → deploy → background threads (simulator ticker and
scheduler on the sandbox clock, the SQS event-source poller, the async delivery worker).
``stop()`` undoes all of it in reverse order; the process environment is restored.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import boto3
from moto import mock_aws
from moto.core.config import DefaultConfig
from moto.core.models import DEFAULT_ACCOUNT_ID

from sandbox.emulator import seams
from sandbox.emulator.api_server import ApiServer
from sandbox.emulator.aws_calls import FAULT_KINDS, AwsCalls
from sandbox.emulator.aws_calls.iam import Denial
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.deploy import Stack, deploy
from sandbox.emulator.executions import end_executions
from sandbox.emulator.lambda_runtime import (
    SANDBOX_CREDENTIALS,
    InvocationResult,
    LambdaRuntime,
    SqsEventSourcePoller,
)
from sandbox.emulator.schedules import Scheduler
from sandbox.emulator.sqs import MessageMoves
from sandbox.harness.aws_endpoint import ADMIN_PREFIX, AwsEndpoint
from sandbox.harness.simulators import Simulators, install_simulators
from sandbox.services.budgets import BudgetsSimulator
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.pricing.price_list_api import PricingSimulator
from sandbox.services.ssm_sessions import SsmSessionsSimulator

if TYPE_CHECKING:  # imported when Slurm is on only (it starts daemons; most sandboxes never need it)
    from sandbox.services.slurm.hyperpod import HyperPodSlurm

DEFAULT_TEMPLATE: Final = Path(__file__).resolve().parents[2] / "template.yaml"
DEFAULT_REGION: Final = "us-east-1"
DEFAULT_STACK_NAME: Final = "hyperpod-autopilot"
MOCK_CONFIG: Final[DefaultConfig] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


# How long stop() waits for the executions it aborts to end (a Lambda task ends with its handler).
EXECUTIONS_END_SECONDS: Final = 10.0
# With real Slurm, the stack's AgentPollSeconds is what the agents really do in simulated time: they poll
# every half wall second (sandbox/services/slurm/agent.py), this allows them four polls' slack on a busy
# machine.
AGENT_POLL_WALL_SECONDS: Final = 2.0

# Host settings that would send boto3 elsewhere than the in-process mock while the sandbox runs.
_CLEARED_ENV: Final = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


class Sandbox:
    """The embedded control plane. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(
        self,
        template: Path | str = DEFAULT_TEMPLATE,
        *,
        parameters: Mapping[str, Any] | None = None,
        region: str = DEFAULT_REGION,
        account_id: str = DEFAULT_ACCOUNT_ID,
        speed: float = 600.0,
        clock: SandboxClock | None = None,
        stack_name: str = DEFAULT_STACK_NAME,
        simulators: bool = True,
        background: bool = True,
        schedules: bool = True,
        tick_interval: float = 0.05,
        seed: int | None = None,
        iam: bool = True,
        duplicate_events: float = 0.0,
        repair_action_none: float = 0.0,
        slurm: bool = False,
        slurm_gres: bool = True,
    ) -> None:
        self.template = Path(template).resolve()
        self.parameters = dict(parameters or {})
        self.region = region
        self.account_id = account_id
        self.clock = clock or SandboxClock(speed=speed)
        self.stack_name = stack_name
        self.simulators_enabled = simulators
        self.background = background
        self.schedules_enabled = schedules
        self.tick_interval = tick_interval
        self.seed = seed
        self.enforce_iam = iam  # every call a function or state machine makes is checked against its role
        self.aws_calls: AwsCalls | None = None
        self.duplicate_events = duplicate_events  # share of HyperPod events EventBridge delivers twice
        # share of faults on NodeRecovery Automatic clusters whose Node Health events say RepairAction None
        self.repair_action_none = repair_action_none
        # real Slurm (sandbox/services/slurm/) for the HyperPod simulator's Slurm clusters, and the agent
        # where a cluster installs it; off by default (hundreds of simulated nodes would be hundreds of
        # slurmd)
        self.slurm_enabled = slurm
        # False: its slurm.conf configures no gpu GRES (AWS's may not: docs/sandbox.md, unverified)
        self.slurm_gres = slurm_gres
        self.slurm: HyperPodSlurm | None = None
        self._agent_api_lock = threading.Lock()
        self.simulators: Simulators | None = None  # None until started, or when made with simulators=False
        self._stack: Stack | None = None
        self._runtime: LambdaRuntime | None = None
        self._poller: SqsEventSourcePoller | None = None
        self._scheduler: Scheduler | None = None
        self._mock: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._servers: list[ApiServer | AwsEndpoint] = []
        self._undo: list[Callable[[], None]] = []
        self.deploy_calls: dict[str, int] = {}

    # lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Sandbox:
        if self._mock is not None:
            raise RuntimeError("sandbox already started")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self._set_environment()
        self._mock = mock_aws(config=MOCK_CONFIG)
        self._mock.start()
        self._undo.append(self._mock.stop)
        self._runtime = LambdaRuntime(
            region=self.region,
            account_id=self.account_id,
            retry_delay=self._wall_seconds,
            session=self.session(),
            working=self.clock.working,
        )
        self._undo.append(self._runtime.stop)
        seams.install(self._runtime, self.clock)
        self._undo.append(seams.uninstall)
        if self.simulators_enabled:
            self.simulators = install_simulators(
                self.clock,
                region=self.region,
                account_id=self.account_id,
                seed=self.seed,
                duplicate_events=self.duplicate_events,
                repair_action_none=self.repair_action_none,
                undo=self._undo,
            )
            if self.slurm_enabled:
                self._install_slurm(self.simulators.hyperpod)
        self._stack = deploy(
            self.template,
            session=self.session(),
            region=self.region,
            account_id=self.account_id,
            stack_name=self.stack_name,
            seed=self.seed,
            **self._deploy_parameters(),
        )
        for spec in self._stack.functions.values():
            self._runtime.register(spec)
        self.deploy_calls = seams.aws_calls()
        seams.reset_aws_calls()
        self.aws_calls = AwsCalls(sleep_simulated=self.clock.sleep, enforce_iam=self.enforce_iam)
        self.aws_calls.start()
        self._undo.append(self.aws_calls.stop)
        self._poller = SqsEventSourcePoller(self._runtime, visibility_seconds=self._wall_seconds)
        self._scheduler = Scheduler(self._stack, self.clock, self.region, self.account_id)
        if self.background:
            self._poller.start()
            self._undo.append(self._poller.stop)
            self._ticker = threading.Thread(target=self._tick_forever, name="sandbox-ticker", daemon=True)
            self._ticker.start()
            self._undo.append(self._stop_ticker)

    def stop(self) -> None:
        """Stop servers, executions, threads, simulators, seams and moto; restore the environment.
        Idempotent."""
        if self.slurm is not None:  # first: an agent stops at once while its API still answers
            self.slurm.stop()
        for server in self._servers:
            server.stop()
        self._servers.clear()
        if self._mock is not None:
            end_executions(EXECUTIONS_END_SECONDS)
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:  # noqa: BLE001 - keep tearing down; report what failed
                traceback.print_exc()
        self._mock = None
        self._restore_environment()

    def _set_environment(self) -> None:
        wanted: dict[str, str | None] = {
            **SANDBOX_CREDENTIALS,
            "AWS_SECURITY_TOKEN": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            **dict.fromkeys(_CLEARED_ENV),
            **{key: None for key in os.environ if key.startswith("AWS_ENDPOINT_URL_")},
        }
        if self.account_id != DEFAULT_ACCOUNT_ID:
            wanted["MOTO_ACCOUNT_ID"] = self.account_id
        for key, value in wanted.items():
            self._saved_env[key] = os.environ.get(key)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def _restore_environment(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def _deploy_parameters(self) -> dict[str, Any]:
        """deploy()'s parameters. With real Slurm on a running clock, AgentPollSeconds (unless the caller
        set it) is AGENT_POLL_WALL_SECONDS of simulated time: the agent's connected window and the
        repair's agent-step limits scale with it, and at the template's 300 a busy machine would turn
        them into silence and timeouts (x1200: 300 s is a quarter of a wall second). Past the template's
        MaxValue (docs/sandbox.md, "Real Slurm"), within what the functions accept."""
        if not self.slurm_enabled or self.clock.speed <= 0 or "AgentPollSeconds" in self.parameters:
            return {"parameters": self.parameters}
        from sandbox.emulator.deploy.template import load_template  # noqa: PLC0415 - only with Slurm on

        if "AgentPollSeconds" not in (load_template(self.template).get("Parameters") or {}):
            return {"parameters": self.parameters}  # another template (tests' fixtures): no agent parameter
        from autopilot.settings import AGENT_POLL_LIMIT  # noqa: PLC0415 - only with Slurm on

        poll = min(AGENT_POLL_LIMIT, max(10, round(self.clock.speed * AGENT_POLL_WALL_SECONDS)))
        return {
            "parameters": {**self.parameters, "AgentPollSeconds": poll},
            "max_values": {"AgentPollSeconds": AGENT_POLL_LIMIT},
        }

    def _install_slurm(self, hyperpod: HyperPodSimulator) -> None:
        from sandbox.services.slurm import INSTALL_HINT, missing_slurm  # noqa: PLC0415 - only with Slurm on
        from sandbox.services.slurm.hyperpod import HyperPodSlurm  # noqa: PLC0415

        missing = missing_slurm()
        if missing:
            raise RuntimeError(
                f"Sandbox(slurm=True) needs Slurm ({', '.join(missing)} missing): {INSTALL_HINT}"
            )
        self.slurm = HyperPodSlurm(
            api_url=self._agent_api_url, credentials=self._controller_credentials, gres=self.slurm_gres
        )
        hyperpod.hooks = self.slurm
        self._undo.append(self.slurm.stop)

    def _agent_api_url(self) -> str:
        """The local API an agent reports to: the one being served, else one started on a free port."""
        with self._agent_api_lock:
            served = next((s for s in self._servers if isinstance(s, ApiServer)), None)
            return served.url if served is not None else self.serve_api(0)

    def _controller_credentials(self, role_arn: str, session_name: str) -> dict[str, str]:
        """STS AssumeRole of a controller group's ExecutionRole, named after the controller instance (as
        EC2 names an instance profile's sessions; what HyperPod names them is unverified)."""
        assumed = self.client("sts").assume_role(RoleArn=role_arn, RoleSessionName=session_name)
        credentials = assumed["Credentials"]
        return {
            "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
            "AWS_SESSION_TOKEN": credentials["SessionToken"],
        }

    def _wall_seconds(self, simulated: float) -> float:
        """A simulated delay in wall seconds, never longer than the real one (frozen clock: real time)."""
        return min(self.clock.wall_seconds(simulated), simulated)

    def _tick_forever(self) -> None:
        while not self._stop.wait(self.tick_interval):
            self.tick()

    def _stop_ticker(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(10)
        self._stop.clear()

    def tick(self) -> None:
        """One step of simulated time: simulators advance to clock.now(), due schedules fire."""
        # the SSM simulator ticks the regions spawned from it too (their CloudTrail events, terminations)
        for simulator in self.simulators.ticking() if self.simulators is not None else []:
            try:
                simulator.tick()
            except Exception:  # noqa: BLE001 - one failed tick must not stop the sandbox
                traceback.print_exc()
        if self.schedules_enabled and self._scheduler is not None:
            try:
                self._scheduler.fire_due()
            except Exception:  # noqa: BLE001
                traceback.print_exc()

    # accessors ---------------------------------------------------------------------------------
    def _simulators(self) -> Simulators:
        if self.simulators is None:
            raise RuntimeError("the simulators are not installed (sandbox not started, or simulators=False)")
        return self.simulators

    @property
    def hyperpod(self) -> HyperPodSimulator:
        """The home region's HyperPod simulator."""
        return self._simulators().hyperpod

    @property
    def ssm(self) -> SsmSessionsSimulator:
        return self._simulators().ssm

    @property
    def budgets(self) -> BudgetsSimulator:
        return self._simulators().budgets

    @property
    def message_moves(self) -> MessageMoves:
        return self._simulators().message_moves

    @property
    def pricing(self) -> PricingSimulator:
        return self._simulators().pricing

    def hyperpod_for(self, region: str, account_id: str | None = None) -> HyperPodSimulator:
        """The HyperPod simulator of ``region`` (created on first use, as a request there would)."""
        return self.hyperpod.for_region(region, account_id)

    def hyperpods(self) -> list[HyperPodSimulator]:
        """Every HyperPod simulator: the home region's (``hyperpod``) and those created since."""
        return list(self.simulators.hyperpod.every_region()) if self.simulators is not None else []

    @property
    def stack(self) -> Stack:
        if self._stack is None:
            raise RuntimeError("sandbox not started")
        return self._stack

    @property
    def runtime(self) -> LambdaRuntime:
        if self._runtime is None:
            raise RuntimeError("sandbox not started")
        return self._runtime

    @property
    def poller(self) -> SqsEventSourcePoller:
        if self._poller is None:
            raise RuntimeError("sandbox not started")
        return self._poller

    def session(self) -> boto3.Session:
        return boto3.Session(
            aws_access_key_id=SANDBOX_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=SANDBOX_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=SANDBOX_CREDENTIALS["AWS_SESSION_TOKEN"],
            region_name=self.region,
        )

    def client(self, service: str) -> Any:
        """A boto3 client bound to the sandbox (region, credentials; calls reach moto in-process)."""
        return self.session().client(service)  # type: ignore[call-overload]

    # doing things ------------------------------------------------------------------------------
    def invoke(self, function: str, event: Any = None) -> InvocationResult:
        """Invoke a template function synchronously (logical id, name or ARN), like `sam local invoke`."""
        return self.runtime.invoke(function, {} if event is None else event)

    def fire_schedule(self, logical_id: str) -> None:
        """Fire a schedule rule now (its targets get the Scheduled Event), whatever the clock says."""
        if self._scheduler is None:
            raise RuntimeError("sandbox not started")
        self._scheduler.fire(logical_id)

    def advance(self, seconds: float) -> None:
        """Move simulated time forward and tick once (deterministic stepping with speed=0)."""
        self.clock.advance(seconds)
        self.tick()

    def next_schedule_due(self) -> datetime | None:
        """When the next schedule rule fires on the sandbox clock (None: schedules are off)."""
        if not self.schedules_enabled or self._scheduler is None:
            return None
        return self._scheduler.next_due()

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until queued deliveries, async invocations and SQS batches are done (not SFN executions)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            idle = self.runtime.dispatcher.wait_idle(max(0.0, deadline - time.monotonic()))
            delivered = self.poller.poll_once()
            if (
                idle
                and not delivered
                and self.runtime.dispatcher.pending() == 0
                and self.poller.in_flight() == 0
            ):
                return True
        return False

    def wait_for_execution(self, execution_arn: str, timeout: float = 30.0) -> dict[str, Any]:
        """DescribeExecution until the execution leaves RUNNING (raises TimeoutError at the deadline)."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                return described
            if time.monotonic() > deadline:
                raise TimeoutError(f"{execution_arn} still RUNNING after {timeout} s")
            time.sleep(0.02)

    def metrics(self) -> dict[str, Any]:
        """Invocations per function, AWS calls per service:Operation, deliveries, clock."""
        return {
            "invocations": self.runtime.metrics(),
            "aws_calls": seams.aws_calls(),
            "deploy_aws_calls": dict(self.deploy_calls),
            "deliveries": {**seams.deliveries(), "sqs->lambda batches": self.poller.batches},
            "delivery_errors": seams.delivery_errors(),
            "aws_call_faults": self.aws_calls.faults.describe() if self.aws_calls else [],
            "iam_denials": [vars(d) | {"decision": d.decision.value} for d in self._iam_denials()],
            "scheduled_events": dict(self._scheduler.fired) if self._scheduler else {},
            "clock": {
                "now": self.clock.now().isoformat(),
                "speed": self.clock.speed,
                "elapsed_s": self.clock.elapsed(),
            },
        }

    # servers -----------------------------------------------------------------------------------
    def serve_api(self, port: int = 3000, host: str = "127.0.0.1") -> str:
        """Serve the template's API events on ``host:port`` (0 picks a free port); returns the base URL."""
        # Throttling refills per second of AWS's time, the sandbox clock's: a client polling once a
        # wall second at speed 600 polls once every ten simulated minutes.
        simulated = self.clock.elapsed
        last = {"simulated": simulated(), "wall": time.monotonic(), "refill": 0.0}
        lock = threading.Lock()

        def refill_clock() -> float:
            # the throttle's buckets refill, between two requests, with whichever time ran faster:
            # simulated time (a sped-up run is throttled no more than AWS would in that time) or the
            # wall's (a frozen clock, speed 0 between a test's advances, would otherwise never refill).
            # Step by step: a clock jumped hours ahead must not stop the wall's refills until the wall
            # catches up with it (every call a 429 after the burst)
            with lock:
                now_simulated, now_wall = simulated(), time.monotonic()
                last["refill"] += max(now_simulated - last["simulated"], now_wall - last["wall"], 0.0)
                last["simulated"], last["wall"] = now_simulated, now_wall
                return last["refill"]

        server = ApiServer(
            self.stack, self.runtime, host=host, port=port, dates=self.clock.now, monotonic=refill_clock
        )
        server.start()
        self._servers.append(server)
        return server.url

    def serve_aws(self, port: int = 5000, host: str = "127.0.0.1") -> str:
        """Serve moto (same in-process backends, simulators included) plus /_sandbox/ admin routes."""
        server = AwsEndpoint(self, host=host, port=port)
        server.start()
        self._servers.append(server)
        return server.url

    def apply_fault(self, name: str, params: dict[str, Any]) -> Any:
        """Inject a fault: ``throttling`` / ``server_error`` / ``latency`` / ``lost_response`` on any AWS
        call the control plane makes (sandbox.emulator.aws_calls), ``clear`` (those and the simulator's),
        else a HyperPod fault."""
        if self.aws_calls is None:
            raise RuntimeError("sandbox not started")
        if name in FAULT_KINDS:
            result = self.aws_calls.apply_fault(name, params)
            if name == "clear" and self.simulators is not None:
                result["hyperpod"] = self.simulators.hyperpod.apply_fault("clear", {})
            return result
        return self.hyperpod.apply_fault(name, params)

    def _iam_denials(self) -> list[Denial]:
        return list(self.aws_calls.iam.denials) if self.aws_calls and self.aws_calls.iam else []

    def admin(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """The /_sandbox/ admin routes (used by the AWS endpoint and the CLI's ``inject``)."""
        route = path.removeprefix(ADMIN_PREFIX).strip("/")
        if route == "health" and method == "GET":
            return 200, {"ok": True, "stack": self.stack.name, "region": self.region}
        if route == "metrics" and method == "GET":
            return 200, self.metrics()
        if route == "stack" and method == "GET":
            return 200, {
                "name": self.stack.name,
                "outputs": self.stack.outputs,
                "resources": {
                    lid: {"type": r.type, "physical_id": r.physical_id, "arn": r.arn}
                    for lid, r in self.stack.resources.items()
                },
            }
        if route == "clock":
            if method == "POST":
                self.advance(float((body or {}).get("advance", 0)))
            return 200, {"now": self.clock.now().isoformat(), "speed": self.clock.speed}
        if route == "faults" and method == "POST":
            if not isinstance(body, dict) or not isinstance(body.get("fault"), str):
                return 400, {"error": 'body must be {"fault": name, "params": {...}}'}
            try:
                result = self.apply_fault(body["fault"], dict(body.get("params") or {}))
            except RuntimeError as error:
                return 503, {"error": str(error)}
            except (ValueError, KeyError) as error:
                return 400, {"error": str(error)}
            return 200, {"fault": body["fault"], "result": result}
        if route.startswith("slurm/") and method == "GET":
            view = self.slurm.view(route.removeprefix("slurm/")) if self.slurm is not None else None
            if view is None:
                return 404, {"error": f"no Slurm for cluster {route.removeprefix('slurm/')!r}"}
            return 200, view
        if route == "schedules" and method == "POST":
            try:
                self.fire_schedule(str((body or {}).get("logical_id")))
            except KeyError as error:
                return 404, {"error": str(error)}
            return 200, {"fired": (body or {}).get("logical_id")}
        return 404, {"error": f"no admin route {method} {path}"}


__all__ = ["DEFAULT_TEMPLATE", "Sandbox", "Simulators"]
