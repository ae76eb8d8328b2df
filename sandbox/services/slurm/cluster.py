"""One real Slurm cluster on this machine: a slurmctld and one ``slurmd -N <node>`` per worker node.

Debian's Slurm 22.05 (``make slurm``). Everything lives under one work directory the caller owns
(slurm.conf, state, spool, logs, the fake GPU devices) and is removed by ``stop()``. Every daemon is
our child (``-D``, its own session), and ``stop()`` also kills what they spawned (slurmstepd, job
tasks, slurmscriptd), found by their open files under the work directory; an ``atexit`` hook stops
any cluster still running when the process ends.

Why these choices (docs/sandbox.md, "Real Slurm"):
- Static nodes in slurm.conf, and a slurmctld restart (state saved, jobs kept) to add or remove one.
  22.05's dynamic nodes (``scontrol create`` / ``slurmd -Z``) ignore a node's ``Port`` (the controller
  dials SlurmdPort), so many slurmd on one address cannot be dynamic; and they show ``DYNAMIC_NORM`` in
  the node's state, which HyperPod's static nodes never do.
- Each slurmd has its own ``Port`` on 127.0.0.1 (``CommunicationParameters=NoInAddrAny`` binds it to
  loopback); slurmctld binds every interface (22.05 has no setting for it) with ``AuthType=auth/none``:
  a development machine's firewall is what keeps it local.
- Fake GPUs: ``gres.conf`` needs a ``File`` per GPU (22.05 drops a file-less gpu GRES), and the file must
  be a character device: symlinks to /dev/null under the work directory.
- A reboot restarts slurmd with ``-b`` ("report node rebooted when daemon restarted", meant for testing):
  on one shared kernel the boot time never changes, so without it Slurm could not see a reboot; with it
  slurmctld itself sets DOWN "Node unexpectedly rebooted" as it does for a real reboot (ReturnToService=1).
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from sandbox.services.slurm.accounting import SlurmDbd, missing_accounting
from sandbox.services.slurm.processes import kill_using, spawn

SLURMCTLD: Final = "slurmctld"
SLURMD: Final = "slurmd"
CLIENT_TOOLS: Final = ("sinfo", "squeue", "sbatch", "scontrol")
INSTALL_HINT: Final = (
    "install it with `sudo make slurm` (Debian's slurmctld, slurmd, slurm-client, slurmdbd, mariadb-server)"
)
DEFAULT_PARTITION: Final = "dev"
REBOOTED: Final = "Node unexpectedly rebooted"  # slurmctld's reason for a node whose boot time moved
# a job's end states (scontrol's JobState): it left its nodes and Slurm's accounting has it
FINISHED_STATES: Final = frozenset(
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
Accounting = Literal["jobcomp", "slurmdbd"]
_START_SECONDS: Final = 10.0  # a daemon that is not answering by then failed to start
_STOP_SECONDS: Final = 5.0  # slurmctld saves its state on SIGTERM; then SIGKILL
_MAX_WORKDIR: Final = 44  # 108 (sun_path) - "/spool/" - "ip-255-255-255-255/" - "<node>_<job>.<step>"


class SlurmError(RuntimeError):
    """A Slurm daemon did not start or a command failed; the message names its log."""


def missing_slurm() -> list[str]:
    """The Slurm programs this machine lacks, accounting's too (empty: real Slurm can run here)."""
    missing = [tool for tool in (SLURMCTLD, SLURMD, *CLIENT_TOOLS) if shutil.which(tool) is None]
    return missing + [tool for tool in missing_accounting() if tool not in missing]


@dataclass
class SlurmNode:
    name: str  # HyperPod's Slurm node name: the first label of PrivateDnsHostname (ip-10-1-2-3)
    gpus: int
    partitions: tuple[str, ...] = (DEFAULT_PARTITION,)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    stopped_at: float = field(default=0.0)  # monotonic time slurmd last stopped (reboot detection)


class SlurmCluster:
    """A real Slurm cluster under ``workdir``: ``start()``, then add / stop / reboot / remove nodes."""

    def __init__(
        self,
        name: str,
        workdir: Path | str,
        *,
        slurmd_timeout: int = 10,
        gres: bool = True,
        accounting: Accounting = "jobcomp",
    ) -> None:
        self.name = name
        # where Slurm records finished jobs (what the agent reports for chargeback): the job completion
        # log (jobcomp/filetxt, no database) or slurmdbd with its MariaDB (sacct; accounts enforced)
        self.accounting: Accounting = accounting
        self._dbd: SlurmDbd | None = None
        # gpu GRES in slurm.conf / gres.conf for the nodes' GPUs. Whether AWS's HyperPod slurm.conf has
        # them is unverified (docs/sandbox.md): False configures none (every node's gpu count 0)
        self.gres = gres
        self.workdir = Path(workdir).resolve()
        # Slurm's own timers run on wall time, not the sandbox clock: a slurmd that stopped answering is
        # DOWN* after about this many seconds (HyperPod's value is not published; Slurm's default is 300)
        self.slurmd_timeout = slurmd_timeout
        self.nodes: dict[str, SlurmNode] = {}
        self._controller: subprocess.Popen[bytes] | None = None
        self._controller_port = 0
        self._dbd_port = 0
        self._lock = threading.RLock()
        self._started = False

    # ------------------------------------------------------------------ paths
    @property
    def conf(self) -> Path:
        """slurm.conf: ``SLURM_CONF=<this> sinfo`` talks to this cluster."""
        return self.workdir / "slurm.conf"

    @property
    def jobcomp_log(self) -> Path:
        """The job completion log (jobcomp/filetxt): one line per finished job, as slurmctld writes it."""
        return self.workdir / "jobcomp.log"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _log(self, daemon: str) -> Path:
        return self.workdir / "log" / f"{daemon}.log"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> SlurmCluster:
        """Write the configuration and start slurmctld (no nodes yet)."""
        missing = missing_slurm()
        if missing:
            raise SlurmError(f"Slurm is not installed ({', '.join(missing)} missing): {INSTALL_HINT}")
        if len(str(self.workdir)) > _MAX_WORKDIR:
            # slurmstepd's Unix sockets: <workdir>/spool/<node>/<node>_<job>.<step>, 108 bytes at most
            raise SlurmError(
                f"work directory {self.workdir} is too long for Slurm's sockets (at most {_MAX_WORKDIR} "
                "characters): use a short one, e.g. tempfile.mkdtemp(prefix='slurm-')"
            )
        with self._lock:
            if self._started:
                return self
            for sub in ("state", "spool", "log", "dev"):
                (self.workdir / sub).mkdir(parents=True, exist_ok=True)
            # another user's job (``submit(user=...)``) execs its script from the spool directory below
            for traversed in (self.workdir, self.workdir / "spool"):
                traversed.chmod(0o711)
            self._controller_port = _free_port("0.0.0.0")
            _LIVE.add(self)
            self._started = True
            try:
                if self.accounting == "slurmdbd":
                    self._dbd = SlurmDbd(self.workdir, self.env())
                    self._dbd_port = _free_port("127.0.0.1")
                self._write_conf()
                if self._dbd is not None:
                    self._dbd.start(self._dbd_port, _free_port("127.0.0.1"))
                    # slurmctld registers with slurmdbd under its ClusterName, which must exist there
                    self.run("sacctmgr", "-i", "add", "cluster", _cluster_name(self.name))
                self._start_controller()
            except BaseException:
                self.stop()  # nothing half-started outlives the error (its message quotes the log)
                raise
        return self

    def stop(self) -> None:
        """Stop every daemon and what it spawned, and remove the work directory. Idempotent."""
        with self._lock:
            if not self._started:
                return
            self._started = False
            processes = [n.process for n in self.nodes.values()] + [self._controller]
            for process in processes:
                if process is not None and process.poll() is None:
                    process.kill()
            for process in processes:
                if process is not None:
                    process.wait(_STOP_SECONDS)
            if self._dbd is not None:
                self._dbd.stop()
                self._dbd = None
            kill_using(str(self.workdir))
            self._controller = None
            for node in self.nodes.values():
                node.process = None
            _LIVE.discard(self)
            shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self._started

    # ------------------------------------------------------------------ nodes
    def add_nodes(
        self, nodes: Mapping[str, int], partitions: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        """Add worker nodes (name → GPU count) and start their slurmd. One controller restart for all."""
        with self._lock:
            new = {name: gpus for name, gpus in nodes.items() if name not in self.nodes}
            for name, gpus in new.items():
                names = tuple((partitions or {}).get(name) or (DEFAULT_PARTITION,))
                self.nodes[name] = SlurmNode(name, gpus, names, port=_free_port("127.0.0.1"))
                self._fake_gpus(name, gpus)
            if new:
                self._reconfigure()
            for name in new:
                self.start_node(name)

    def remove_nodes(self, names: Iterable[str]) -> None:
        """Take nodes out of Slurm (their slurmd stops, their entries go; one controller restart)."""
        with self._lock:
            gone = [name for name in names if name in self.nodes]
            for name in gone:
                self.stop_node(name)
                del self.nodes[name]
                shutil.rmtree(self.workdir / "dev" / name, ignore_errors=True)
            if gone:
                self._reconfigure()

    def stop_node(self, name: str) -> None:
        """The instance is gone or unreachable: its slurmd and its jobs' processes die at once
        (SIGKILL, as a crash); Slurm marks the node DOWN* once SlurmdTimeout passes."""
        with self._lock:
            node = self.nodes[name]
            if node.process is not None and node.process.poll() is None:
                node.process.kill()
                node.process.wait(_STOP_SECONDS)
            node.process = None
            kill_using(str(self._log(f"slurmd-{name}")))
            node.stopped_at = time.monotonic()

    def start_node(self, name: str, *, rebooted: bool = False) -> None:
        """Start the node's slurmd; ``rebooted``: it reports a reboot (``-b``) as after an instance's."""
        with self._lock:
            node = self.nodes[name]
            if node.process is not None and node.process.poll() is None:
                return
            if rebooted:
                # slurmctld sees a reboot when the boot time (whole seconds) is later than the node's last
                # message: never start in the second the old slurmd last answered in
                time.sleep(max(0.0, node.stopped_at + 1.1 - time.monotonic()))
            (self.workdir / "spool" / name).mkdir(parents=True, exist_ok=True)
            (self.workdir / "spool" / name).chmod(0o711)
            argv = [SLURMD, "-D", "-f", str(self.conf), "-N", name, *(["-b"] if rebooted else [])]
            previous = self.node_state(name).get("SlurmdStartTime") if rebooted else None
            node.process = spawn(argv, self.env())
            if rebooted:
                self._reboot_seen(name, previous)

    def _reboot_seen(self, name: str, previous_start: str | None) -> None:
        """slurmctld checks a registration for a reboot only when it knew the node before: one that a
        controller restart left UNKNOWN (its slurmd was down then) registers as IDLE. Its reboot then
        gets the state slurmctld gives every other one, set as an operator would."""

        def registered() -> bool:  # the new slurmd's registration (its start time), not the old state
            fields = self.node_state(name)
            return fields.get("SlurmdStartTime") != previous_start and _registered(fields)

        self.wait_for(f"{name} to register", registered, _START_SECONDS)
        fields = self.node_state(name)
        if not fields.get("State", "").startswith("DOWN"):
            # as slurmctld does, a reason already there (a drain's) stays
            reason = fields.get("Reason", "")
            reason = reason if reason and not reason.startswith("Not responding") else REBOOTED
            self.run("scontrol", "update", f"NodeName={name}", "State=DOWN", f"Reason={reason}")

    def reboot_node(self, name: str) -> None:
        """An instance reboot: slurmd (and the jobs on the node) stop, then slurmd starts again and
        reports the reboot, which slurmctld answers with DOWN "Node unexpectedly rebooted"."""
        self.stop_node(name)
        self.start_node(name, rebooted=True)

    def node_names(self) -> list[str]:
        with self._lock:
            return list(self.nodes)

    # ------------------------------------------------------------------ commands
    def run(self, *argv: str, check: bool = True, timeout: float = 30.0) -> str:
        """Run a Slurm client command against this cluster (argv, no shell); its stdout."""
        result = subprocess.run(  # in the work dir: a job's default output file lands there, not in ours
            list(argv),
            env=self.env(),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def node_state(self, name: str) -> dict[str, str]:
        """``scontrol show node``'s fields of one node (State, Reason, Gres…); {} when Slurm lacks it."""
        text = self.run("scontrol", "-o", "show", "node", name, check=False)
        fields: dict[str, str] = {}
        for word in text.split():
            key, sep, value = word.partition("=")
            if sep:
                fields[key] = value
        if "Reason" in fields:  # the reason holds spaces: everything up to " [user@time]"
            reason = text.split("Reason=", 1)[1]
            fields["Reason"] = reason.split(" [", 1)[0].strip()
        return fields if fields.get("NodeName") == name else {}

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
        """Poll ``check()`` until true (a deadline: Slurm's state changes on its own time)."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                nodes = self.run("sinfo", "-h", "-N", "-o", "%N %T %E", check=False, timeout=5).strip()
                logs = self.workdir / "log"
                raise SlurmError(f"{self.name}: timed out waiting for {what}; sinfo {nodes!r} (logs: {logs})")
            time.sleep(0.05)

    # ------------------------------------------------------------------ jobs and accounts
    def add_accounts(self, accounts: Mapping[str, Sequence[str]]) -> None:
        """Slurm accounts (a department each) and the users who may charge them (sacctmgr, slurmdbd only:
        the job completion log records whatever account a job names)."""
        if self._dbd is None:
            return
        for account, users in accounts.items():
            self.run("sacctmgr", "-i", "add", "account", account)
            for user in users:
                self.run("sacctmgr", "-i", "add", "user", user, f"account={account}")

    def submit(
        self,
        account: str | None = None,
        *,
        user: str | None = None,
        nodes: Sequence[str] | int = 1,
        gpus_per_node: int = 0,
        seconds: float = 1.0,
        partition: str | None = None,
    ) -> str:
        """One batch job (``sbatch -A <account>``, as ``user`` via root's ``--uid``) sleeping ``seconds``
        on ``nodes`` (names, or how many); its job id. No output file."""
        placement = (
            ["-N", str(len(nodes)), "-w", ",".join(nodes)]
            if not isinstance(nodes, int)
            else ["-N", str(nodes)]
        )
        argv = [
            # in /: another user's job could not enter the work directory (mkdtemp's mode 700)
            "sbatch", "--parsable", "-o", "/dev/null", "-D", "/", *placement,
            *(["-A", account] if account else []),
            *(["--uid", user] if user else []),
            *([f"--gres=gpu:{gpus_per_node}"] if gpus_per_node else []),
            *(["-p", partition] if partition else []),
            "--wrap", f"sleep {seconds:g}",
        ]  # fmt: skip
        return self.run(*argv).strip().split(";", 1)[0]

    def run_job(
        self,
        account: str | None = None,
        *,
        user: str | None = None,
        nodes: Sequence[str] | int = 1,
        gpus_per_node: int = 0,
        seconds: float = 1.0,
        timeout: float = 60.0,
    ) -> str:
        """``submit``, then ``wait_finished``: the job's id once Slurm has accounted it (the demo's
        department jobs)."""
        job_id = self.submit(account, user=user, nodes=nodes, gpus_per_node=gpus_per_node, seconds=seconds)
        self.wait_finished([job_id], timeout)
        return job_id

    def wait_finished(self, jobs: Sequence[str], timeout: float = 60.0) -> None:
        """Until every job has ended and its record is in Slurm's accounting (the job completion log's
        line, or sacct's row with its end: slurmctld sends it to slurmdbd a moment after the end)."""
        self.wait_for(
            f"jobs {', '.join(jobs)} to finish", lambda: all(self._accounted(job) for job in jobs), timeout
        )

    def _accounted(self, job: str) -> bool:
        if self._dbd is not None:
            out = self.run("sacct", "-n", "-P", "-X", "-j", job, "-o", "State,End", check=False)
            state, _, end = out.strip().partition("|")
            return state.split(" ")[0] in FINISHED_STATES and end not in ("", "Unknown")
        log = self.jobcomp_log
        return log.exists() and any(line.startswith(f"JobId={job} ") for line in log.read_text().splitlines())

    def _accounting_conf(self) -> list[str]:
        tres = ["AccountingStorageTRES=gres/gpu"] if self.gres else []  # AllocTRES / Tres then carry the GPUs
        if self.accounting == "slurmdbd":
            return [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=127.0.0.1",
                f"AccountingStoragePort={self._dbd_port}",
                # a job under an account its user may not charge is refused, as on a department's cluster
                "AccountingStorageEnforce=associations",
                *tres,
                "JobCompType=jobcomp/none",
            ]
        # slurmctld refuses AccountingStorageTRES=gres/gpu without slurmdbd ("slurmdbd is required to run
        # with TRES gres/gpu"): the job completion log's Tres never has the GPUs
        return [
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp_log}",
        ]

    # ------------------------------------------------------------------ internals
    def _fake_gpus(self, name: str, gpus: int) -> None:
        devices = self.workdir / "dev" / name
        devices.mkdir(parents=True, exist_ok=True)
        for index in range(gpus):
            link = devices / f"nvidia{index}"
            if not link.is_symlink():
                link.symlink_to("/dev/null")

    def _write_conf(self) -> None:
        work = self.workdir
        lines = [
            f"ClusterName={_cluster_name(self.name)}",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self._controller_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/none",
            "CredType=cred/none",
            "CommunicationParameters=NoInAddrAny",
            "SlurmdParameters=config_overrides",
            "DebugFlags=NO_CONF_HASH",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "SwitchType=switch/none",
            "MpiDefault=none",
            *self._accounting_conf(),
            "JobAcctGatherType=jobacct_gather/none",
            *(["GresTypes=gpu"] if self.gres else []),
            "MailProg=/bin/true",
            # Unverified (docs/sandbox.md): HyperPod's value is not published; 1 returns a node that was
            # DOWN for not responding when it registers again, but not one that rebooted unexpectedly
            "ReturnToService=1",
            f"SlurmdTimeout={self.slurmd_timeout}",
            "SlurmctldTimeout=10",
            "MessageTimeout=5",
            "TreeWidth=65533",
            f"StateSaveLocation={work}/state",
            f"SlurmdSpoolDir={work}/spool/%n",
            f"SlurmctldPidFile={work}/slurmctld.pid",
            f"SlurmdPidFile={work}/spool/%n/slurmd.pid",
            f"SlurmctldLogFile={self._log('slurmctld')}",
            f"SlurmdLogFile={work}/log/slurmd-%n.log",
        ]
        partitions: dict[str, list[str]] = {}
        gres: list[str] = []
        for node in self.nodes.values():
            gpus = node.gpus if self.gres else 0
            gpu_words = f" Gres=gpu:{gpus}" if gpus else ""
            lines.append(
                f"NodeName={node.name} NodeAddr=127.0.0.1 NodeHostname=localhost Port={node.port}"
                f" CPUs={max(1, node.gpus)}{gpu_words} State=UNKNOWN"
            )
            if gpus:
                devices = f"{work}/dev/{node.name}/nvidia[0-{gpus - 1}]"
                gres.append(f"NodeName={node.name} Name=gpu File={devices}")
            for partition in node.partitions:
                partitions.setdefault(partition, []).append(node.name)
        if not partitions:  # slurmctld needs a partition; with MaxNodeCount it may have no node yet
            lines += ["MaxNodeCount=1024", f"PartitionName={DEFAULT_PARTITION} Nodes=ALL Default=YES"]
        for index, (partition, members) in enumerate(partitions.items()):
            default = "YES" if index == 0 else "NO"
            lines.append(f"PartitionName={partition} Nodes={','.join(members)} Default={default}")
        _write_atomically(self.conf, lines)
        _write_atomically(work / "gres.conf", gres)

    def _start_controller(self) -> None:
        self._controller = spawn([SLURMCTLD, "-D", "-f", str(self.conf)], self.env())

        def answering() -> bool:
            if self._controller is None or self._controller.poll() is not None:
                log = self._log("slurmctld")
                tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
                raise SlurmError(f"{self.name}: slurmctld exited; its log ends: {' | '.join(tail)}")
            try:
                return "UP" in self.run("scontrol", "ping", check=False, timeout=2)
            except subprocess.TimeoutExpired:  # something else holds the port: the controller exits
                return False

        self.wait_for("slurmctld", answering, _START_SECONDS)

    def _reconfigure(self) -> None:
        """22.05 adds or removes a node only on a restart: SIGTERM (slurmctld saves its state: jobs,
        node states and reasons), a new slurmctld with the new slurm.conf recovers it."""
        self._write_conf()
        controller = self._controller
        if controller is not None and controller.poll() is None:
            controller.terminate()
            try:
                controller.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                controller.kill()
                controller.wait(_STOP_SECONDS)
        kill_using(str(self._log("slurmctld")))  # its slurmscriptd
        self._start_controller()
        # a restarted slurmctld shows every node UNKNOWN until its slurmd registers again, which it does
        # at the next ping (seconds); a reconfigure asks them all to register now
        self.run("scontrol", "reconfigure", check=False, timeout=10)


_LIVE: set[SlurmCluster] = set()  # started, not stopped: what the atexit hook stops


@atexit.register
def _stop_all() -> None:
    """No daemon outlives the process that started it (a test run killed halfway included)."""
    for cluster in list(_LIVE):
        cluster.stop()


def _write_atomically(path: Path, lines: list[str]) -> None:
    """Readers see the old file or the new one, never half of it: a slurmd asked to reconfigure may be
    reading gres.conf while the next change writes it (a short read: "gres/gpu count reported lower")."""
    draft = path.with_name(path.name + ".new")
    draft.write_text("\n".join(lines) + "\n")
    os.replace(draft, path)


def _registered(fields: Mapping[str, str]) -> bool:
    state = fields.get("State", "UNKNOWN")
    return not state.startswith("UNKNOWN") and "NOT_RESPONDING" not in state


def _cluster_name(name: str) -> str:
    # Slurm's ClusterName: lower case, no dots; at most 40 characters is safe for its state files
    return "".join(c if c.isalnum() else "_" for c in name.lower())[:40] or "sandbox"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
