"""The harness layer: the emulator and the services put together and run as one AWS account.

What belongs here: the ``Sandbox`` (``core``: deploy template.yaml into moto with every simulator,
start, stop, reset), the HTTP endpoint that serves it to boto3 and the CLI (``aws_endpoint``), and the
tests' reusable session stack (``stack``, with ``moto_snapshot`` to reset an account between tests).

What it may import: ``sandbox.services``, ``sandbox.emulator``, moto and the standard library. Never
``sandbox.apps`` (apps → harness → services → emulator → moto; tests/unit/test_import_cycles.py holds
it).
"""
