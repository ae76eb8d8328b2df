"""The Autopilot agent: Autopilot's hands in Slurm, on the cluster's controller node.

Standard library only, Python >= 3.8 (the HyperPod Slurm AMI's python3): it is copied onto the node by a
lifecycle script and must not fetch anything. docs/agent.md says what it does and never does.
"""

VERSION = "1.0.0"
