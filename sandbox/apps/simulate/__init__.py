"""Fleet what-if (issue 12): how much training time a healing policy saves, through the real control plane.

``python -m sandbox.apps.simulate`` (``make simulate``) runs clusters of a training job's nodes plus hot
spares in the sandbox on the real template, injects HMA faults at the rates and with the causes of
Meta's Llama 3 run (failures.py, with its sources), models the job (job.py: checkpoints, restarts,
work lost), and compares HyperPod's automatic recovery with Autopilot's reboot-first healing for each
spare count (fleet.py drives the sandbox's frozen clock from event to event). report.py writes
``build/fleet-sim.json``, the table and ``build/fleet-sim.png``. docs/fleet-sim.md has the figures.
"""
