"""The agent's finished jobs (agent/autopilot_agent/jobs.py): what Slurm 22.05's sacct and job completion
log print (outputs recorded from the real daemons of sandbox/services/slurm), turned into the control plane's
FinishedJob; the cursor that moves only after a 200; rotation; the per-report cap; the loop around it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from autopilot.models.agent import AgentReport, FinishedJob
from autopilot_agent import jobs as jobs_module
from autopilot_agent.__main__ import state_dir
from autopilot_agent.client import Response
from autopilot_agent.jobs import FinishedJobs, expand_hostlist, month_start, tres_gpus
from autopilot_agent.loop import JOBS_EVERY_POLLS, Agent
from autopilot_agent.slurm import Slurm, SlurmError

from tests.unit.agent_fakes import FakeApi, FakeNode, FakeSlurmCommands, make_client
from tests.unit.test_agent_portable import AGENT, python38

AGENT_DIR = AGENT.parent

# recorded: `sacct -a -X -n -P --noconvert -S ... -E now -s CD,F,TO,CA,NF,PR,OOM,DL -o JobID,Account,User,
# UID,Partition,NodeList,AllocTRES,Start,End,State` against slurmdbd (AccountingStorageTRES=gres/gpu)
SACCT = """\
1|physics|root|0|dev|ip-10-1-0-[11-12]|billing=2,cpu=2,gres/gpu=4,node=2|2026-11-28T00:58:11|2026-11-28T00:58:12|COMPLETED
2|biology|root|0|dev|ip-10-1-0-11|billing=1,cpu=1,node=1|2026-11-28T00:58:11|2026-11-28T00:58:11|COMPLETED
3|physics|nobody|65534|dev|ip-10-1-0-11|billing=1,cpu=1,gres/gpu=1,node=1|2026-11-28T00:58:11|2026-11-28T00:58:11|FAILED
5|biology|root|0|dev|None assigned||2026-11-28T00:58:08|2026-11-28T00:58:08|CANCELLED by 0
4_1|biology|root|0|dev|ip-10-1-0-11|billing=1,cpu=1,node=1|2026-11-28T00:58:11|2026-11-28T00:58:11|COMPLETED
4_2|biology|root|0|dev|ip-10-1-0-12|billing=1,cpu=1,node=1|2026-11-28T00:58:11|2026-11-28T00:58:11|COMPLETED
"""
# recorded: JobCompType=jobcomp/filetxt lines (a job cancelled while pending, one without an account whose
# name holds "x=1", two array tasks), and `scontrol show job -d -o`'s JOB_GRES for those jobs
JOBCOMP = [
    "JobId=3 UserId=root(0) GroupId=root(0) Name=wrap JobState=CANCELLED Partition=dev TimeLimit=UNLIMITED "
    "StartTime=2026-11-28T00:50:24 EndTime=2026-11-28T00:50:24 NodeList=(null) NodeCnt=0 ProcCnt=0 "
    "WorkDir=/tmp/slurm-up5ga9zu ReservationName= Tres=cpu=1,mem=1M,node=1,billing=1 Account= QOS= WcKey= "
    "Cluster=unknown SubmitTime=2026-11-28T00:50:24 EligibleTime=2026-11-28T01:50:24 DerivedExitCode=0:0 "
    "ExitCode=0:0 ",
    "JobId=1 UserId=root(0) GroupId=root(0) Name=my job x=1 JobState=COMPLETED Partition=dev "
    "TimeLimit=UNLIMITED StartTime=2026-11-28T00:50:25 EndTime=2026-11-28T00:50:27 "
    "NodeList=ip-10-1-0-[11-12] NodeCnt=2 ProcCnt=2 WorkDir=/tmp/slurm-up5ga9zu ReservationName= "
    "Tres=cpu=2,mem=2M,node=2,billing=2 Account= QOS= WcKey= Cluster=unknown "
    "SubmitTime=2026-11-28T00:50:24 EligibleTime=2026-11-28T00:50:24 DerivedExitCode=0:0 ExitCode=0:0 ",
    "JobId=4 UserId=root(0) GroupId=root(0) Name=wrap JobState=COMPLETED Partition=dev TimeLimit=UNLIMITED "
    "StartTime=2026-11-28T00:55:52 EndTime=2026-11-28T00:55:52 NodeList=ip-10-1-0-11 NodeCnt=1 ProcCnt=1 "
    "WorkDir=/tmp/slurm-qmz5cms8 ReservationName= Tres=cpu=1,mem=1M,node=1,billing=1 Account=biology QOS= "
    "WcKey= Cluster=unknown SubmitTime=2026-11-28T00:55:49 EligibleTime=2026-11-28T00:55:49 ArrayJobId=2 "
    "ArrayTaskId=1 DerivedExitCode=0:0 ExitCode=0:0 ",
    "JobId=2 UserId=nobody(65534) GroupId=nogroup(65534) Name=wrap JobState=TIMEOUT Partition=gpu "
    "TimeLimit=1 StartTime=2026-11-28T00:55:52 EndTime=2026-11-28T00:56:52 NodeList=ip-10-1-0-12 NodeCnt=1 "
    "ProcCnt=1 WorkDir=/ ReservationName= Tres=cpu=1,mem=1M,node=1,billing=1 Account=physics QOS= WcKey= "
    "Cluster=unknown SubmitTime=2026-11-28T00:55:49 EligibleTime=2026-11-28T00:55:49 ArrayJobId=2 "
    "ArrayTaskId=2 DerivedExitCode=0:0 ExitCode=0:0 ",
]
SHOW_JOB = (
    "JobId=1 JobName=my job x=1 UserId=root(0) GroupId=root(0) JobState=COMPLETED NodeList=ip-10-1-0-[11-12] "
    "TRES=cpu=2,node=2,billing=2 Socks/Node=* CoreSpec=* JOB_GRES=gpu:4   Nodes=ip-10-1-0-[11-12] CPU_IDs=0 "
    "Mem=0 GRES= MinCPUsNode=1\n"
    "JobId=4 ArrayJobId=2 ArrayTaskId=1 JobName=wrap UserId=root(0) JobState=COMPLETED NodeList=ip-10-1-0-11 "
    "CoreSpec=* JOB_GRES=(null)   Nodes=ip-10-1-0-11 CPU_IDs=2 Mem=0 GRES= MinCPUsNode=1\n"
    "JobId=2 ArrayJobId=2 ArrayTaskId=2 JobName=wrap UserId=nobody(65534) JobState=TIMEOUT "
    "CoreSpec=* JOB_GRES=gpu:h100:8   Nodes=ip-10-1-0-12 CPU_IDs=3 Mem=0 GRES= MinCPUsNode=1\n"
)
NOW = 1_795_900_000.0  # 2026-11-28T21:06:40Z: the fake wall clock


@dataclass
class AccountingSlurm:
    """Slurm's accounting commands as 22.05 answers them; any other argv fails the test."""

    config: dict[str, str]
    sacct: str = ""
    show_job: str = ""
    calls: list[list[str]] = field(default_factory=list)
    down: bool = False

    def __call__(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.calls.append(argv)
        if self.down:
            raise SlurmError("sacct: error: Problem talking to the database: Connection refused")
        match argv:
            case ["scontrol", "show", "config"]:
                return "Configuration data as of 2026-11-28T00:50:00\n" + "".join(
                    f"{key:<23} = {value}\n" for key, value in self.config.items()
                )
            case [
                "sacct",
                "-a",
                "-X",
                "-n",
                "-P",
                "--noconvert",
                "-S",
                _,
                "-E",
                "now",
                "-s",
                states,
                "-o",
                fields,
            ]:
                assert states == "CD,F,TO,CA,NF,PR,OOM,DL"
                assert fields == "JobID,Account,User,UID,Partition,NodeList,AllocTRES,Start,End,State"
                return self.sacct
            case ["scontrol", "show", "job", "-d", "-o"]:
                return self.show_job
            case ["scontrol", "show", "hostnames", nodelist]:
                assert nodelist == "gpu[1-2]x[1-2]"
                return "gpu1x1\ngpu1x2\ngpu2x1\ngpu2x2\n"
        raise AssertionError(f"unexpected command: {argv}")

    def sacct_since(self) -> str:
        return [call for call in self.calls if call[0] == "sacct"][-1][7]


SLURMDBD = {"AccountingStorageType": "accounting_storage/slurmdbd", "JobCompType": "jobcomp/none"}


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Slurm prints the node's local time: UTC unless a test says otherwise."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def jobcomp_config(log: Path) -> dict[str, str]:
    return {
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/filetxt",
        "JobCompLoc": str(log),
    }


def reader(slurm: AccountingSlurm, state: Path) -> FinishedJobs:
    return FinishedJobs(Slurm(slurm), str(state), clock=lambda: NOW)


def ids(batch: jobs_module.Batch) -> list[str]:
    return [job["jobId"] for job in batch.jobs]


# sacct ------------------------------------------------------------------------------------------------
def test_sacct_rows_become_the_control_planes_finished_jobs(tmp_path: Path) -> None:
    batch = reader(AccountingSlurm(SLURMDBD, SACCT), tmp_path).read()

    # sorted by end; the job cancelled while pending ("None assigned") is not a job that ran
    assert ids(batch) == ["2", "3", "4_1", "4_2", "1"]
    first, nobody = batch.jobs[-1], batch.jobs[1]
    assert first == {
        "jobId": "1",
        "account": "physics",
        "user": "root",
        "partition": "dev",
        "nodes": ["ip-10-1-0-11", "ip-10-1-0-12"],
        "gpus": 4,
        "cpus": 2,  # AllocTRES cpu=2
        "start": "2026-11-28T00:58:11Z",
        "end": "2026-11-28T00:58:12Z",
        "state": "COMPLETED",
    }
    assert (nobody["user"], nobody["gpus"], nobody["state"]) == ("nobody", 1, "FAILED")
    for job in batch.jobs:
        FinishedJob.model_validate(job)  # every one is what the control plane accepts


def test_sacct_starts_at_the_months_start_and_moves_only_after_commit(tmp_path: Path) -> None:
    slurm = AccountingSlurm(SLURMDBD, SACCT)
    batch = reader(slurm, tmp_path).read()
    # no cursor: the month's start (chargeback's period), minus the lookback for records slurmdbd got late
    expected = time.strftime(
        "%Y-%m-%dT%H:%M:%S", time.gmtime(month_start(NOW) - jobs_module.LOOKBACK_SECONDS)
    )
    assert slurm.sacct_since() == expected

    again = reader(slurm, tmp_path).read()  # not committed (the report was lost): all of it again
    assert ids(again) == ids(batch)

    again.commit()
    after = reader(slurm, tmp_path).read()
    assert after.jobs == []  # same rows: the reported ids are filtered out inside the lookback
    # the newest job sent ended 2026-11-28T00:58:12: the next query starts the lookback before it
    assert slurm.sacct_since() == "2026-11-27T18:58:12"


def test_a_job_slurmdbd_records_late_inside_the_lookback_is_still_reported(tmp_path: Path) -> None:
    slurm = AccountingSlurm(SLURMDBD, SACCT)
    reader(slurm, tmp_path).read().commit()
    late = (
        "9|biology|root|0|dev|ip-10-1-0-12|cpu=1,node=1|2026-11-28T00:40:00|2026-11-28T00:41:00|COMPLETED\n"
    )
    slurm.sacct = SACCT + late  # ended before the cursor's newest job, recorded after it

    batch = reader(slurm, tmp_path).read()

    assert ids(batch) == ["9"]


def test_sacct_reports_at_most_the_cap_and_the_rest_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_module, "MAX_FINISHED_JOBS", 2)
    slurm = AccountingSlurm(SLURMDBD, SACCT)
    seen: list[str] = []
    for _ in range(4):
        batch = reader(slurm, tmp_path).read()
        assert len(batch.jobs) <= 2
        seen += ids(batch)
        batch.commit()

    assert seen == ["2", "3", "4_1", "4_2", "1"]  # each once, in end order, though three share a second


def test_a_job_without_account_or_known_user_is_reported_with_placeholders(tmp_path: Path) -> None:
    slurm = AccountingSlurm(
        SLURMDBD, "7|||1234|dev|gpu7|gres/gpu:h100=8|2026-11-28T01:00:00|2026-11-28T02:00:00|TIMEOUT\n"
    )
    (job,) = reader(slurm, tmp_path).read().jobs

    assert (job["account"], job["user"], job["gpus"]) == ("(none)", "1234", 8)
    FinishedJob.model_validate(job)


def test_a_row_the_control_plane_would_refuse_is_left_out_not_sent(tmp_path: Path) -> None:
    bad = "8|physics|r;oot|0|dev|ip-10-1-0-11|cpu=1|2026-11-28T01:00:00|2026-11-28T02:00:00|COMPLETED\n"
    batch = reader(AccountingSlurm(SLURMDBD, bad + SACCT), tmp_path).read()

    assert ids(batch) == ["2", "3", "4_1", "4_2", "1"]


def test_slurm_times_are_the_nodes_local_time(tmp_path: Path) -> None:
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    (job,) = reader(AccountingSlurm(SLURMDBD, SACCT.splitlines()[0] + "\n"), tmp_path).read().jobs

    assert (job["start"], job["end"]) == ("2026-11-28T05:58:11Z", "2026-11-28T05:58:12Z")  # EST is UTC-5


def test_slurmdbd_down_gives_no_jobs_and_keeps_the_cursor(tmp_path: Path) -> None:
    slurm = AccountingSlurm(SLURMDBD, SACCT)
    source = reader(slurm, tmp_path)
    source.read()
    slurm.down = True

    assert source.read().jobs == []
    assert not (tmp_path / "finished-jobs.json").exists()


# the job completion log ------------------------------------------------------------------------------
def write(log: Path, lines: list[str], mode: str = "a") -> None:
    with log.open(mode) as handle:
        handle.write("".join(line + "\n" for line in lines))


def test_jobcomp_lines_become_finished_jobs_with_gpus_from_slurmctld(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    write(log, JOBCOMP)
    slurm = AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB)

    batch = reader(slurm, tmp_path / "state").read()

    assert ids(batch) == ["1", "2_1", "2_2"]  # array tasks as sacct names them; the cancelled one skipped
    one, task1, task2 = batch.jobs
    assert one == {
        "jobId": "1",
        "account": "(none)",
        "user": "root",
        "partition": "dev",
        "nodes": ["ip-10-1-0-11", "ip-10-1-0-12"],
        "gpus": 4,  # JOB_GRES: the log's Tres has no gres/gpu without slurmdbd
        "cpus": 2,  # ProcCnt=2
        "start": "2026-11-28T00:50:25Z",
        "end": "2026-11-28T00:50:27Z",
        "state": "COMPLETED",
    }
    assert (task1["account"], task1["gpus"]) == ("biology", 0)
    assert (task2["user"], task2["partition"], task2["gpus"], task2["state"]) == (
        "nobody",
        "gpu",
        8,
        "TIMEOUT",
    )
    for job in batch.jobs:
        FinishedJob.model_validate(job)


def test_a_name_or_workdir_with_key_value_text_does_not_move_slurms_fields(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    line = (
        JOBCOMP[1]
        .replace("Name=my job x=1", "Name=a Account=biology b")
        .replace("WorkDir=/tmp/slurm-up5ga9zu", "WorkDir=/home/x Account=chemistry Tres=gres/gpu=0")
    )
    write(log, [line])
    (job,) = reader(AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB), tmp_path / "s").read().jobs

    assert (job["account"], job["nodes"], job["gpus"]) == ("(none)", ["ip-10-1-0-11", "ip-10-1-0-12"], 4)


def test_a_requeued_run_is_not_a_finished_job_its_last_run_is(tmp_path: Path) -> None:
    """jobcomp/filetxt writes a line when a job is requeued (recorded: JobState=PENDING, the run's nodes and
    times), then one when it ends: the last run alone is sent, as sacct (without --duplicates) has it."""
    log = tmp_path / "jobcomp.log"
    requeued = JOBCOMP[1].replace("JobState=COMPLETED", "JobState=PENDING").replace("00:50:27", "00:50:26")
    write(log, [requeued, JOBCOMP[1]])

    (job,) = reader(AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB), tmp_path / "s").read().jobs

    assert (job["jobId"], job["state"], job["end"]) == ("1", "COMPLETED", "2026-11-28T00:50:27Z")


def test_jobcomp_cursor_moves_after_commit_only_and_waits_for_a_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    write(log, JOBCOMP[:2])
    with log.open("a") as handle:
        handle.write(JOBCOMP[2][:50])  # slurmctld still writing this one
    slurm = AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB)
    state = tmp_path / "state"

    assert ids(reader(slurm, state).read()) == ["1"]
    batch = reader(slurm, state).read()  # not committed: again
    assert ids(batch) == ["1"]
    batch.commit()
    assert reader(slurm, state).read().jobs == []

    with log.open("a") as handle:
        handle.write(JOBCOMP[2][50:] + "\n")
    batch = reader(slurm, state).read()
    assert ids(batch) == ["2_1"]
    batch.commit()
    cursor = json.loads((state / "finished-jobs.json").read_text())["jobcomp"]
    assert cursor == {"path": str(log), "inode": log.stat().st_ino, "offset": log.stat().st_size}


def test_a_rotated_log_is_read_to_its_end_then_the_new_one_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    write(log, JOBCOMP[:2])
    slurm = AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB)
    state = tmp_path / "state"
    reader(slurm, state).read().commit()
    write(log, JOBCOMP[2:3])  # written before the rotation, not read yet
    log.rename(tmp_path / "jobcomp.log.1")  # logrotate; slurmctld reopens its JobCompLoc
    write(log, JOBCOMP[3:4], "w")

    source = reader(slurm, state)
    first = source.read()
    first.commit()
    second = source.read()
    second.commit()

    assert (ids(first), ids(second)) == (["2_1"], ["2_2"])
    assert reader(slurm, state).read().jobs == []


def test_a_truncated_log_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    write(log, JOBCOMP)
    slurm = AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB)
    reader(slurm, tmp_path / "s").read().commit()
    write(log, JOBCOMP[2:3], "w")  # copytruncate, then a new job

    assert ids(reader(slurm, tmp_path / "s").read()) == ["2_1"]


def test_jobcomp_cap_stops_at_the_last_line_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs_module, "MAX_FINISHED_JOBS", 1)
    log = tmp_path / "jobcomp.log"
    write(log, JOBCOMP)
    slurm = AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB)
    seen = []
    for _ in range(4):
        batch = reader(slurm, tmp_path / "s").read()
        seen += ids(batch)
        batch.commit()

    assert seen == ["1", "2_1", "2_2"]


def test_no_accounting_no_jobs_and_no_file(tmp_path: Path) -> None:
    slurm = AccountingSlurm(
        {"AccountingStorageType": "accounting_storage/none", "JobCompType": "jobcomp/none"}
    )

    assert reader(slurm, tmp_path).read().jobs == []
    assert [call[0] for call in slurm.calls] == ["scontrol"]


# helpers ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodelist", "names"),
    [
        ("ip-10-1-0-11", ["ip-10-1-0-11"]),
        ("ip-10-1-0-[11-12,15]", ["ip-10-1-0-11", "ip-10-1-0-12", "ip-10-1-0-15"]),
        ("gpu[08-10],login1", ["gpu08", "gpu09", "gpu10", "login1"]),
        ("a[1-2]b", ["a1b", "a2b"]),
        ("gpu[1-2]x[1-2]", None),  # two bracket groups: Slurm's own scontrol expands it
    ],
)
def test_host_lists_expand_as_slurm_does(nodelist: str, names: list[str] | None) -> None:
    assert expand_hostlist(nodelist) == names


def test_a_host_list_the_agent_cannot_expand_goes_to_scontrol(tmp_path: Path) -> None:
    row = "6|physics|root|0|dev|gpu[1-2]x[1-2]|gres/gpu=8|2026-11-28T01:00:00|2026-11-28T02:00:00|COMPLETED\n"
    (job,) = reader(AccountingSlurm(SLURMDBD, row), tmp_path).read().jobs

    assert job["nodes"] == ["gpu1x1", "gpu1x2", "gpu2x1", "gpu2x2"]


def test_gpus_from_tres() -> None:
    assert tres_gpus("billing=2,cpu=2,gres/gpu=4,node=2") == 4
    assert tres_gpus("cpu=2,gres/gpu=4,gres/gpu:h100=4") == 4  # the untyped count is the total
    assert tres_gpus("cpu=2,gres/gpu:a100=2,gres/gpu:h100=4") == 6
    assert tres_gpus("cpu=1,mem=1M,node=1") == 0


# the loop ---------------------------------------------------------------------------------------------
def loop_agent(api: FakeApi, slurm: AccountingSlurm, state: Path, clock: list[float]) -> Agent:
    nodes = FakeSlurmCommands(nodes={"ip-10-1-0-11": FakeNode()})

    def run(argv: Sequence[str]) -> str:
        return (
            slurm(argv) if argv[0] == "sacct" or argv[:3] == ["scontrol", "show", "config"] else nodes(argv)
        )

    source = FinishedJobs(Slurm(run), str(state), clock=lambda: NOW, monotonic=lambda: clock[0])
    return Agent(make_client(api), Slurm(run), 10.0, source, monotonic=lambda: clock[0])


def test_jobs_the_control_plane_refused_for_good_are_logged_and_committed_with_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, clock = FakeApi(), [0.0]
    agent = loop_agent(api, AccountingSlurm(SLURMDBD, SACCT), tmp_path, clock)
    refused = {"jobId": "3", "start": "2026-11-28T00:58:11Z", "reason": "jobs[1].start: the job ran over"}
    answer = {"commands": [], "pollSeconds": 10, "rejectedJobs": [refused]}
    api.failures = [Response(200, {}, json.dumps(answer).encode())]  # the control plane's 200, as is

    agent.poll_once()
    clock[0] += JOBS_EVERY_POLLS * 10.0
    agent.poll_once()

    assert [[job["jobId"] for job in report["jobs"]] for report in api.reports] == [[]]  # not sent again
    assert "refused (not counted)" in caplog.text
    assert "jobs[1].start" in caplog.text


def test_the_report_carries_the_jobs_and_the_cursor_moves_on_its_200(tmp_path: Path) -> None:
    api, clock = FakeApi(), [0.0]
    agent = loop_agent(api, AccountingSlurm(SLURMDBD, SACCT), tmp_path, clock)

    api.failures = [Response(503, {}, b"{}")] * 5  # the report with the jobs is lost
    agent.poll_once()
    clock[0] += JOBS_EVERY_POLLS * 10.0
    agent.poll_once()
    clock[0] += JOBS_EVERY_POLLS * 10.0
    agent.poll_once()

    sent = [[job["jobId"] for job in report["jobs"]] for report in api.reports]
    assert sent == [["2", "3", "4_1", "4_2", "1"], []]  # sent again after the loss, then never again
    for report in api.reports:
        AgentReport.model_validate(report)


def test_finished_jobs_are_read_every_few_polls_not_every_poll(tmp_path: Path) -> None:
    api, clock = FakeApi(), [0.0]
    slurm = AccountingSlurm(SLURMDBD, "")
    agent = loop_agent(api, slurm, tmp_path, clock)
    for _ in range(JOBS_EVERY_POLLS):
        agent.poll_once()
        clock[0] += 10.0
    agent.poll_once()

    assert sum(call[0] == "sacct" for call in slurm.calls) == 2


def test_a_report_refused_for_its_jobs_is_sent_again_without_them(tmp_path: Path) -> None:
    api, clock = FakeApi(), [0.0]
    agent = loop_agent(api, AccountingSlurm(SLURMDBD, SACCT), tmp_path, clock)
    api.failures = [Response(400, {}, b'{"message": "Invalid request body"}')]

    assert agent.poll_once() == 0.0  # at once: the heartbeat must not wait on chargeback
    agent.poll_once()
    clock[0] += 60.0
    agent.poll_once()

    assert [report["jobs"] for report in api.reports] == [[], []]  # paused for JOBS_PAUSE_SECONDS
    assert agent.delivered


def test_the_cursor_lives_in_systemds_state_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/autopilot-agent:/var/lib/other")
    assert state_dir() == "/var/lib/autopilot-agent"  # the unit's first StateDirectory
    monkeypatch.delenv("STATE_DIRECTORY")
    assert state_dir() == "/var/lib/autopilot-agent"


def test_sacct_and_the_log_are_read_the_same_on_python_38(tmp_path: Path) -> None:
    """The node's python3 may be 3.8: the same recorded sacct output and log lines through a real 3.8."""
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 here (pyenv install 3.8): the agent's 3.8 run is not checked")
    log = tmp_path / "jobcomp.log"
    write(log, JOBCOMP)
    script = f"""
import json
from autopilot_agent.jobs import FinishedJobs
from autopilot_agent.slurm import Slurm
answers = {json.dumps({"sacct": SACCT, "show": SHOW_JOB, "log": str(log)})}
def run(argv):
    if argv[:3] == ["scontrol", "show", "config"]:
        source = "AccountingStorageType = accounting_storage/slurmdbd" if answers["db"] else (
            "JobCompType = jobcomp/filetxt\\nJobCompLoc = " + answers["log"])
        return source + "\\n"
    return answers["sacct"] if argv[0] == "sacct" else answers["show"]
out = []
for db in (True, False):
    answers["db"] = db
    out.append(FinishedJobs(Slurm(run), "{tmp_path}/state-" + str(db)).read().jobs)
print(json.dumps(out))
"""
    done = subprocess.run(
        [interpreter, "-c", script],
        env={"PYTHONPATH": str(AGENT_DIR), "TZ": "UTC", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    from_sacct, from_log = json.loads(done.stdout)
    assert from_sacct == reader(AccountingSlurm(SLURMDBD, SACCT), tmp_path / "a").read().jobs
    assert (
        from_log
        == reader(AccountingSlurm(jobcomp_config(log), show_job=SHOW_JOB), tmp_path / "b").read().jobs
    )
