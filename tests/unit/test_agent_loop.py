"""The agent's loop: the report it sends, the verbs it runs (argv exact, names checked against Slurm's list),
commands held open across polls, deadlines, and nothing a command does stopping it."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from datetime import timedelta

import pytest
from autopilot.models.agent import AgentReport, CommandView, Verb
from autopilot.models.records import iso
from autopilot_agent.client import Response
from autopilot_agent.slurm import SlurmError

from tests.unit.agent_fakes import FakeApi, FakeJob, FakeNode, FakeSlurmCommands, make_agent

A, B, C = "ip-10-1-2-3", "ip-10-1-2-4", "ip-10-1-9-9"


@pytest.fixture
def slurm() -> FakeSlurmCommands:
    return FakeSlurmCommands(
        nodes={A: FakeNode(), B: FakeNode("MIXED"), C: FakeNode("DOWN+NOT_RESPONDING", "Not responding")},
        jobs={"41": FakeJob("RUNNING", [A, B]), "42": FakeJob("RUNNING", [B]), "43": FakeJob("PENDING", [])},
    )


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def test_the_report_is_the_designs_shape(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    assert make_agent(api, slurm).poll_once() == 10.0

    (report,) = api.reports
    assert report["agentVersion"] == "1.0.0"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", report["sentAt"])
    assert report["results"] == []
    assert report["nodes"] == [
        {"name": A, "state": "IDLE", "reason": "", "gpus": 8, "jobs": ["41"]},
        {"name": B, "state": "MIXED", "reason": "", "gpus": 8, "jobs": ["41", "42"]},
        {"name": C, "state": "DOWN+NOT_RESPONDING", "reason": "Not responding", "gpus": 8, "jobs": []},
    ]
    assert api.requests[0]["Authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261127/us-west-2/"
    )


def test_drain_runs_scontrol_with_the_reason_as_one_argument(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    agent = make_agent(api, slurm)
    api.command("drain", A, "c1", reason="autopilot op-123: replace; $(reboot)")

    assert agent.poll_once() == 0.0  # a result waits: sent at once
    agent.poll_once()

    assert slurm.actions() == [
        ["scontrol", "update", f"NodeName={A}", "State=DRAIN", "Reason=autopilot op-123: replace; $(reboot)"]
    ]
    assert api.results()["c1"] == {
        "commandId": "c1",
        "ok": True,
        "error": None,
        "detail": {
            "node": {
                "name": A,
                "state": "IDLE+DRAIN",
                "reason": "autopilot op-123: replace; $(reboot)",
                "gpus": 8,
                "jobs": ["41"],
            },
            "previous": {"state": "IDLE", "reason": ""},
        },
    }


def test_drain_reports_the_operators_drain_it_overwrote(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    slurm.nodes[B] = FakeNode("MIXED+DRAIN", "bad IB link, ticket 42")
    agent = make_agent(api, slurm)
    api.command("drain", B, "c1", reason="autopilot op-123: reboot (NvidiaErrorReboot)")

    agent.poll_once()
    agent.poll_once()

    detail = api.results()["c1"]["detail"]
    assert detail["previous"] == {"state": "MIXED+DRAIN", "reason": "bad IB link, ticket 42"}
    assert (detail["node"]["state"], detail["node"]["reason"]) == (
        "MIXED+DRAIN",
        "autopilot op-123: reboot (NvidiaErrorReboot)",
    )


@pytest.mark.parametrize("verb", ["drain", "await_idle", "requeue", "resume"])
@pytest.mark.parametrize(
    "node", ["ip-1;rm -rf /", "ip-10-9-9-9", f"{A},{B}", f"{A} ", "ip-10-1-2-[3-4]", "-h"]
)
def test_a_node_outside_slurms_list_is_refused_before_any_action(
    api: FakeApi, slurm: FakeSlurmCommands, verb: str, node: str
) -> None:
    agent = make_agent(api, slurm)
    api.command(verb, node, "c1", minutes=-1 if verb == "resume" else 60, reason="r")

    agent.poll_once()
    agent.poll_once()

    assert api.results()["c1"]["ok"] is False
    assert api.results()["c1"]["error"] == "unknown node"
    assert slurm.actions() == []
    # not even read with it: only the whole-cluster reads ran
    assert {tuple(call) for call in slurm.calls} <= {
        ("sinfo", "-h", "-N", "-o", "%N"),
        ("scontrol", "show", "node", "-o"),
        ("squeue", "-h", "-o", "%i|%T|%N"),
        ("scontrol", "show", "hostnames", "ip-10-1-2-[3,4]"),
    }


def test_await_idle_is_held_open_across_polls_until_the_node_has_no_running_job(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    api.keep_done = True  # the control plane keeps listing it: the agent must not run it twice
    agent = make_agent(api, slurm)
    api.command("await_idle", B, "c1")
    slurm.jobs["44"] = FakeJob("PENDING", [B])  # pending jobs do not count

    for _ in range(3):
        assert agent.poll_once() == 10.0
    assert api.results() == {}

    slurm.jobs["41"].state = "COMPLETING"  # still on the node
    agent.poll_once()
    assert api.results() == {}

    del slurm.jobs["41"], slurm.jobs["42"]
    assert agent.poll_once() == 0.0
    agent.poll_once()
    agent.poll_once()

    assert [r["commandId"] for report in api.reports for r in report["results"]] == ["c1"]
    assert api.results()["c1"]["ok"] is True
    assert api.results()["c1"]["detail"]["node"]["jobs"] == []
    assert slurm.actions() == []


def test_await_idle_fails_at_its_deadline_on_the_apis_clock(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    agent = make_agent(api, slurm)
    api.command("await_idle", B, "c1", minutes=30)
    agent.poll_once()

    api.now += timedelta(minutes=31)  # the API's Date header: the agent's own clock is not asked
    agent.poll_once()
    agent.poll_once()

    assert api.results()["c1"] == {"commandId": "c1", "ok": False, "error": "deadline", "detail": {}}


def test_requeue_requeues_every_job_on_the_node_and_reports_those_slurm_refused(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    slurm.jobs["42"].requeue = False
    agent = make_agent(api, slurm)
    api.command("requeue", B, "c1")

    agent.poll_once()
    agent.poll_once()

    assert slurm.actions() == [["scontrol", "requeue", "41"], ["scontrol", "requeue", "42"]]
    detail = api.results()["c1"]["detail"]
    assert detail["requeued"] == ["41"]
    assert detail["notRequeued"] == [
        {"job": "42", "error": "Requested operation is presently disabled for job 42"}
    ]
    assert detail["node"]["jobs"] == ["42"]
    assert not any(call[0] == "scancel" for call in slurm.calls)


def test_resume_waits_for_the_node_to_join_and_answer_then_resumes_it(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    successor = "ip-10-1-7-7"
    agent = make_agent(api, slurm)
    api.command("resume", successor, "c1")

    agent.poll_once()  # not in Slurm's list yet: held
    slurm.nodes[successor] = FakeNode("DOWN+NOT_RESPONDING", "Node unexpectedly rebooted")
    agent.poll_once()  # listed but not answering: held
    assert api.results() == {}
    assert slurm.actions() == []

    slurm.nodes[successor] = FakeNode("DOWN", "Node unexpectedly rebooted")
    agent.poll_once()  # resumed; Slurm marks it not responding until it pings the node: held
    agent.poll_once()
    assert api.results() == {}
    slurm.nodes[successor] = FakeNode("IDLE")  # the ping answered
    agent.poll_once()
    agent.poll_once()

    assert slurm.actions() == [["scontrol", "update", f"NodeName={successor}", "State=RESUME"]]  # once
    assert api.results()["c1"]["ok"] is True
    assert api.results()["c1"]["detail"]["node"]["state"] == "IDLE"


def test_resume_of_a_node_slurm_already_schedules_changes_nothing(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    agent = make_agent(api, slurm)
    api.command("resume", B, "c1")

    agent.poll_once()
    agent.poll_once()

    assert slurm.actions() == []
    assert api.results()["c1"]["detail"]["node"]["state"] == "MIXED"


def test_a_resume_expecting_a_reason_lifts_only_that_reason(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    # the sweep's resume names what it saw; an operator drained the node since (the reason is theirs)
    slurm.nodes[A] = FakeNode("DOWN+DRAIN", "RMA 4711: bad HCA")
    slurm.nodes[B] = FakeNode("IDLE+DRAIN", "autopilot op-20261127210000-0a1b2c3d: replace (XidError)")
    agent = make_agent(api, slurm)
    api.command("resume", A, "c1", expect={"reasonPrefix": "Node unexpectedly rebooted"})
    api.command("resume", B, "c2", expect={"reasonPrefix": "autopilot op-20261127210000-0a1b2c3d:"})
    api.command("resume", C, "c3", expect={"reasonPrefix": 7})

    agent.poll_once()
    slurm.nodes[B] = FakeNode("IDLE")  # slurmctld's next ping answered
    agent.poll_once()
    agent.poll_once()

    assert slurm.actions() == [["scontrol", "update", f"NodeName={B}", "State=RESUME"]]
    assert api.results()["c1"]["ok"] is False
    assert api.results()["c1"]["error"].startswith("the node no longer matches: DOWN+DRAIN with reason")
    assert api.results()["c2"]["ok"] is True
    assert api.results()["c3"]["error"].startswith("bad command: expect")


def test_resume_of_a_node_never_answering_fails_at_the_deadline(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    agent = make_agent(api, slurm)
    api.command("resume", C, "c1", minutes=5)
    agent.poll_once()
    api.now += timedelta(minutes=6)
    agent.poll_once()
    agent.poll_once()

    assert api.results()["c1"]["ok"] is False
    assert api.results()["c1"]["error"] == "deadline: the node is still DOWN+NOT_RESPONDING"
    assert slurm.actions() == []


def test_bad_or_failing_commands_become_results_and_the_loop_goes_on(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    agent = make_agent(api, slurm)
    api.command("shell", A, "c1", script="rm -rf /")
    api.command("drain", A, "c2")  # no reason
    api.command("drain", A, "c3", reason="two\nlines")
    api.command("drain", A, "c4", reason="r", deadline="tomorrow")
    api.commands.append("not an object")  # type: ignore[arg-type]
    api.command("drain", A, "c5", reason="late", minutes=-1)

    agent.poll_once()
    agent.poll_once()

    results = api.results()
    assert {k: (v["ok"], v["error"]) for k, v in results.items()} == {
        "c1": (False, "bad command: verb 'shell' is not one of drain, await_idle, requeue, resume"),
        "c2": (False, "bad command: drain needs a reason of 1-1000 characters"),
        "c3": (False, "bad command: the reason has control characters"),
        "c4": (False, "bad command: deadline 'tomorrow' is not an ISO time"),
        "c5": (False, "deadline"),
    }
    assert slurm.actions() == []

    api.command("drain", A, "c6", reason="ok")
    slurm.broken = "boom"  # an error the agent did not plan for
    agent.poll_once()
    slurm.broken = None
    api.command("drain", B, "c7", reason="ok")
    agent.poll_once()
    agent.poll_once()

    assert (api.results()["c6"]["ok"], api.results()["c6"]["error"]) == (
        False,
        "agent error: RuntimeError('boom')",
    )
    assert api.results()["c7"]["ok"] is True


def test_results_are_sent_again_until_the_api_takes_them_and_commands_run_once(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    agent = make_agent(api, slurm)
    api.command("drain", A, "c1", reason="r")
    agent.poll_once()  # drained; the result waits
    api.failures = [Response(503, {}, b'{"message": "Service Unavailable"}')] * 5

    assert agent.poll_once() == 10.0  # undelivered after the client's retries
    assert [result["commandId"] for result in agent.outbox] == ["c1"]
    agent.poll_once()

    assert [r["commandId"] for report in api.reports for r in report["results"]] == ["c1"]
    assert len(slurm.actions()) == 1


def test_a_refused_report_is_retried_on_a_slower_beat(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    agent = make_agent(api, slurm)
    api.failures = [Response(403, {}, b'{"message": "report refused: not the controller group\'s role"}')]

    assert agent.poll_once() == 30.0
    assert agent.delivered is False


def test_slurm_down_still_sends_a_heartbeat(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    slurm.nodes.clear()
    slurm.broken = None

    def unreachable(argv: Sequence[str]) -> str:
        raise SlurmError("slurm_load_node error: Unable to contact slurm controller (connect failure)")

    agent = make_agent(api, slurm)
    agent.slurm.run = unreachable
    agent.poll_once()

    assert api.reports[0]["nodes"] == []


def test_run_stops_when_told(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    agent = make_agent(api, slurm)
    api.poll_seconds = 3600
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,))
    thread.start()
    stop.set()
    thread.join(5)

    assert not thread.is_alive()
    assert len(api.reports) == 1


def test_the_report_fits_what_the_control_plane_accepts(api: FakeApi, slurm: FakeSlurmCommands) -> None:
    # one view past the control plane's limits would get every report refused (400) from then on
    slurm.nodes["n" * 64] = FakeNode()
    slurm.nodes[A] = FakeNode("IDLE+DRAIN", "r" * 1500)
    slurm.jobs = {str(job): FakeJob("RUNNING", [A]) for job in range(1200)}

    make_agent(api, slurm).poll_once()

    views = {view["name"]: view for view in api.reports[0]["nodes"]}
    assert set(views) == {A, B, C}
    assert len(views[A]["reason"]) == 1000
    assert views[A]["jobs"] == [str(job) for job in range(1000)]


def test_the_agent_and_the_control_plane_speak_the_same_shapes(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    """Commands as AgentFunction writes them (CommandView) are understood; every report the agent then
    sends validates as AgentFunction parses it (AgentReport): a drift on either side fails here."""
    deadline = iso(api.now + timedelta(minutes=30))
    api.commands = [
        CommandView(
            command_id="c1", verb=Verb.DRAIN, node=A, reason="autopilot op-1: replace", deadline=deadline
        ).wire(),
        CommandView(command_id="c2", verb=Verb.REQUEUE, node=A, deadline=deadline).wire(),
        CommandView(command_id="c3", verb=Verb.AWAIT_IDLE, node=A, deadline=deadline).wire(),
        CommandView(command_id="c4", verb=Verb.RESUME, node=B, deadline=deadline).wire(),
    ]
    agent = make_agent(api, slurm)

    for _ in range(3):
        agent.poll_once()

    assert {r["commandId"]: r["ok"] for r in api.results().values()} == {
        "c1": True,
        "c2": True,
        "c3": True,
        "c4": True,
    }
    for report in api.reports:
        parsed = AgentReport.model_validate(report)
        assert [node.name for node in parsed.nodes] == [A, B, C]


def test_the_apis_poll_interval_applies_unless_the_config_pins_one(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    api.poll_seconds = 30
    assert make_agent(api, slurm).poll_once() == 30.0  # AgentPollSeconds, from the answer
    assert make_agent(api, slurm, poll_seconds=0.5).poll_once() == 0.5  # pinned (the sandbox's agents)


def test_a_resumed_node_slurm_marks_rebooted_again_is_resumed_again_a_bounded_number_of_times(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    # slurmd's registration after a reboot can reach slurmctld after the resume: DOWN again, same reason
    slurm.nodes[A] = FakeNode("DOWN", "Node unexpectedly rebooted")
    agent = make_agent(api, slurm)
    api.command("resume", A, "c1")
    for _ in range(5):
        agent.poll_once()  # resumed, then Slurm marks it rebooted again
        slurm.nodes[A] = FakeNode("DOWN", "Node unexpectedly rebooted")
    resume = ["scontrol", "update", f"NodeName={A}", "State=RESUME"]
    assert slurm.actions() == [resume] * 3  # MAX_RESUMES: a node rebooting in a loop stays out
    slurm.nodes[A] = FakeNode("IDLE")
    agent.poll_once()
    agent.poll_once()
    assert api.results()["c1"]["ok"] is True


def test_a_resumed_node_drained_by_someone_else_is_not_resumed_again(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    slurm.nodes[A] = FakeNode("DOWN", "Node unexpectedly rebooted")
    agent = make_agent(api, slurm)
    api.command("resume", A, "c1")
    agent.poll_once()
    slurm.nodes[A] = FakeNode("IDLE+DRAIN", "RMA 4711: bad HCA")  # an operator, meanwhile
    agent.poll_once()
    agent.poll_once()
    assert slurm.actions() == [["scontrol", "update", f"NodeName={A}", "State=RESUME"]]
    assert api.results()["c1"]["detail"]["node"]["reason"] == "RMA 4711: bad HCA"


def test_a_resume_holds_on_while_slurmctld_restarts_or_does_not_know_the_node_yet(
    api: FakeApi, slurm: FakeSlurmCommands
) -> None:
    # the sandbox and a reconfiguring controller: clients refused for a moment, then the node UNKNOWN
    slurm.nodes[A] = FakeNode("UNKNOWN")
    agent = make_agent(api, slurm)
    api.command("resume", A, "c1")
    slurm.unavailable = 2
    agent.poll_once()
    agent.poll_once()
    assert api.results() == {}  # held: neither the refused call nor UNKNOWN is an answer
    slurm.nodes[A] = FakeNode("DOWN", "Node unexpectedly rebooted")
    agent.poll_once()
    slurm.nodes[A] = FakeNode("IDLE")
    agent.poll_once()
    agent.poll_once()
    assert api.results()["c1"]["ok"] is True
    assert api.results()["c1"]["detail"]["node"]["state"] == "IDLE"
