"""The services layer: simulators of the AWS services (and the cluster software) moto lacks.

What belongs here: one package or module per simulated service — HyperPod (``hyperpod``), Budgets
(``budgets``), SSM sessions (``ssm_sessions``), the Price List API (``pricing``), real Slurm daemons per
cluster (``slurm``), and what they tell each other (``running_instances``). A new simulator goes here,
as its own package.

What it may import: ``sandbox.emulator`` (the seams, the clock, the event bus, interception), moto and
the standard library. Never ``sandbox.harness`` or ``sandbox.apps`` (apps → harness → services →
emulator → moto; tests/unit/test_import_cycles.py holds it).
"""
