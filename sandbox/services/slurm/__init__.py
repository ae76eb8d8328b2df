"""Real Slurm for the sandbox's Slurm clusters (Debian's slurmctld / slurmd 22.05, and slurmdbd with
MariaDB for accounting; ``make slurm``)."""

from sandbox.services.slurm.accounting import ACCOUNTING_HINT, AccountingError, missing_accounting
from sandbox.services.slurm.cluster import INSTALL_HINT, SlurmCluster, SlurmError, missing_slurm

__all__ = [
    "ACCOUNTING_HINT",
    "INSTALL_HINT",
    "AccountingError",
    "SlurmCluster",
    "SlurmError",
    "missing_accounting",
    "missing_slurm",
]
