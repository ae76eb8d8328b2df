"""Real Slurm for the sandbox's Slurm clusters (Debian's slurmctld / slurmd 22.05; ``make slurm``)."""

from sandbox.slurm.cluster import INSTALL_HINT, SlurmCluster, SlurmError, missing_slurm

__all__ = ["INSTALL_HINT", "SlurmCluster", "SlurmError", "missing_slurm"]
