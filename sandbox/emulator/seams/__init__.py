"""Every place the sandbox changes moto's behaviour, each a named seam (moto is pinned: 5.2.5).

A seam is installed by ``install(...)`` when a Sandbox starts and removed by ``uninstall()`` when
it stops; each checks, when installed, that the moto code it replaces still has the shape it was
written against (``SeamDrift`` otherwise), and each is covered by tests/sandbox/test_seams.py. The
toolkit a seam is written with (``SeamDrift``, ``expect_signature``, ``Patches``) is
sandbox/emulator/patching.py.

- ``route_lambda_invoke``: moto's no-docker Lambda (LambdaSimpleBackend.invoke) → the in-process
  runtime, for RequestResponse (synchronous, FunctionError on handler errors) and Event (queued,
  retried, dead-lettered) invocations. Step Functions' lambda:invoke, SNS/EventBridge deliveries
  and boto3 ``lambda.invoke`` all arrive here.
- ``deliver_eventbridge_targets``: moto's Rule.send_to_targets raises NotImplementedError for
  Lambda, Step Functions and SNS targets; the seam delivers them (Input/InputPath/InputTransformer
  honoured, asynchronously, target DeadLetterConfig on a failed delivery), and SQS targets too
  (synchronously; moto ignores Input/InputPath) when the queue policy allows the rule's delivery
  (events.amazonaws.com, aws:SourceArn = the rule: sandbox/emulator/aws_calls/resource_policy.py), skips
  DISABLED and schedule rules, and hands every other target (logs, archives, buses, API
  destinations) back to moto.
- ``refuse_aws_event_sources``: moto's PutEvents puts an entry of any Source; EventBridge refuses a
  caller's ``aws.*`` source (NotAuthorizedForSourceException in that entry), so the seam does.
- ``keep_event_account``: moto's default EventBridge input template (EventTemplateParser, used for
  every target moto delivers itself: SQS outside a sandbox, CloudWatch Logs) has no ``account``
  although put_events sets it; the seam adds it, so captured events have EventBridge's shape.
- ``deliver_sns_to_lambda``: moto's SNS→Lambda delivery builds a placeholder event
  ("arn:aws:sns:EXAMPLE"); the seam sends the real-shaped event (topic and subscription ARNs,
  message id, attributes), asynchronously as SNS does, after moto's filter-policy check.
- ``detach_sqs_event_source_mappings``: moto delivers SQS→Lambda inline inside SendMessage, one
  message per invoke, without partial-batch responses; the seam keeps the mapping (List/Get work)
  but detaches it from the queue so the runtime's ``SqsEventSourcePoller`` delivers batches.
- ``name_unnamed_executions``: moto's executing Step Functions backend names an execution started
  without ``name`` "None" (so the second unnamed StartExecution fails ExecutionAlreadyExists and
  ``$$.Execution.Name`` is null); Step Functions generates a UUID name, and so does the seam.
- ``name_aws_sdk_errors``: moto's Step Functions executor names an aws-sdk task's error after the
  lower-case service of the ARN (``sagemaker.ResourceNotFoundException``) unless the service is in
  its ``_SERVICE_ERROR_NAMES`` (DynamoDb, Sfn); Step Functions names it as the AWS SDK for Java v2
  names the service (``SageMaker.ResourceNotFoundException``, ``ResourceGroupsTaggingApi.…``), so
  the seam derives every service's name from botocore's serviceId by that SDK's rule
  (sandbox/emulator/sdk_error_names.py), the one the ASL contract tests hold the ASL's names to.
- ``evaluate_stepfunctions_jsonata``: moto's executor leaves LocalStack's JSONata engine hook unset,
  so every JSONata state and JSONPath ``Assign`` fails with ``TypeError('NoneType' object is not
  callable)``; the seam plugs in jsonata-python with Step Functions' own functions and error names
  (sandbox/emulator/stepfunctions/jsonata.py).
- ``run_stepfunctions_on_sandbox_clock``: moto times ``Wait``, Retry delays and task-token
  ``TimeoutSeconds``/``HeartbeatSeconds`` in wall seconds; the seam runs them, and the timestamps the
  ASL sees, on the sandbox clock (sandbox/emulator/stepfunctions/clock.py).
- ``run_product_code_on_sandbox_clock``: not a moto patch; the layer's ``autopilot.clock.now`` reads
  the sandbox clock in every execution environment (and the host's copy), so records, deadlines and
  decisions share one clock with Step Functions and HyperPod (sandbox/emulator/product_clock.py).
- ``emit_execution_status_events``: moto's Step Functions never sends the "Step Functions Execution
  Status Change" events; the seam puts them on the execution's default bus as a Standard execution
  starts and ends (sandbox/emulator/stepfunctions/events.py).
- ``abort_stopped_executions``: moto's StopExecution leaves an execution waiting for a task token
  RUNNING, and lets a failure raised after the stop end it FAILED; the seam ends it ABORTED at once
  (sandbox/emulator/stepfunctions/stop.py).
- ``apply_stepfunctions_quotas``: moto's executor measures a payload unlike Step Functions, lets
  ``States.ALL`` catch ``States.DataLimitExceeded``, accepts any StartExecution input and grows a
  history without end; the seam applies the 256 KiB payload and 25,000-event history quotas as AWS does
  (sandbox/emulator/stepfunctions/limits.py).
- ``keep_task_failure_cause``: moto's SendTaskFailure handler drops the request's ``cause``, so a task
  failed through its token ends with no cause (the Slurm agent's "node not back in Slurm: DOWN, 4 of 8
  GPUs" would be lost); the seam passes it on to the executing backend, as Step Functions keeps it.
- ``fail_tasks_on_read_timeouts``: moto's executor makes a task's non-service exception
  ``States.Runtime`` (no Retry or Catch matches it); a read timeout (the ``lost_response`` fault)
  fails the task as ``States.TaskFailed`` instead (sandbox/emulator/stepfunctions/task_timeouts.py).
- ``cache_stepfunctions_parse_trees``: moto parses a state machine's ASL with ANTLR at every
  StartExecution; the seam keeps the parse tree per definition string and builds fresh evaluation
  components from it for each execution (sandbox/emulator/stepfunctions/parse_cache.py).
- ``record_aws_calls``: not a moto patch; a botocore "before-call" handler that counts every
  in-process AWS call per "service:Operation" for ``Sandbox.metrics()``.
- ``intercept_aws_calls``: moto's BotocoreStubber (mock_aws's before-send handler) answers every
  in-process call; the seam lets sandbox.emulator.aws_calls answer first (IAM enforcement, faults) with the
  service's own error, and moto never carries out a call answered that way.
- ``serialize_dynamodb_writes``: moto's DynamoDB checks a ConditionExpression and then writes, with
  nothing between the two, so concurrent threads (the sandbox's executions and functions) could both
  pass one condition; DynamoDB applies a conditional write atomically per item. The seam runs every
  write (PutItem, UpdateItem, DeleteItem, TransactWriteItems) under one lock, so a lease capped by a
  condition (``size(leaseHolders) < :cap``) holds under load as it does on AWS. Query and Scan take
  the lock too: moto iterates the table's dict, and a write meanwhile raised "dictionary changed size
  during iteration" from a read (seen in the healing bench), which DynamoDB never does; and every
  DynamoDB request runs under it up to its answer (moto serialises the stored item itself after the
  backend returned: GetItem and BatchGetItem raced updates in place the same way).
- ``back_up_transaction_items``: moto's TransactWriteItems deep-copies every table it names (once per
  item naming it) before writing, to roll back if an item fails; with a state table of a few thousand
  items that copy was a fifth of a long fleet simulation. The seam backs up the items the transaction
  names instead and puts them back if it fails (the tables stay the same objects); runs under the
  DynamoDB lock like every write, so no reader sees the rollback.
- ``hold_elbv2_targets_as_aws``: moto registers any IP in an ``ip`` target group, healthy at once, one
  target per id, and forgets a deregistered one; the seam refuses an IP outside the group's VPC without
  ``AvailabilityZone: all`` (and ``all`` inside it), keys targets by id and port, shows them ``initial``
  until the health checks pass (``unused`` in a group no load balancer uses) and a deregistered one
  ``draining`` for the group's deregistration delay, on the sandbox clock (sandbox/emulator/elbv2_targets.py).
- ``bind_execution_role``: moto's Step Functions executor creates every task's boto3 client with
  ``boto_client_for(region, service, state_credentials)`` and ignores the credentials' role; the
  seam makes that client's calls the execution role's (sandbox.emulator.aws_calls.act_as), so IAM checks
  them against the state machine's policies.

The package, by job: base.py (the installed state every seam shares), lambda_delivery.py, eventbridge.py,
sns.py, stepfunctions.py, elbv2.py, calls.py (interception and counting), dynamodb.py, and registry.py
(``SEAMS`` in order, ``install``, ``uninstall``, ``installed``).
"""

from sandbox.emulator.patching import SeamDrift
from sandbox.emulator.seams.calls import (
    aws_calls,
    deliveries,
    intercept_aws_calls,
    record_aws_calls,
    reset_aws_calls,
)
from sandbox.emulator.seams.dynamodb import back_up_transaction_items, serialize_dynamodb_writes
from sandbox.emulator.seams.elbv2 import hold_elbv2_targets_as_aws
from sandbox.emulator.seams.eventbridge import (
    AWS_SOURCE_REFUSED,
    deliver_eventbridge_targets,
    deliver_to_rule_targets,
    deliver_to_target,
    keep_event_account,
    public_event,
    refuse_aws_event_sources,
    target_input,
)
from sandbox.emulator.seams.lambda_delivery import detach_sqs_event_source_mappings, route_lambda_invoke
from sandbox.emulator.seams.registry import (
    SEAMS,
    active_runtime,
    delivery_errors,
    install,
    installed,
    uninstall,
)
from sandbox.emulator.seams.sns import deliver_sns_to_lambda, sns_lambda_event
from sandbox.emulator.seams.stepfunctions import (
    abort_stopped_executions,
    apply_stepfunctions_quotas,
    bind_execution_role,
    cache_stepfunctions_parse_trees,
    emit_execution_status_events,
    evaluate_stepfunctions_jsonata,
    fail_tasks_on_read_timeouts,
    keep_task_failure_cause,
    name_aws_sdk_errors,
    name_unnamed_executions,
    run_product_code_on_sandbox_clock,
    run_stepfunctions_on_sandbox_clock,
)

__all__ = [
    "AWS_SOURCE_REFUSED",
    "SEAMS",
    "SeamDrift",
    "abort_stopped_executions",
    "active_runtime",
    "apply_stepfunctions_quotas",
    "aws_calls",
    "back_up_transaction_items",
    "bind_execution_role",
    "cache_stepfunctions_parse_trees",
    "deliver_eventbridge_targets",
    "deliver_sns_to_lambda",
    "deliver_to_rule_targets",
    "deliver_to_target",
    "deliveries",
    "delivery_errors",
    "detach_sqs_event_source_mappings",
    "emit_execution_status_events",
    "evaluate_stepfunctions_jsonata",
    "fail_tasks_on_read_timeouts",
    "hold_elbv2_targets_as_aws",
    "install",
    "installed",
    "intercept_aws_calls",
    "keep_event_account",
    "keep_task_failure_cause",
    "name_aws_sdk_errors",
    "name_unnamed_executions",
    "public_event",
    "record_aws_calls",
    "refuse_aws_event_sources",
    "reset_aws_calls",
    "route_lambda_invoke",
    "run_product_code_on_sandbox_clock",
    "run_stepfunctions_on_sandbox_clock",
    "serialize_dynamodb_writes",
    "sns_lambda_event",
    "target_input",
    "uninstall",
]
