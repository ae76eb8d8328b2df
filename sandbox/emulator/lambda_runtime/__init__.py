"""The template's Lambda functions, run in-process the way the Python Lambda runtime runs them.

Invocations run as Lambda runs them: at once. Each function has a pool of *execution environments*;
an invocation takes an idle one or starts a new one (a cold start: the handler module imported), so
two invocations of one function at the same time run in two environments, and an environment runs
one invocation at a time. Each environment is a thread with its own modules
(``sandbox.emulator.lambda_modules``: the names its CodeUri and layers provide, and Powertools, are per
environment; every function's ``app.py`` is ``app``, a layer's lru_caches and settings are per
environment, as on Lambda), its own ``os.environ`` and its own identity for AWS calls, so nothing is
swapped process-wide and no lock serialises handlers. The function's ``Timeout`` is enforced in wall
time (Lambda work runs at real speed on the sandbox clock): past it the invocation fails with
``Sandbox.Timedout`` and its environment is killed (an exception raised in its thread, so it makes no
further call) and never reused. ``ReservedConcurrentExecutions`` caps the environments busy at once:
one more synchronous invocation gets ``TooManyRequestsException`` (``FunctionThrottled``); an
asynchronous one waits in Lambda's queue and is retried; an SQS batch goes back to its queue.

Environment: each invocation gets its own ``os.environ``, seen only by the thread running it (a
per-thread view installed over the process's mapping, see :class:`_ThreadEnviron`): the host's
variables minus any AWS / Powertools / Lambda configuration, plus what Lambda sets and the
template's variables. No other thread's view changes, and nothing is written back afterwards, so a
host change made meanwhile (a test's monkeypatch teardown) is never undone. Writing the host
environment back was the flaky ``ProfileNotFound: host-profile``: an invocation that started
before a test removed its ``AWS_PROFILE`` restored it when it ended, for every later boto3 client.
Threads a handler starts see the host's environment and modules.

Results are shaped exactly as Lambda returns them: a handler exception becomes FunctionError
``Unhandled`` with an ``errorType``/``errorMessage``/``requestId``/``stackTrace`` payload, so Step
Functions Retry/Catch on custom error names and ``Lambda.*`` work.

The package, by job: results.py (limits, credentials, LambdaContext, InvocationResult, metrics,
throttling, error payloads), environments.py (execution environments and the per-thread
``os.environ``), dispatcher.py (the asynchronous queue), runtime.py (``LambdaRuntime``),
sqs_poller.py (SQS event-source mappings).
"""

from sandbox.emulator.lambda_runtime.dispatcher import AsyncDispatcher
from sandbox.emulator.lambda_runtime.results import (
    EVENT_ENVIRONMENTS,
    INIT_SECONDS,
    MAX_RESPONSE_BYTES,
    SANDBOX_CREDENTIALS,
    SQS_POLLERS,
    FunctionMetrics,
    FunctionThrottled,
    InvocationResult,
    LambdaContext,
    log_group_name,
)
from sandbox.emulator.lambda_runtime.runtime import LambdaRuntime
from sandbox.emulator.lambda_runtime.sqs_poller import SqsEventSourcePoller

__all__ = [
    "EVENT_ENVIRONMENTS",
    "INIT_SECONDS",
    "MAX_RESPONSE_BYTES",
    "SANDBOX_CREDENTIALS",
    "SQS_POLLERS",
    "AsyncDispatcher",
    "FunctionMetrics",
    "FunctionThrottled",
    "InvocationResult",
    "LambdaContext",
    "LambdaRuntime",
    "SqsEventSourcePoller",
    "log_group_name",
]
