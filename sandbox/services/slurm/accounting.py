"""Slurm accounting for a sandbox cluster: slurmdbd and its MariaDB, both our children, on loopback.

Debian's ``slurmdbd`` and ``mariadb-server`` (``make slurm``). The database is a private one: a data
directory under the cluster's work directory (``mariadb-install-db``), ``mariadbd`` on a Unix socket there
and a free 127.0.0.1 port, a ``slurm`` user slurmdbd logs in with over TCP. slurmdbd reads
``slurmdbd.conf`` next to ``slurm.conf`` (``SLURM_CONF``'s directory), which must be the SlurmUser's
(root here) and mode 600, else it refuses to start. Nothing outlives ``stop()``; the cluster's own stop
kills anything left with a file under its work directory.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from sandbox.services.slurm.processes import spawn

MARIADBD: Final = "mariadbd"
INSTALL_DB: Final = "mariadb-install-db"
MARIADB: Final = "mariadb"
SLURMDBD: Final = "slurmdbd"
ACCOUNTING_TOOLS: Final = (SLURMDBD, MARIADBD, INSTALL_DB, MARIADB, "sacct", "sacctmgr")
ACCOUNTING_HINT: Final = "install them with `sudo make slurm` (Debian's slurmdbd and mariadb-server)"
_DB_USER: Final = "slurm"
_START_SECONDS: Final = 30.0
_STOP_SECONDS: Final = 10.0


class AccountingError(RuntimeError):
    """slurmdbd or its database did not start; the message names the log."""


def missing_accounting() -> list[str]:
    """The accounting programs this machine lacks (empty: slurmdbd can run here)."""
    return [tool for tool in ACCOUNTING_TOOLS if shutil.which(tool) is None]


class SlurmDbd:
    """MariaDB + slurmdbd for one cluster, under ``workdir`` (the cluster's work directory)."""

    def __init__(self, workdir: Path, env: Mapping[str, str]) -> None:
        self.workdir = workdir
        self.env = dict(env)  # SLURM_CONF: slurmdbd.conf is read from its directory
        self.dbd_port = 0
        self.db_port = 0
        self._db: subprocess.Popen[bytes] | None = None
        self._dbd: subprocess.Popen[bytes] | None = None
        self._password = secrets.token_hex(16)  # slurmdbd's database login, in slurmdbd.conf (mode 600)

    @property
    def conf(self) -> Path:
        return self.workdir / "slurmdbd.conf"

    @property
    def _socket(self) -> Path:
        return self.workdir / "db" / "mysql.sock"

    def log(self, daemon: str) -> Path:
        return self.workdir / "log" / f"{daemon}.log"

    def start(self, dbd_port: int, db_port: int) -> None:
        """Create the database, start mariadbd, then slurmdbd (``dbd_port`` is slurm.conf's
        AccountingStoragePort); return once slurmdbd answers."""
        missing = missing_accounting()
        if missing:
            raise AccountingError(
                f"Slurm accounting is not installed ({', '.join(missing)} missing): {ACCOUNTING_HINT}"
            )
        self.dbd_port, self.db_port = dbd_port, db_port
        data = self.workdir / "db" / "data"
        data.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log").mkdir(exist_ok=True)
        _run([INSTALL_DB, "--no-defaults", f"--datadir={data}", "--user=root", "--skip-test-db",
              "--auth-root-authentication-method=normal"], self.log("mariadb-install"))  # fmt: skip
        self._db = spawn(
            [MARIADBD, "--no-defaults", f"--datadir={data}", "--user=root", f"--socket={self._socket}",
             f"--port={db_port}", "--bind-address=127.0.0.1", f"--pid-file={self.workdir / 'db' / 'pid'}",
             f"--log-error={self.log('mariadb')}", "--skip-log-bin", "--innodb-buffer-pool-size=16M"],
            self.env,
        )  # fmt: skip
        self._wait("mariadbd", self._db, self.log("mariadb"), self._sql_answers)
        self._sql(
            f"CREATE USER '{_DB_USER}'@'127.0.0.1' IDENTIFIED BY '{self._password}';"
            f" GRANT ALL ON slurm_acct_db.* TO '{_DB_USER}'@'127.0.0.1';"
        )
        self.conf.write_text(
            "\n".join([
                "AuthType=auth/none",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                f"DbdPort={dbd_port}",
                "SlurmUser=root",
                f"LogFile={self.log('slurmdbd')}",
                f"PidFile={self.workdir / 'slurmdbd.pid'}",
                "StorageType=accounting_storage/mysql",
                "StorageHost=127.0.0.1",
                f"StoragePort={db_port}",
                f"StorageUser={_DB_USER}",
                f"StoragePass={self._password}",
                "StorageLoc=slurm_acct_db",
            ]) + "\n"
        )  # fmt: skip
        self.conf.chmod(0o600)  # slurmdbd refuses a slurmdbd.conf others can read (it holds the password)
        self._dbd = spawn([SLURMDBD, "-D"], self.env)
        self._wait("slurmdbd", self._dbd, self.log("slurmdbd"), self._dbd_answers)

    def stop(self) -> None:
        """slurmdbd, then mariadbd (SIGTERM: both flush; SIGKILL when they do not exit). Idempotent."""
        for process in (self._dbd, self._db):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(_STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(_STOP_SECONDS)
        self._dbd = self._db = None

    # ------------------------------------------------------------------ internals
    def _sql(self, statement: str) -> str:
        result = subprocess.run(
            [MARIADB, "--no-defaults", f"--socket={self._socket}", "-u", "root", "-N", "-e", statement],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if result.returncode != 0:
            raise AccountingError(f"mariadb: {result.stderr.strip()}")
        return result.stdout

    def _sql_answers(self) -> bool:
        try:
            return self._sql("SELECT 1").strip() == "1"
        except AccountingError:
            return False

    def _dbd_answers(self) -> bool:
        # sacctmgr asks slurmdbd itself (the cluster's slurmctld need not run yet)
        result = subprocess.run(
            ["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return result.returncode == 0

    def _wait(
        self, what: str, process: subprocess.Popen[bytes], log: Path, answering: Callable[[], bool]
    ) -> None:
        deadline = time.monotonic() + _START_SECONDS
        while not answering():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
                raise AccountingError(f"{what} did not start; its log ({log}) ends: {' | '.join(tail)}")
            time.sleep(0.1)


def _run(argv: list[str], log: Path) -> None:
    with log.open("ab") as output:
        result = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT, timeout=120, check=False)
    if result.returncode != 0:
        raise AccountingError(f"{argv[0]} exited {result.returncode} (log: {log})")
