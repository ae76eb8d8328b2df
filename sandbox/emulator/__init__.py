"""The emulator layer: moto made to behave as AWS does, where the control plane depends on it.

What belongs here: the seams on moto's backends and the toolkit that writes them (``patching``), the
Step Functions seams (``stepfunctions``: clock, events, JSONata, limits, stop, task timeouts), AWS-call
interception with IAM and faults (``aws_calls``, ``iam_simulation``, ``sigv4``), the deployer of
template.yaml (``deploy``), the Lambda runtime, the local API Gateway, schedules and the clock. Each
answers as an AWS service moto already has would, and nothing more.

What it may import: moto, botocore and the standard library, and itself. Never ``sandbox.services``,
``sandbox.harness`` or ``sandbox.apps`` (apps → harness → services → emulator → moto;
tests/unit/test_import_cycles.py holds it).
"""
