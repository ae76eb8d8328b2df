"""The agent's loop: report, take the commands the answer carries, carry them out, report the results.

One POST per poll is heartbeat + node report + results + the fetch of pending commands. A command is
carried out once (deduplicated by commandId: the control plane lists it until its result arrives);
await_idle and resume stay open across polls until done or their deadline. A command that fails, or
that Slurm refuses, becomes a result with ok=false: nothing a command does can stop the loop.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

from . import VERSION
from .client import ApiError, ReportClient
from .config import DEFAULT_POLL_SECONDS, is_interval
from .jobs import EMPTY, Batch, FinishedJobs
from .slurm import NODE_NAME, Slurm, SlurmError, UnknownNode, state_flags

log = logging.getLogger(__name__)

VERBS = ("drain", "await_idle", "requeue", "resume")
# Slurm's reason for a node whose slurmd registered with a new boot time (ReturnToService=1 keeps it DOWN)
REBOOTED = "Node unexpectedly rebooted"
# A Slurm client's errors while slurmctld cannot answer (restarting, reconfiguring, busy)
TRANSIENT = re.compile(
    r"Connection (reset|refused)|Unable to contact slurm controller|Socket timed out|"
    r"Zero Bytes were transmitted|Transport endpoint is not connected",
    re.IGNORECASE,
)
MAX_RESUMES = 3  # a resume command's scontrol updates at most (a node rebooting in a loop stays out)
MAX_REASON = 1000  # what the control plane accepts (autopilot.models.agent), as the results below
MAX_ERROR = 2000
MAX_REFUSED = 100  # requeue's notRequeued entries: a result's detail stays under the control plane's 64 KiB
REMEMBERED_COMMANDS = 4096
RETRY_AFTER_FAILURE_SECONDS = 30.0
JOBS_EVERY_POLLS = 6  # finished jobs are read every sixth poll at most (a minute at the default 10 s)
# a report refused (400/413) while it carried finished jobs: the next reports go without them this long,
# so one job the control plane will not take never costs the heartbeat and the commands
JOBS_PAUSE_SECONDS = 600.0


class Command(NamedTuple):
    command_id: str
    verb: str
    node: str
    reason: str
    deadline: datetime
    # resume: the reason the node must still show to be resumed (the sweep's own resumes name it, so a
    # drain an operator set since the report is never lifted); "" for none
    expect_reason: str = ""


class BadCommand(Exception):
    pass


class Agent:
    def __init__(
        self,
        client: ReportClient,
        slurm: Slurm,
        poll_seconds: Optional[float] = None,
        jobs: Optional[FinishedJobs] = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.slurm = slurm
        self.jobs = jobs  # None: no finished jobs in the reports (no state directory)
        self._monotonic = monotonic
        self._jobs_paused_until = 0.0
        # a configured interval is pinned; else the API's answers set it (AgentPollSeconds)
        self.pinned = poll_seconds is not None
        self.poll_seconds = DEFAULT_POLL_SECONDS if poll_seconds is None else poll_seconds
        self.open: Dict[str, Command] = {}  # taken, not finished (await_idle / resume held open)
        self.outbox: List[Dict[str, Any]] = []  # results not yet acknowledged by a 200
        self.finished: OrderedDict[str, None] = OrderedDict()
        self.delivered = False  # whether the last report got its 200
        self._resumed: Dict[str, int] = {}  # resume commands: how many times their scontrol update ran

    # one round ----------------------------------------------------------------------------------
    def poll_once(self, *, take_commands: bool = True) -> float:
        """One report (and, with ``take_commands``, the commands it brings, carried out); the seconds
        until the next round: 0 when results wait to be sent."""
        sending = list(self.outbox)
        report: Dict[str, Any] = {
            "agentVersion": VERSION,
            "sentAt": _iso(self.client.signing_now()),
            "nodes": self._node_views(),
            "results": sending,
        }
        batch = self._finished_jobs()
        if self.jobs is not None:
            report["jobs"] = batch.jobs
        try:
            answer = self.client.send(report)
        except ApiError as error:
            self.delivered = False
            log.error("report refused or undelivered: %s", error)
            if batch.jobs and error.status in (400, 413):
                self._jobs_paused_until = self._monotonic() + JOBS_PAUSE_SECONDS
                log.error("the next reports carry no finished jobs for %.0f s", JOBS_PAUSE_SECONDS)
                return 0.0  # the heartbeat and results again at once, without them
            if error.status in (400, 403, 404, 409):  # a refusal: asking again at once will not change it
                return max(self.poll_seconds, RETRY_AFTER_FAILURE_SECONDS)
            return self.poll_seconds
        self.delivered = True
        self.outbox = [result for result in self.outbox if result not in sending]
        rejected = answer.get("rejectedJobs")
        if isinstance(rejected, list) and rejected:
            # refused for good (a bad record: no resend would change it): committed with the others
            log.warning("finished jobs the control plane refused (not counted): %s", rejected[:20])
        try:
            batch.commit()  # the control plane has these jobs: the cursor moves past them
        except OSError as error:
            log.error("cannot save the finished jobs' cursor (they will be sent again): %s", error)
        poll: Any = answer.get("pollSeconds")
        if not self.pinned and is_interval(poll):
            self.poll_seconds = float(poll)
        if take_commands:
            self._take(answer.get("commands"))
            self._progress()
        return 0.0 if self.outbox else self.poll_seconds

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set (SIGTERM)."""
        while not stop.is_set():
            try:
                wait = self.poll_once()
            except Exception:  # a bug of ours must not end the service: logged, polled again
                log.exception("poll failed")
                wait = self.poll_seconds
            if wait:
                stop.wait(wait)

    # commands ------------------------------------------------------------------------------------
    def _take(self, commands: Any) -> None:
        if not isinstance(commands, list):
            return
        for raw in commands:
            command_id = raw.get("commandId") if isinstance(raw, dict) else None
            if not isinstance(command_id, str) or not command_id:
                log.error("command without a commandId ignored: %.200r", raw)
                continue
            if command_id in self.finished or command_id in self.open:
                continue
            try:
                self.open[command_id] = _parse(raw)
            except BadCommand as error:
                self._finish(command_id, ok=False, error=f"bad command: {error}")
            else:
                log.info("command %s: %s %s", command_id, raw.get("verb"), raw.get("node"))

    def _progress(self) -> None:
        for command in list(self.open.values()):
            try:
                detail = self._step(command)
            except UnknownNode:
                self._finish(command.command_id, ok=False, error="unknown node")
            except SlurmError as error:
                self._finish(command.command_id, ok=False, error=str(error) or "slurm command failed")
            except Exception as error:  # one bad command must never stop the agent: it becomes a result
                log.exception("command %s failed", command.command_id)
                self._finish(command.command_id, ok=False, error=f"agent error: {error!r}")
            else:
                if detail is not None:
                    self._finish(command.command_id, ok=True, detail=detail)

    def _step(self, command: Command) -> Optional[Dict[str, Any]]:
        """The command's detail once done; None to hold it open until the next poll."""
        late = self.client.server_now() >= command.deadline
        if command.verb == "resume":
            return self._resume(command, late)
        if late:
            raise SlurmError("deadline")
        self.slurm.check(command.node)
        if command.verb == "drain":
            # what the drain overwrites: an operator's drain (and its reason) is set again after a reboot
            before = self.slurm.node(command.node)
            self.slurm.drain(command.node, command.reason)
            previous = {"state": before["state"], "reason": before["reason"]}
            return {"node": self.slurm.node(command.node), "previous": previous}
        if command.verb == "requeue":
            requeued: List[str] = []
            refused: List[Dict[str, str]] = []
            for job in self.slurm.jobs_on(command.node):
                try:
                    self.slurm.requeue(job)
                except SlurmError as error:
                    refused.append({"job": job, "error": str(error)[:300]})
                else:
                    requeued.append(job)
            node = self.slurm.node(command.node)
            return {"requeued": requeued, "notRequeued": refused[:MAX_REFUSED], "node": node}
        # await_idle
        if self.slurm.jobs_on(command.node):
            return None
        return {"node": self.slurm.node(command.node)}

    def _resume(self, command: Command, late: bool) -> Optional[Dict[str, Any]]:
        try:
            return self._try_resume(command, late)
        except SlurmError as error:
            # slurmctld restarting or reconfiguring (a node joining) refuses its clients for a moment:
            # the command is held open and tried again at the next poll, until its deadline
            if late or isinstance(error, UnknownNode) or not TRANSIENT.search(str(error)):
                raise
            return None

    def _try_resume(self, command: Command, late: bool) -> Optional[Dict[str, Any]]:
        # a replaced node joins Slurm some time after SageMaker says Running: wait for it to be listed
        # and answering, then resume it only if Slurm holds it out (DOWN, DRAIN, FAIL), once. Slurm marks
        # a resumed node NOT_RESPONDING until its next ping: the result waits for that answer too.
        node = command.node
        if not NODE_NAME.match(node):
            raise UnknownNode()
        if node not in self.slurm.node_names():
            if late:
                raise UnknownNode()
            return None
        view = self.slurm.node(node)
        flags = state_flags(view["state"])
        held_out = flags[0] == "DOWN" or "DRAIN" in flags or "FAIL" in flags
        resumed = self._resumed.get(command.command_id, 0)
        # Once resumed, a node is resumed again only if Slurm marked it rebooted after that (slurmd's
        # registration can reach slurmctld after the resume): that reason says nothing but "it rebooted".
        again = 0 < resumed < MAX_RESUMES and view["reason"].startswith(REBOOTED)
        if held_out and "NOT_RESPONDING" not in flags and (not resumed or again):
            if not again and not view["reason"].startswith(command.expect_reason):
                raise SlurmError(
                    f"the node no longer matches: {view['state']} with reason {view['reason']!r}, "
                    f"not {command.expect_reason!r}: left as it is"
                )
            self.slurm.resume(node)
            self._resumed[command.command_id] = resumed + 1
            view = self.slurm.node(node)
            flags = state_flags(view["state"])
        # UNKNOWN: slurmctld has not heard from the node since it (re)started; it says nothing yet
        if "NOT_RESPONDING" in flags or flags[0] == "UNKNOWN":
            if late:
                raise SlurmError(f"deadline: the node is still {view['state']}")
            return None
        return {"node": view}

    def _finish(
        self,
        command_id: str,
        *,
        ok: bool,
        error: Optional[str] = None,
        detail: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.open.pop(command_id, None)
        self._resumed.pop(command_id, None)
        self.finished[command_id] = None
        while len(self.finished) > REMEMBERED_COMMANDS:
            self.finished.popitem(last=False)
        self.outbox.append(
            {"commandId": command_id, "ok": ok, "error": error and error[:MAX_ERROR], "detail": detail or {}}
        )
        log.info("command %s done: ok=%s%s", command_id, ok, f" ({error})" if error else "")

    def _finished_jobs(self) -> Batch:
        if self.jobs is None or self._monotonic() < self._jobs_paused_until:
            return EMPTY
        self.jobs.min_interval = JOBS_EVERY_POLLS * self.poll_seconds
        return self.jobs.read()

    def _node_views(self) -> List[Dict[str, Any]]:
        try:
            return self.slurm.nodes()
        except Exception as error:  # noqa: BLE001 (still a heartbeat: the agent alive, Slurm silent)
            log.error("cannot read Slurm's nodes: %s", error)
            return []


def _parse(raw: Mapping[str, Any]) -> Command:
    verb = raw.get("verb")
    if verb not in VERBS:
        raise BadCommand(f"verb {verb!r} is not one of {', '.join(VERBS)}")
    node = raw.get("node")
    if not isinstance(node, str):
        raise BadCommand("node missing")
    reason = raw.get("reason") or ""
    if verb == "drain":
        # Slurm requires a reason to drain; one line of printable text, passed as one argv element
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise BadCommand(f"drain needs a reason of 1-{MAX_REASON} characters")
        if not reason.isprintable():
            raise BadCommand("the reason has control characters")
    deadline = raw.get("deadline")
    try:
        parsed = datetime.fromisoformat(str(deadline).replace("Z", "+00:00"))
    except ValueError:
        raise BadCommand(f"deadline {deadline!r} is not an ISO time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    expect = raw.get("expect") or {}
    expect_reason = expect.get("reasonPrefix", "") if isinstance(expect, dict) else None
    if not isinstance(expect_reason, str):
        raise BadCommand("expect must be an object whose reasonPrefix is a string")
    return Command(raw["commandId"], verb, node, str(reason), parsed, expect_reason)


def _iso(moment: datetime) -> str:
    return (
        moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )
