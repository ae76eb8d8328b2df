"""Finished jobs for chargeback, read from Slurm's accounting and reported at least once.

Which source (``scontrol show config``, read again every CONFIG_SECONDS):
- ``sacct`` where slurmdbd runs (AccountingStorageType accounting_storage/slurmdbd): every user's job
  allocations (-a -X) that ended since the cursor, GPUs from AllocTRES ``gres/gpu``;
- else the job completion log (JobCompType jobcomp/filetxt): the lines slurmctld appended to JobCompLoc
  since the cursor, GPUs from ``scontrol show job -d``'s JOB_GRES (the log's Tres has no gres/gpu
  without slurmdbd: slurmctld refuses AccountingStorageTRES=gres/gpu then);
- neither: nothing to report (logged once).

A job is sent as the control plane's FinishedJob (autopilot.models.agent): jobId, account, user,
partition, nodes (expanded), gpus, cpus (sacct's AllocTRES ``cpu``, the log's ProcCnt), start, end
(ISO 8601 UTC), state. A job that never started (no nodes, no start) is skipped. The cursor
(``<state dir>/finished-jobs.json``) moves only when ``Batch.commit`` runs, which the loop calls
after the control plane answered 200 to the report carrying the batch: a lost or refused report is read
again at the next poll (the control plane counts a jobId once).
"""

from __future__ import annotations

import calendar
import json
import logging
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .slurm import NODE_NAME, Slurm, SlurmError, gpu_count

log = logging.getLogger(__name__)

STATE_FILE = "finished-jobs.json"
MAX_FINISHED_JOBS = 2000  # per report, as the control plane accepts (models.agent.MAX_FINISHED_JOBS)
MAX_JOBS_BYTES = 4 * 1024 * 1024  # the report stays far under API Gateway's 10 MB with the node views
MAX_READ_BYTES = 16 * 1024 * 1024  # of the job completion log per poll: the rest at the next
CONFIG_SECONDS = 300.0
# slurmctld hands a job's end to slurmdbd asynchronously (queued while slurmdbd is away): each sacct
# query looks this far behind the cursor, the jobs already reported there filtered out by id
LOOKBACK_SECONDS = 6 * 3600
NO_ACCOUNT = "(none)"  # models.agent.NO_ACCOUNT
# a job's end states; the job completion log also has a line per requeued run (its state then PENDING):
# those are skipped, so both sources report a requeued job's last run, as sacct without --duplicates does
FINISHED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "DEADLINE",
        "BOOT_FAIL",
    }
)
SACCT_STATES = "CD,F,TO,CA,NF,PR,OOM,DL"
SACCT_FIELDS = (
    "JobID",
    "Account",
    "User",
    "UID",
    "Partition",
    "NodeList",
    "AllocTRES",
    "Start",
    "End",
    "State",
)

# what the control plane accepts (autopilot.models.agent.FinishedJob): a job failing these is logged, not sent
_JOB_ID = re.compile(r"^[0-9]+([_+][0-9]+)?$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,127}$")
_TIME = "%Y-%m-%dT%H:%M:%S"
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")
# one line of jobcomp/filetxt (Slurm 22.05's format). Name and WorkDir are the user's free text, the
# other fields Slurm's: the greedy (.*) makes the fields after them the last ones on the line that fit
_JOBCOMP = re.compile(
    r"^JobId=(?P<id>\d+) UserId=(?P<user>.*?)\((?P<uid>\d+)\) GroupId=.*? Name=.* JobState=(?P<state>\S+)"
    r" Partition=(?P<partition>\S*) TimeLimit=\S* StartTime=(?P<start>\S+) EndTime=(?P<end>\S+)"
    r" NodeList=(?P<nodes>\S+) NodeCnt=\d+ ProcCnt=(?P<procs>\d+) WorkDir=.*"
    r" ReservationName=\S* Tres=(?P<tres>\S*)"
    r" Account=(?P<account>\S*) QOS=\S* WcKey=\S* Cluster=\S* SubmitTime=\S+ EligibleTime=\S+"
    r"(?: ArrayJobId=(?P<array>\d+) ArrayTaskId=(?P<task>\d+))?"
    r"(?: HetJobId=(?P<het>\d+) HetJobOffset=(?P<offset>\d+))?"
    r"(?: .*)?$"
)
_SHOW_JOB = re.compile(r"^JobId=(\d+) .*?JOB_GRES=(\S+)")
_BRACKETS = re.compile(r"^([^\[\],]*)\[([0-9,\-]+)\]([^\[\],]*)$")


class Batch(NamedTuple):
    jobs: List[Dict[str, Any]]
    commit: Callable[[], None]  # after the report carrying ``jobs`` got its 200


EMPTY = Batch([], lambda: None)


class FinishedJobs:
    def __init__(
        self,
        slurm: Slurm,
        state_dir: str,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slurm = slurm
        self.state_path = os.path.join(state_dir, STATE_FILE)
        self._clock = clock
        self._monotonic = monotonic
        self._source: Optional[Tuple[str, str]] = None
        self._source_at: Optional[float] = None
        self._warned_none = False
        # sacct and the log are read at most this often (the loop sets it: a few polls), not every poll
        self.min_interval = 0.0
        self._read_at: Optional[float] = None
        self._backlog = False  # the last batch was capped: the rest is read at the next poll

    def read(self) -> Batch:
        """The finished jobs past the cursor (at most MAX_FINISHED_JOBS), every ``min_interval`` seconds
        (sooner while a backlog waits). Never raises: a Slurm or file error is logged and gives an empty
        batch (the heartbeat must not depend on accounting)."""
        now = self._monotonic()
        if self._read_at is not None and now - self._read_at < self.min_interval and not self._backlog:
            return EMPTY
        self._read_at = now
        try:
            source = self._which()
            if source is None:
                return EMPTY
            state = self._load()
            if source[0] == "sacct":
                return self._read_sacct(state)
            return self._read_jobcomp(source[1], state)
        except (SlurmError, OSError, ValueError) as error:
            log.error("cannot read finished jobs: %s", error)
            return EMPTY

    # the source ----------------------------------------------------------------------------------
    def _which(self) -> Optional[Tuple[str, str]]:
        now = self._monotonic()
        if self._source_at is None or now - self._source_at >= CONFIG_SECONDS:
            config = parse_config(self.slurm.run(["scontrol", "show", "config"]))
            if config.get("AccountingStorageType") == "accounting_storage/slurmdbd":
                self._source = ("sacct", "")
            elif config.get("JobCompType") == "jobcomp/filetxt" and config.get("JobCompLoc", "").startswith(
                "/"
            ):
                self._source = ("jobcomp", config["JobCompLoc"])
            else:
                self._source = None
                if not self._warned_none:
                    log.warning(
                        "Slurm keeps no job accounting (no slurmdbd, no jobcomp/filetxt): no finished jobs"
                    )
                    self._warned_none = True
            self._source_at = now
        return self._source

    # sacct ---------------------------------------------------------------------------------------
    def _read_sacct(self, state: Dict[str, Any]) -> Batch:
        cursor = state.get("sacct") if isinstance(state.get("sacct"), dict) else None
        if cursor is None:
            # no cursor yet (a new agent): from the start of the month, chargeback's period
            cursor = {"since": month_start(self._clock()), "seen": {}}
        since = float(cursor["since"])
        seen: Dict[str, float] = dict(cursor.get("seen") or {})
        out = self.slurm.run(
            ["sacct", "-a", "-X", "-n", "-P", "--noconvert", "-S", _local(since - LOOKBACK_SECONDS),
             "-E", "now", "-s", SACCT_STATES, "-o", ",".join(SACCT_FIELDS)]
        )  # fmt: skip
        found: List[Tuple[float, str, Optional[Dict[str, Any]]]] = []
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) != len(SACCT_FIELDS) or parts[0] in seen:
                continue
            row = dict(zip(SACCT_FIELDS, parts))
            end = _epoch(row["End"])
            if end is None:
                continue
            found.append((end, row["JobID"], self._sacct_job(row)))
        found.sort(key=lambda item: (item[0], item[1]))
        taken, rest = _cap(found)
        self._backlog = bool(rest)
        jobs = [job for _, _, job in taken if job is not None]

        def commit() -> None:
            if not taken:
                return  # nothing new: the cursor stays as it is, no write
            kept = dict(seen)
            for end, job_id, _ in taken:  # the jobs sent, and the rows skipped among them (never ran)
                kept[job_id] = end
            new_since = max([since] + [end for end, _, _ in taken])
            kept = {job_id: end for job_id, end in kept.items() if end >= new_since - LOOKBACK_SECONDS}
            self._save("sacct", {"since": new_since, "seen": kept})

        return Batch(jobs, commit)

    def _sacct_job(self, row: Dict[str, str]) -> Optional[Dict[str, Any]]:
        user = row["User"] or row["UID"]
        return self._job(
            job_id=row["JobID"],
            account=row["Account"],
            user=user,
            partition=row["Partition"],
            nodelist=row["NodeList"],
            gpus=tres_gpus(row["AllocTRES"]),
            cpus=tres_cpus(row["AllocTRES"]),
            start=row["Start"],
            end=row["End"],
            state=row["State"].split(" ", 1)[0],  # "CANCELLED by 1000"
        )

    # the job completion log ----------------------------------------------------------------------
    def _read_jobcomp(self, path: str, state: Dict[str, Any]) -> Batch:
        saved = state.get("jobcomp")
        cursor: Dict[str, Any] = saved if isinstance(saved, dict) else {}
        try:
            current = os.stat(path)
        except FileNotFoundError:
            return EMPTY  # slurmctld creates it at the first job's end
        inode = cursor.get("inode") if cursor.get("path") == path else None
        offset = int(cursor.get("offset", 0)) if inode is not None else 0
        reading = path
        if inode is None:
            inode = current.st_ino
        elif inode != current.st_ino:
            # rotated (logrotate renamed it; slurmctld opened a new one): the old file's rest first
            old = _same_inode(path, inode)
            if old is not None and offset < os.stat(old).st_size:
                reading = old
            else:
                if old is None:
                    log.warning("the job completion log was rotated away before it was read to its end: "
                                "jobs past offset %d of the old file are not reported", offset)  # fmt: skip
                inode, offset = current.st_ino, 0
        elif current.st_size < offset:
            log.warning("the job completion log is shorter than the cursor (truncated): read from its start")
            offset = 0
        with open(reading, "rb") as handle:
            handle.seek(offset)
            data = handle.read(MAX_READ_BYTES)
        lines: List[Tuple[int, str]] = []  # (offset after the line, line)
        position = offset
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break  # slurmctld is still writing it
            position += len(raw)
            lines.append((position, raw.decode("utf-8", "replace").rstrip("\n")))
        parsed = [(after, _JOBCOMP.match(line)) for after, line in lines]
        gpus = self._job_gres() if parsed else {}
        found = []
        for after, match in parsed:
            job = None if match is None else self._jobcomp_job(match, gpus)
            found.append((float(after), "", job))
        taken, rest = _cap(found)
        self._backlog = bool(rest) or len(data) == MAX_READ_BYTES or reading != path
        jobs = [job for _, _, job in taken if job is not None]
        # capped: up to the last line taken; else past every whole line read (skipped ones too)
        new_state = {"path": path, "inode": inode, "offset": int(taken[-1][0]) if rest else position}
        if new_state == cursor:
            return Batch(jobs, lambda: None)  # nothing new: no write
        return Batch(jobs, lambda: self._save("jobcomp", new_state))

    def _jobcomp_job(self, match: re.Match[str], gpus: Dict[str, int]) -> Optional[Dict[str, Any]]:
        fields = match.groupdict()
        if fields["state"] not in FINISHED:
            return None  # a requeued run (PENDING again): its job is reported when it ends
        job_id = fields["id"]
        if fields["array"] is not None:
            job_id = f"{fields['array']}_{fields['task']}"  # as sacct prints an array task
        elif fields["het"] is not None:
            job_id = f"{fields['het']}+{fields['offset']}"
        user = fields["user"] if _NAME.match(fields["user"] or "") else fields["uid"]
        return self._job(
            job_id=job_id,
            account=fields["account"],
            user=user,
            partition=fields["partition"],
            nodelist=fields["nodes"],
            gpus=tres_gpus(fields["tres"]) or gpus.get(fields["id"], 0),
            cpus=int(fields["procs"]),
            start=fields["start"],
            end=fields["end"],
            state=fields["state"],
        )

    def _job_gres(self) -> Dict[str, int]:
        """Raw job id -> its GPUs, from slurmctld's jobs (it keeps a finished one MinJobAge, 300 s by
        default). A job gone from it by the time its line is read is sent with gpus 0."""
        try:
            out = self.slurm.run(["scontrol", "show", "job", "-d", "-o"])
        except SlurmError as error:
            log.warning("cannot read the jobs' GPUs: %s", error)
            return {}
        gpus = {}
        for line in out.splitlines():
            match = _SHOW_JOB.match(line)
            if match:
                gpus[match.group(1)] = gpu_count(match.group(2))
        return gpus

    # one job ---------------------------------------------------------------------------------------
    def _job(
        self,
        *,
        job_id: str,
        account: str,
        user: str,
        partition: str,
        nodelist: str,
        gpus: int,
        cpus: Optional[int],
        start: str,
        end: str,
        state: str,
    ) -> Optional[Dict[str, Any]]:
        """The wire job, or None for a job that never ran or that the control plane would refuse."""
        began, ended = _epoch(start), _epoch(end)
        if began is None or ended is None or nodelist in ("", "(null)", "None", "None assigned"):
            return None  # never started (cancelled while pending)
        nodes = self._expand(nodelist)
        account = account or NO_ACCOUNT
        problem = None
        if not _JOB_ID.match(job_id) or len(job_id) > 40:
            problem = "job id"
        elif account != NO_ACCOUNT and not _NAME.match(account):
            problem = "account"
        elif not _NAME.match(user):
            problem = "user"
        elif not nodes or not all(NODE_NAME.match(node) for node in nodes):
            problem = "node list"
        elif ended < began:
            problem = "end before start"
        if problem is not None:
            log.warning(
                "finished job %.40s not reported: its %s is not what the control plane accepts",
                job_id,
                problem,
            )
            return None
        job: Dict[str, Any] = {
            "jobId": job_id,
            "account": account,
            "user": user,
            "partition": partition[:128],
            "nodes": nodes,
            "gpus": min(max(gpus, 0), 1000000),
            "start": _iso(began),
            "end": _iso(ended),
            "state": state[:40],
        }
        if cpus:  # the CPUs Slurm allocated (a CPU node's share is priced by them); unknown: left out
            job["cpus"] = min(cpus, 10000000)
        return job

    def _expand(self, nodelist: str) -> List[str]:
        names = expand_hostlist(nodelist)
        if names is None:  # a form the simple expansion does not know (two bracket groups): Slurm's own
            names = self.slurm.run(["scontrol", "show", "hostnames", nodelist]).split()
        return names

    # the state file ---------------------------------------------------------------------------------
    def _load(self) -> Dict[str, Any]:
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return {}
        except ValueError:
            log.error("%s is not JSON: finished jobs are read again from the start", self.state_path)
            return {}
        return state if isinstance(state, dict) else {}

    def _save(self, source: str, cursor: Dict[str, Any]) -> None:
        state = self._load()
        state[source] = cursor
        os.makedirs(os.path.dirname(self.state_path), exist_ok=True)
        draft = self.state_path + ".new"
        with open(draft, "w", encoding="utf-8") as handle:
            json.dump(state, handle, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(draft, self.state_path)  # a crash leaves the old cursor or the new, never half


def parse_config(text: str) -> Dict[str, str]:
    """``scontrol show config``'s "Key = value" lines."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def tres_cpus(tres: str) -> Optional[int]:
    """The CPUs of a TRES string ("cpu=2,gres/gpu=4,node=1"); None without a cpu count."""
    match = re.search(r"(?:^|,)cpu=(\d+)", tres)
    return int(match.group(1)) if match else None


def tres_gpus(tres: str) -> int:
    """The GPUs of a TRES string ("cpu=2,gres/gpu=4,node=1"): gres/gpu, else the typed ones summed."""
    counts = [(name, int(count)) for name, count in re.findall(r"(?:^|,)(gres/gpu(?::[^=,]+)?)=(\d+)", tres)]
    untyped = [count for name, count in counts if name == "gres/gpu"]
    return untyped[0] if untyped else sum(count for _, count in counts)


def expand_hostlist(nodelist: str) -> Optional[List[str]]:
    """Slurm's host list ("ip-10-1-0-[11-12,15],gpu7") expanded; None for a form it does not handle (more
    than one bracket group in a name), which Slurm's ``scontrol show hostnames`` then expands."""
    names: List[str] = []
    for part in _split_top(nodelist):
        if "[" not in part:
            names.append(part)
            continue
        match = _BRACKETS.match(part)
        if match is None:
            return None
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                return None
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{width}d}{suffix}")
    return names


def _split_top(nodelist: str) -> List[str]:
    """Split at the commas outside brackets."""
    parts, depth, current = [], 0, ""
    for char in nodelist:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    parts.append(current)
    return [part for part in parts if part]


def _cap(
    found: Sequence[Tuple[float, str, Optional[Dict[str, Any]]]],
) -> Tuple[
    List[Tuple[float, str, Optional[Dict[str, Any]]]], List[Tuple[float, str, Optional[Dict[str, Any]]]]
]:
    """The leading entries within MAX_FINISHED_JOBS jobs and MAX_JOBS_BYTES; the rest."""
    count = size = 0
    for index, (_, _, job) in enumerate(found):
        if job is not None:
            size += len(json.dumps(job, separators=(",", ":")))
            count += 1
            if count > MAX_FINISHED_JOBS or (size > MAX_JOBS_BYTES and count > 1):
                return list(found[:index]), list(found[index:])
    return list(found), []


def _same_inode(path: str, inode: int) -> Optional[str]:
    """The rotated copy of ``path`` (same directory, name starting with its name) that is ``inode``."""
    directory, name = os.path.split(path)
    for entry in os.listdir(directory or "."):
        candidate = os.path.join(directory, entry)
        if entry != name and entry.startswith(name):
            try:
                if os.stat(candidate).st_ino == inode:
                    return candidate
            except OSError:
                continue
    return None


def _epoch(text: str) -> Optional[float]:
    """A Slurm time (the node's local time, SLURM_TIME_FORMAT standard) -> epoch seconds; None for
    Unknown / None / anything else."""
    try:
        return time.mktime(time.strptime(text, _TIME))
    except ValueError:
        return None


def _local(epoch: float) -> str:
    return time.strftime(_TIME, time.localtime(epoch))


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def month_start(epoch: float) -> float:
    """00:00 UTC of the first day of ``epoch``'s month (UTC)."""
    moment = datetime.fromtimestamp(epoch, timezone.utc)
    return float(calendar.timegm((moment.year, moment.month, 1, 0, 0, 0)))
