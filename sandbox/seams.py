"""Every place the sandbox changes moto's behaviour, each a named seam (moto is pinned: 5.2.5).

A seam is installed by ``install(...)`` when a Sandbox starts and removed by ``uninstall()`` when
it stops; each checks, when installed, that the moto code it replaces still has the shape it was
written against (``SeamDrift`` otherwise), and each is covered by tests/sandbox/test_seams.py. The
toolkit a seam is written with (``SeamDrift``, ``expect_signature``, ``Patches``) is sandbox/patching.py.

- ``route_lambda_invoke``: moto's no-docker Lambda (LambdaSimpleBackend.invoke) → the in-process
  runtime, for RequestResponse (synchronous, FunctionError on handler errors) and Event (queued,
  retried, dead-lettered) invocations. Step Functions' lambda:invoke, SNS/EventBridge deliveries
  and boto3 ``lambda.invoke`` all arrive here.
- ``deliver_eventbridge_targets``: moto's Rule.send_to_targets raises NotImplementedError for
  Lambda, Step Functions and SNS targets; the seam delivers them (Input/InputPath/InputTransformer
  honoured, asynchronously, target DeadLetterConfig on a failed delivery), and SQS targets too
  (synchronously; moto ignores Input/InputPath) when the queue policy allows the rule's delivery
  (events.amazonaws.com, aws:SourceArn = the rule: sandbox/aws_calls/resource_policy.py), skips
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
  (sandbox/sdk_error_names.py), the one the ASL contract tests hold the ASL's names to.
- ``evaluate_stepfunctions_jsonata``: moto's executor leaves LocalStack's JSONata engine hook unset,
  so every JSONata state and JSONPath ``Assign`` fails with ``TypeError('NoneType' object is not
  callable)``; the seam plugs in jsonata-python with Step Functions' own functions and error names
  (sandbox/stepfunctions_jsonata.py).
- ``run_stepfunctions_on_sandbox_clock``: moto times ``Wait``, Retry delays and task-token
  ``TimeoutSeconds``/``HeartbeatSeconds`` in wall seconds; the seam runs them, and the timestamps the
  ASL sees, on the sandbox clock (sandbox/stepfunctions_clock.py).
- ``run_product_code_on_sandbox_clock``: not a moto patch; the layer's ``autopilot.clock.now`` reads
  the sandbox clock in every execution environment (and the host's copy), so records, deadlines and
  decisions share one clock with Step Functions and HyperPod (sandbox/product_clock.py).
- ``emit_execution_status_events``: moto's Step Functions never sends the "Step Functions Execution
  Status Change" events; the seam puts them on the execution's default bus as a Standard execution
  starts and ends (sandbox/stepfunctions_events.py).
- ``abort_stopped_executions``: moto's StopExecution leaves an execution waiting for a task token
  RUNNING, and lets a failure raised after the stop end it FAILED; the seam ends it ABORTED at once
  (sandbox/stepfunctions_stop.py).
- ``apply_stepfunctions_quotas``: moto's executor measures a payload unlike Step Functions, lets
  ``States.ALL`` catch ``States.DataLimitExceeded``, accepts any StartExecution input and grows a
  history without end; the seam applies the 256 KiB payload and 25,000-event history quotas as AWS does
  (sandbox/stepfunctions_limits.py).
- ``keep_task_failure_cause``: moto's SendTaskFailure handler drops the request's ``cause``, so a task
  failed through its token ends with no cause (the Slurm agent's "node not back in Slurm: DOWN, 4 of 8
  GPUs" would be lost); the seam passes it on to the executing backend, as Step Functions keeps it.
- ``fail_tasks_on_read_timeouts``: moto's executor makes a task's non-service exception
  ``States.Runtime`` (no Retry or Catch matches it); a read timeout (the ``lost_response`` fault)
  fails the task as ``States.TaskFailed`` instead (sandbox/stepfunctions_task_timeouts.py).
- ``cache_stepfunctions_parse_trees``: moto parses a state machine's ASL with ANTLR at every
  StartExecution; the seam keeps the parse tree per definition string and builds fresh evaluation
  components from it for each execution (sandbox/stepfunctions_parse_cache.py).
- ``record_aws_calls``: not a moto patch; a botocore "before-call" handler that counts every
  in-process AWS call per "service:Operation" for ``Sandbox.metrics()``.
- ``intercept_aws_calls``: moto's BotocoreStubber (mock_aws's before-send handler) answers every
  in-process call; the seam lets sandbox.aws_calls answer first (IAM enforcement, faults) with the
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
  ``draining`` for the group's deregistration delay, on the sandbox clock (sandbox/elbv2_targets.py).
- ``bind_execution_role``: moto's Step Functions executor creates every task's boto3 client with
  ``boto_client_for(region, service, state_credentials)`` and ignores the credentials' role; the
  seam makes that client's calls the execution role's (sandbox.aws_calls.act_as), so IAM checks
  them against the state machine's policies.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import sys
import threading
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import boto3
import botocore.handlers
from botocore.exceptions import UnknownServiceError
from moto.awslambda.models import LambdaBackend
from moto.awslambda.utils import get_backend
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.botocore_stubber import BotocoreStubber
from moto.core.exceptions import JsonRESTError
from moto.core.models import botocore_stubber
from moto.core.responses import EmptyResult
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table as DynamoTable
from moto.dynamodb.responses import DynamoHandler
from moto.elbv2.models import ELBv2Backend
from moto.events.models import Rule
from moto.events.responses import EventsHandler
from moto.events.utils import EventTemplateParser
from moto.sns.models import Subscription, sns_backends
from moto.sqs.models import sqs_backends
from moto.stepfunctions.parser.asl.component.state.exec.state_task.credentials import StateCredentials
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_aws_sdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.asl.utils import boto_client
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse
from moto.stepfunctions.responses import get_backend as sfn_backend

from sandbox import (
    elbv2_targets,
    product_clock,
    sdk_error_names,
    stepfunctions_clock,
    stepfunctions_events,
    stepfunctions_jsonata,
    stepfunctions_limits,
    stepfunctions_parse_cache,
    stepfunctions_stop,
    stepfunctions_task_timeouts,
)
from sandbox.aws_calls import Principal, act_as, interception, resource_policy
from sandbox.aws_calls.policy import Decision
from sandbox.clock import SandboxClock
from sandbox.lambda_runtime import FunctionThrottled, LambdaRuntime
from sandbox.patching import SeamDrift, expect_signature

# Outside a sandbox (seams.installed without a clock) Step Functions timers keep wall time.
_WALL_CLOCK: Final = SandboxClock(speed=1.0)


@dataclass
class _State:
    runtime: LambdaRuntime | None = None
    undo: list[Callable[[], None]] = field(default_factory=list)
    deliveries: Counter[str] = field(default_factory=Counter)
    delivery_errors: list[str] = field(default_factory=list)
    clock: SandboxClock = field(default_factory=lambda: _WALL_CLOCK)


_state: Final = _State()
_lock: Final = threading.Lock()


def _replace(owner: type, name: str, replacement: Callable[..., Any]) -> None:
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    _state.undo.append(lambda: setattr(owner, name, original))


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key in (name, name.lower()):
        value = headers.get(key)
        if value:
            return str(value)
    return None


# --------------------------------------------------------------------------------------------------
# seam: Lambda invoke → in-process runtime
# --------------------------------------------------------------------------------------------------
def route_lambda_invoke() -> None:
    original = expect_signature(
        LambdaSimpleBackend,
        "invoke",
        ["self", "function_name", "qualifier", "body", "headers", "response_headers"],
        "route_lambda_invoke",
    )

    def invoke(  # noqa: PLR0917 - moto's signature
        self: LambdaSimpleBackend,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> str | bytes | None:
        runtime = _state.runtime
        function = self.get_function(function_name, qualifier)  # ResourceNotFoundException as Lambda
        if runtime is None or not runtime.knows(function.function_name):
            result: str | bytes | None = original(
                self, function_name, qualifier, body, headers, response_headers
            )
            return result
        payload = body if body else b"{}"
        invocation_type = _header(headers, "X-Amz-Invocation-Type") or "RequestResponse"
        if invocation_type == "Event":
            runtime.invoke_async(function.function_name, payload)
            return b""
        if invocation_type == "DryRun":
            return b""
        try:
            outcome = runtime.invoke(function.function_name, payload)
        except FunctionThrottled as throttled:
            raise _TooManyRequests(throttled) from throttled
        if outcome.function_error:
            response_headers["x-amz-function-error"] = outcome.function_error
        response_headers["x-amz-executed-version"] = "$LATEST"
        return outcome.payload

    _replace(LambdaSimpleBackend, "invoke", invoke)


class _TooManyRequests(JsonRESTError):
    """Invoke's 429 past a function's reserved concurrency, with the members botocore's model gives it."""

    code = 429

    def __init__(self, throttled: FunctionThrottled) -> None:
        super().__init__(throttled.error_type, str(throttled))
        self.description = json.dumps({"Type": "User", "message": str(throttled), "Reason": throttled.reason})


# --------------------------------------------------------------------------------------------------
# seam: EventBridge rule targets (Lambda, Step Functions, SNS)
# --------------------------------------------------------------------------------------------------
_OWN_TARGET_SERVICES: Final = frozenset({"lambda", "states", "sns"})
# delivered by the seam too (moto ignores Input/InputPath for them), synchronously: no code runs
_DIRECT_TARGET_SERVICES: Final = frozenset({"sqs"})


def public_event(event: dict[str, Any]) -> dict[str, Any]:
    """moto's internal event (epoch time, ingestion-time) → the JSON EventBridge delivers."""
    published = {key: value for key, value in event.items() if key != "ingestion-time"}
    when = published.get("time")
    if isinstance(when, (int, float)):
        published["time"] = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return published


def target_input(target: dict[str, Any], event: dict[str, Any]) -> str:
    """The payload a target receives: Input, InputPath, InputTransformer or the whole event."""
    if "Input" in target:
        return str(target["Input"])
    if "InputPath" in target:
        value: Any = event
        for part in [p for p in str(target["InputPath"]).removeprefix("$").split(".") if p]:
            value = value.get(part) if isinstance(value, dict) else None
        return json.dumps(value)
    transformer = target.get("InputTransformer")
    if transformer:
        transformed = EventTemplateParser.parse(
            input_template=transformer.get("InputTemplate"),
            input_paths_map=transformer.get("InputPathsMap", {}),
            event=event,  # type: ignore[arg-type]
        )
        return transformed if isinstance(transformed, str) else json.dumps(transformed)
    return json.dumps(event)


def deliver_to_target(rule_arn: str, target: dict[str, Any], event: dict[str, Any]) -> None:
    """Deliver one matched event to one Lambda / Step Functions / SNS target, as EventBridge does."""
    runtime = _state.runtime
    if runtime is None:
        raise RuntimeError("no sandbox is active")
    arn = str(target["Arn"])
    parts = arn.split(":")
    service, region, account = parts[2], parts[3], parts[4]
    payload = target_input(target, event)
    try:
        if service == "lambda":
            get_backend(account, region).invoke(arn, None, payload, {"X-Amz-Invocation-Type": "Event"}, {})
        elif service == "states":
            sfn_backend(account, region).start_execution(arn, name=str(uuid.uuid4()), execution_input=payload)
        elif service == "sns":
            sns_backends[account][region].publish(message=payload, arn=arn)
        elif service == "sqs":
            # EventBridge sends as events.amazonaws.com on the rule's behalf: the queue policy decides
            decision = resource_policy.delivery_decision(
                arn, "sqs:SendMessage", service="events.amazonaws.com", source_arn=rule_arn
            )
            if decision is not Decision.ALLOWED:
                raise PermissionError(
                    f"the queue policy of {arn} refuses {rule_arn}'s delivery ({decision.value})"
                )
            group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
            sqs_backends[account][region].send_message(parts[5], payload, group_id=group_id)
        else:
            raise ValueError(f"{service} targets are delivered by moto, not the sandbox")
        _state.deliveries[f"events->{service}"] += 1
    except Exception as error:  # noqa: BLE001 - a failed delivery goes to the target's DLQ
        _state.delivery_errors.append(f"{rule_arn} -> {arn}: {error!r}")
        traceback.print_exc()
        dead_letter = (target.get("DeadLetterConfig") or {}).get("Arn")
        if dead_letter:
            dlq_parts = str(dead_letter).split(":")
            sqs_backends[dlq_parts[4]][dlq_parts[3]].send_message(
                dlq_parts[5],
                json.dumps(event),
                message_attributes={
                    "RULE_ARN": {"DataType": "String", "StringValue": rule_arn},
                    "TARGET_ARN": {"DataType": "String", "StringValue": arn},
                    "ERROR_MESSAGE": {"DataType": "String", "StringValue": str(error)[:256] or "error"},
                },
            )


def deliver_to_rule_targets(rule: Rule, event: dict[str, Any]) -> None:
    """All of a rule's targets (used for events that matched and for scheduled events)."""
    runtime = _state.runtime
    published = public_event(event)
    for target in list(rule.targets):
        service = str(target.get("Arn", "")).split(":")[2]
        if service in _OWN_TARGET_SERVICES and runtime is not None:
            runtime.dispatcher.submit(_delivery(rule.arn, target, published))
        elif service in _DIRECT_TARGET_SERVICES and runtime is not None:
            deliver_to_target(rule.arn, target, published)
        else:
            single = copy.copy(rule)
            single.targets = [target]
            _ORIGINAL_SEND_TO_TARGETS[0](single, copy.deepcopy(event))


def _delivery(rule_arn: str, target: dict[str, Any], event: dict[str, Any]) -> Callable[[], None]:
    return lambda: deliver_to_target(rule_arn, target, event)


_ORIGINAL_SEND_TO_TARGETS: Final[list[Callable[..., None]]] = []


def deliver_eventbridge_targets() -> None:
    original = expect_signature(
        Rule, "send_to_targets", ["self", "original_event", "transform_input"], "deliver_eventbridge_targets"
    )
    for attribute in ("_send_to_sqs_queue", "_send_to_cw_log_group"):
        if not hasattr(Rule, attribute):
            raise SeamDrift(f"deliver_eventbridge_targets: Rule.{attribute} is gone")
    _ORIGINAL_SEND_TO_TARGETS[:] = [original]

    def send_to_targets(self: Rule, original_event: dict[str, Any], transform_input: bool = True) -> None:
        if _state.runtime is None or not transform_input:
            original(self, original_event, transform_input)
            return
        # A schedule rule has no pattern (moto's empty pattern matches every event); it only fires on time.
        if self.state != "ENABLED" or self.scheduled_expression:
            return
        if not self.event_pattern.matches_event(original_event):  # type: ignore[arg-type]
            return
        deliver_to_rule_targets(self, original_event)

    _replace(Rule, "send_to_targets", send_to_targets)


# --------------------------------------------------------------------------------------------------
# seam: PutEvents refuses the sources AWS reserves for its services
# --------------------------------------------------------------------------------------------------
AWS_SOURCE_REFUSED: Final = {
    "ErrorCode": "NotAuthorizedForSourceException",
    "ErrorMessage": "Not authorized for the source.",
}


def refuse_aws_event_sources() -> None:
    """An entry whose Source starts with ``aws.`` fails NotAuthorizedForSourceException (in Entries,
    counted in FailedEntryCount; the others are put), as EventBridge answers a caller: only AWS
    services emit those. The simulators emit through the backend (sandbox.bus), not this API."""
    original = expect_signature(EventsHandler, "put_events", ["self"], "refuse_aws_event_sources")

    def put_events(self: EventsHandler) -> str:
        entries = self._get_param("Entries") or []
        if not any(str(e.get("Source", "")).startswith("aws.") for e in entries):
            return str(original(self))
        allowed = [e for e in entries if not str(e.get("Source", "")).startswith("aws.")]
        put = iter(self.events_backend.put_events(allowed) if allowed else [])
        results = [
            dict(AWS_SOURCE_REFUSED) if str(e.get("Source", "")).startswith("aws.") else next(put)
            for e in entries
        ]
        failed = sum(1 for r in results if "ErrorCode" in r)
        return json.dumps({"FailedEntryCount": failed, "Entries": results})

    _replace(EventsHandler, "put_events", put_events)


# --------------------------------------------------------------------------------------------------
# seam: moto's default target input keeps the event's "account"
# --------------------------------------------------------------------------------------------------
_TEMPLATE_WITHOUT_ACCOUNT: Final = '"source": "<source>", "region": "<region>"'
_TEMPLATE_WITH_ACCOUNT: Final = '"source": "<source>", "account": "<account>", "region": "<region>"'


def keep_event_account() -> None:
    seam = "keep_event_account"
    original = getattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", None)
    paths = getattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_PATHS_MAP", None)
    if not isinstance(original, str) or _TEMPLATE_WITHOUT_ACCOUNT not in original:
        raise SeamDrift(
            f"{seam}: EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE changed (has it <account>?)"
        )
    if not isinstance(paths, dict) or paths.get("account") != "$.account":
        raise SeamDrift(f"{seam}: EventTemplateParser.DEFAULT_EVENT_INPUT_PATHS_MAP no longer maps account")
    EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = original.replace(
        _TEMPLATE_WITHOUT_ACCOUNT, _TEMPLATE_WITH_ACCOUNT
    )
    _state.undo.append(lambda: setattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", original))


# --------------------------------------------------------------------------------------------------
# seam: SNS → Lambda with the real event shape
# --------------------------------------------------------------------------------------------------
def sns_lambda_event(
    *,
    subscription_arn: str,
    topic_arn: str,
    message: str,
    message_id: str,
    subject: str | None,
    message_attributes: dict[str, Any] | None,
) -> dict[str, Any]:
    host = f"https://sns.{topic_arn.split(':')[3]}.amazonaws.com"
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": subscription_arn,
                "Sns": {
                    "Type": "Notification",
                    "MessageId": message_id,
                    "TopicArn": topic_arn,
                    "Subject": subject,
                    "Message": message,
                    "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                    "SignatureVersion": "1",
                    "Signature": "EXAMPLE",
                    "SigningCertUrl": f"{host}/SimpleNotificationService-sandbox.pem",
                    "UnsubscribeUrl": f"{host}/?Action=Unsubscribe&SubscriptionArn={subscription_arn}",
                    "MessageAttributes": {
                        name: {"Type": value.get("Type"), "Value": value.get("Value")}
                        for name, value in (message_attributes or {}).items()
                    },
                },
            }
        ]
    }


def deliver_sns_to_lambda() -> None:
    original = expect_signature(
        Subscription,
        "publish",
        [
            "self",
            "message",
            "message_id",
            "subject",
            "message_attributes",
            "group_id",
            "deduplication_id",
            "message_structure",
        ],
        "deliver_sns_to_lambda",
    )
    if not hasattr(Subscription, "_parse_message_structure"):
        raise SeamDrift("deliver_sns_to_lambda: Subscription._parse_message_structure is gone")

    def publish(  # noqa: PLR0917 - moto's signature
        self: Subscription,
        message: str,
        message_id: str,
        subject: str | None = None,
        message_attributes: dict[str, Any] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        message_structure: str | None = None,
    ) -> None:
        runtime = _state.runtime
        if self.protocol != "lambda" or runtime is None:
            original(
                self,
                message,
                message_id,
                subject,
                message_attributes,
                group_id,
                deduplication_id,
                message_structure,
            )
            return
        matcher = self._filter_policy_matcher
        if matcher is not None and not matcher.matches(message_attributes, message):
            return
        if message_structure == "json":
            message = self._parse_message_structure(message, self.protocol)
        event = sns_lambda_event(
            subscription_arn=self.arn,
            topic_arn=self.topic.arn,
            message=message,
            message_id=message_id,
            subject=subject,
            message_attributes=message_attributes,
        )
        arn_parts = self.endpoint.split(":")
        get_backend(arn_parts[4], arn_parts[3]).invoke(
            self.endpoint, None, json.dumps(event), {"X-Amz-Invocation-Type": "Event"}, {}
        )
        _state.deliveries["sns->lambda"] += 1

    _replace(Subscription, "publish", publish)


# --------------------------------------------------------------------------------------------------
# seam: SQS event-source mappings are polled by the runtime, not delivered inline by moto
# --------------------------------------------------------------------------------------------------
def detach_sqs_event_source_mappings() -> None:
    original = expect_signature(
        LambdaBackend, "create_event_source_mapping", ["self", "spec"], "detach_sqs_event_source_mappings"
    )

    def create_event_source_mapping(self: LambdaBackend, spec: dict[str, Any]) -> Any:
        mapping: Any = original(self, spec)
        if _state.runtime is not None and str(mapping.event_source_arn).split(":")[2] == "sqs":
            queues = sqs_backends[self.account_id][self.region_name].queues.values()
            for queue in queues:
                if not hasattr(queue, "lambda_event_source_mappings"):
                    raise SeamDrift(
                        "detach_sqs_event_source_mappings: Queue.lambda_event_source_mappings is gone"
                    )
                function_arn = str(mapping.function_arn)
                if queue.lambda_event_source_mappings.get(function_arn) is mapping:
                    del queue.lambda_event_source_mappings[function_arn]
        return mapping

    _replace(LambdaBackend, "create_event_source_mapping", create_event_source_mapping)


# --------------------------------------------------------------------------------------------------
# seam: StartExecution without a name gets a UUID name, as in Step Functions
# --------------------------------------------------------------------------------------------------
def name_unnamed_executions() -> None:
    original = expect_signature(
        StepFunctionsParserBackend,
        "start_execution",
        ["self", "state_machine_arn", "name", "execution_input"],
        "name_unnamed_executions",
    )

    def start_execution(
        self: StepFunctionsParserBackend,
        state_machine_arn: str,
        name: str | None = None,
        execution_input: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        return original(self, state_machine_arn, name or str(uuid.uuid4()), execution_input, *args, **kwargs)

    _replace(StepFunctionsParserBackend, "start_execution", start_execution)


# --------------------------------------------------------------------------------------------------
# seam: aws-sdk task errors carry the service's AWS spelling (SageMaker.X, not sagemaker.X)
# --------------------------------------------------------------------------------------------------
def name_aws_sdk_errors() -> None:
    seam = "name_aws_sdk_errors"
    original = expect_signature(
        StateTaskServiceAwsSdk, "_normalise_service_error_name", ["service_name"], seam, exact=True
    )
    # the method is only worth replacing while moto still names a ClientError with it
    if "_normalise_service_error_name" not in StateTaskServiceAwsSdk._from_error.__code__.co_names:
        raise SeamDrift(f"{seam}: _from_error no longer calls _normalise_service_error_name")
    # moto calls the ARN's service under botocore's name through this table (sfn -> stepfunctions)
    to_boto = getattr(StateTaskService, "_SERVICE_NAME_SFN_TO_BOTO_OVERRIDES", None)
    if not isinstance(to_boto, dict):
        raise SeamDrift(f"{seam}: StateTaskService._SERVICE_NAME_SFN_TO_BOTO_OVERRIDES is gone")

    def normalise_service_error_name(service_name: str) -> str:
        try:  # the Java v2 SDK's name of the service moto calls (sandbox/sdk_error_names.py)
            return sdk_error_names.error_service_name(to_boto.get(service_name, service_name))
        except UnknownServiceError:  # not a botocore service: moto's own name
            return str(original(service_name))

    _replace(
        StateTaskServiceAwsSdk, "_normalise_service_error_name", staticmethod(normalise_service_error_name)
    )


# --------------------------------------------------------------------------------------------------
# seam: SendTaskFailure keeps its cause
# --------------------------------------------------------------------------------------------------
def keep_task_failure_cause() -> None:
    seam = "keep_task_failure_cause"
    expect_signature(StepFunctionResponse, "send_task_failure", ["self"], seam, exact=True)
    expect_signature(
        StepFunctionsParserBackend, "send_task_failure", ["self", "task_token", "error", "cause"], seam
    )

    def send_task_failure(self: StepFunctionResponse) -> Any:
        backend = self.stepfunction_backend
        token, error, cause = (self._get_param(p) for p in ("taskToken", "error", "cause"))
        if isinstance(backend, StepFunctionsParserBackend):
            backend.send_task_failure(token, error=error, cause=cause)
        else:  # moto not executing state machines: its own no-op
            backend.send_task_failure(token, error=error)
        return EmptyResult()

    _replace(StepFunctionResponse, "send_task_failure", send_task_failure)


# --------------------------------------------------------------------------------------------------
# seams: Step Functions JSONata, and its timers on the sandbox clock (each in its own module)
# --------------------------------------------------------------------------------------------------
def evaluate_stepfunctions_jsonata() -> None:
    _state.undo.append(stepfunctions_jsonata.install(now=_state.clock.now))


def run_product_code_on_sandbox_clock() -> None:
    _state.undo.append(product_clock.install(now=_state.clock.now))


def run_stepfunctions_on_sandbox_clock() -> None:
    _state.undo.append(stepfunctions_clock.install(_state.clock))


def emit_execution_status_events() -> None:
    _state.undo.append(stepfunctions_events.install())


def abort_stopped_executions() -> None:
    _state.undo.append(stepfunctions_stop.install())


def fail_tasks_on_read_timeouts() -> None:
    _state.undo.append(stepfunctions_task_timeouts.install())


def apply_stepfunctions_quotas() -> None:
    _state.undo.append(stepfunctions_limits.install())


def cache_stepfunctions_parse_trees() -> None:
    _state.undo.append(stepfunctions_parse_cache.install())


def hold_elbv2_targets_as_aws() -> None:
    seam = "hold_elbv2_targets_as_aws"
    expect_signature(
        ELBv2Backend, "register_targets", ["self", "target_group_arn", "instances"], seam, exact=True
    )
    expect_signature(
        ELBv2Backend, "deregister_targets", ["self", "target_group_arn", "instances"], seam, exact=True
    )
    expect_signature(
        ELBv2Backend, "describe_target_health", ["self", "target_group_arn", "targets"], seam, exact=True
    )
    _state.undo.append(elbv2_targets.install(now=_state.clock.now))


def _use_clock(clock: SandboxClock) -> None:
    previous = _state.clock
    _state.clock = clock
    _state.undo.append(lambda: setattr(_state, "clock", previous))


# --------------------------------------------------------------------------------------------------
# seam: a state machine's task clients make their calls as the execution's role
# --------------------------------------------------------------------------------------------------
def bind_execution_role() -> None:
    seam = "bind_execution_role"
    original = getattr(boto_client, "boto_client_for", None)
    if not callable(original):
        raise SeamDrift(f"{seam}: {boto_client.__name__}.boto_client_for is gone")
    parameters = list(inspect.signature(original).parameters)
    if parameters != ["region", "service", "state_credentials"]:
        raise SeamDrift(f"{seam}: boto_client_for has parameters {parameters}")
    if "role_arn" not in getattr(StateCredentials, "__dataclass_fields__", {}):
        raise SeamDrift(f"{seam}: StateCredentials has no role_arn")

    # One client per (region, service, role), as a long-running service keeps them: moto builds a new
    # boto3 client (a new session, its models, its event hooks) for every aws-sdk task, which was ~8 %
    # of a long simulation's time. Clients are thread-safe; the cache goes with the seam.
    clients: dict[tuple[str, str, str | None], Any] = {}
    lock = threading.Lock()

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        role_arn = getattr(state_credentials, "role_arn", None)
        key = (region, service, str(role_arn) if role_arn else None)
        with lock:
            client = clients.get(key)
        if client is not None:
            return client
        client = original(region=region, service=service, state_credentials=state_credentials)
        if role_arn:  # Step Functions' session names are opaque; so is the sandbox's
            act_as(client, Principal(str(role_arn), uuid.uuid4().hex))
        with lock:
            return clients.setdefault(key, client)

    # every executor module imported the function by name: replace each module's reference
    importers = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("moto.stepfunctions") and getattr(module, "boto_client_for", None) is original
    ]
    if state_task_service_aws_sdk not in importers:
        raise SeamDrift(f"{seam}: the aws-sdk task no longer calls boto_client_for")
    for module in importers:
        module.boto_client_for = boto_client_for  # type: ignore[attr-defined]
        _state.undo.append(lambda module=module: setattr(module, "boto_client_for", original))  # type: ignore[misc]


# --------------------------------------------------------------------------------------------------
# seam: AWS calls answered by sandbox.aws_calls before moto (IAM, faults)
# --------------------------------------------------------------------------------------------------
def intercept_aws_calls() -> None:
    seam = "intercept_aws_calls"
    if ("before-send", botocore_stubber) not in botocore.handlers.BUILTIN_HANDLERS:
        raise SeamDrift(f"{seam}: moto's BotocoreStubber is no longer a before-send handler")
    original = expect_signature(BotocoreStubber, "__call__", ["self", "event_name", "request"], seam)

    def stub(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        if self.enabled:
            answered = interception.answer(
                request, carry_out=lambda: original(self, event_name, request, **kwargs)
            )
            if answered is not None:
                return answered
        return original(self, event_name, request, **kwargs)

    _replace(BotocoreStubber, "__call__", stub)
    interception.activate()
    _state.undo.append(interception.deactivate)


# --------------------------------------------------------------------------------------------------
# seam: DynamoDB conditional writes atomic, as on AWS
# --------------------------------------------------------------------------------------------------
_DYNAMODB_WRITES: Final = ("put_item", "update_item", "delete_item", "transact_write_items")
# reads that iterate a table (a write meanwhile would change the dict under them)
_DYNAMODB_ITERATING_READS: Final = ("query", "scan")
_dynamodb_write_lock: Final = threading.RLock()


def serialize_dynamodb_writes() -> None:
    for name in (*_DYNAMODB_WRITES, *_DYNAMODB_ITERATING_READS):
        original = expect_signature(DynamoDBBackend, name, ["self"], "serialize_dynamodb_writes")

        def write(self: DynamoDBBackend, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with _dynamodb_write_lock:
                return _original(self, *args, **kwargs)

        _replace(DynamoDBBackend, name, write)
    # A read answers with the stored item itself, serialised after the backend returned: a write in
    # place meanwhile changed the dict under the serialisation (GetItem, BatchGetItem). Every DynamoDB
    # request, its answer included, runs under the lock.
    handler = expect_signature(DynamoHandler, "call_action", ["self"], "serialize_dynamodb_writes")

    def call_action(self: DynamoHandler) -> Any:
        with _dynamodb_write_lock:
            return handler(self)

    _replace(DynamoHandler, "call_action", call_action)


class _CopyKeepingTables:
    """``copy`` as moto's DynamoDB models module sees it: inside a transaction the seam backs up, a
    deep copy of a whole Table (moto's rollback backup) is the table itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if getattr(_transaction_backup, "active", False) and isinstance(value, DynamoTable):
            return value
        return copy.deepcopy(value, memo)


_transaction_backup = threading.local()


def back_up_transaction_items() -> None:
    """TransactWriteItems backs up the items it names, not the tables (docstring at the top)."""
    seam = "back_up_transaction_items"
    original = expect_signature(DynamoDBBackend, "transact_write_items", ["self", "transact_items"], seam)
    models = sys.modules[DynamoDBBackend.__module__]
    source = inspect.getsource(original)
    if (
        models.__dict__.get("copy") is not copy
        or "copy.deepcopy(" not in source
        or "self.tables[" not in source
    ):
        raise SeamDrift(f"{seam}: transact_write_items no longer backs up tables with copy.deepcopy")

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        with _dynamodb_write_lock:
            before = [
                (table, key, _item_copy(self, table, key))
                for table, key in _transaction_keys(self, transact_items)
            ]
            _transaction_backup.active = True
            try:
                original(self, transact_items)
            except Exception:
                for table, key, item in before:  # moto's rollback put the (same) tables back
                    if item is not _UNREADABLE:
                        with contextlib.suppress(Exception):  # restore the others; raise moto's error
                            _restore_item(self, table, key, item)
                raise
            finally:
                _transaction_backup.active = False

    _replace(DynamoDBBackend, "transact_write_items", transact_write_items)
    models.copy = _CopyKeepingTables()  # type: ignore[attr-defined]
    _state.undo.append(lambda: setattr(models, "copy", copy))


_UNREADABLE: Final = object()  # an item moto could not read: it fails that item before writing it


def _transaction_keys(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> list[tuple[Any, dict[str, Any]]]:
    """(table, key) of every item the transaction names (the table by name or by ARN, as moto takes it)."""
    keys = []
    for entry in transact_items:
        for op_type, op in entry.items():
            try:
                table = backend.get_table(op["TableName"])
            except Exception:  # noqa: BLE001, S112 - no such table: moto fails the item, writes nothing to it
                continue
            if op_type == "Put":
                names = [table.hash_key_attr, *([table.range_key_attr] if table.range_key_attr else [])]
                if all(n in op.get("Item", {}) for n in names):
                    keys.append((table, {n: op["Item"][n] for n in names}))
            elif isinstance(op.get("Key"), dict):
                keys.append((table, op["Key"]))
    return keys


def _item_copy(backend: DynamoDBBackend, table: Any, key: dict[str, Any]) -> Any:
    try:
        return copy.deepcopy(backend.get_item(table.name, key))
    except Exception:  # noqa: BLE001 - a key moto rejects
        return _UNREADABLE


def _restore_item(backend: DynamoDBBackend, table: Any, key: dict[str, Any], item: Any) -> None:
    if item is None:
        if backend.get_item(table.name, key) is not None:
            backend.delete_item(table.name, key)
    else:
        backend.put_item(table.name, item.to_json()["Attributes"])


# --------------------------------------------------------------------------------------------------
# AWS call recording (botocore extension point, not a patch)
# --------------------------------------------------------------------------------------------------
_calls: Final[Counter[str]] = Counter()
_calls_lock: Final = threading.Lock()
_recording: Final = threading.Event()


def _count_call(model: Any = None, **_: Any) -> None:
    if _recording.is_set() and model is not None:
        key = f"{model.service_model.service_name}:{model.name}"
        with _calls_lock:
            _calls[key] += 1


def record_aws_calls() -> None:
    """Count every in-process botocore call (clients created after this too) per service:Operation,
    from zero: an earlier sandbox's counts in this process are not this one's (its deploy read them)."""
    reset_aws_calls()
    handler = ("before-call", _count_call)
    if handler not in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.append(handler)
    if boto3.DEFAULT_SESSION is not None:
        boto3.DEFAULT_SESSION._session.unregister("before-call", _count_call)
        boto3.DEFAULT_SESSION._session.register("before-call", _count_call)
    _recording.set()
    _state.undo.append(_recording.clear)


def aws_calls() -> dict[str, int]:
    with _calls_lock:
        return dict(sorted(_calls.items()))


def reset_aws_calls() -> None:
    with _calls_lock:
        _calls.clear()


def deliveries() -> dict[str, int]:
    return dict(sorted(_state.deliveries.items()))


# --------------------------------------------------------------------------------------------------
SEAMS: Final = (
    route_lambda_invoke,
    deliver_eventbridge_targets,
    refuse_aws_event_sources,
    keep_event_account,
    deliver_sns_to_lambda,
    detach_sqs_event_source_mappings,
    name_unnamed_executions,
    name_aws_sdk_errors,
    bind_execution_role,
    evaluate_stepfunctions_jsonata,
    run_stepfunctions_on_sandbox_clock,
    run_product_code_on_sandbox_clock,
    emit_execution_status_events,
    abort_stopped_executions,
    fail_tasks_on_read_timeouts,
    keep_task_failure_cause,
    apply_stepfunctions_quotas,
    cache_stepfunctions_parse_trees,
    hold_elbv2_targets_as_aws,
    record_aws_calls,
    intercept_aws_calls,
    back_up_transaction_items,  # before serialize_dynamodb_writes wraps the method it checks
    serialize_dynamodb_writes,
)


def install(runtime: LambdaRuntime, clock: SandboxClock | None = None) -> None:
    """Install every seam, routing to ``runtime`` (one sandbox at a time); Step Functions timers
    run on ``clock`` (wall time without one)."""
    with _lock:
        if _state.runtime is not None:
            raise RuntimeError("another sandbox is already running in this process")
        try:
            _use_clock(clock or _WALL_CLOCK)
            for seam in SEAMS:
                seam()
        except BaseException:
            _undo_all()
            raise
        _state.runtime = runtime
        _state.deliveries.clear()
        _state.delivery_errors.clear()


def uninstall() -> None:
    with _lock:
        _undo_all()


@contextmanager
def installed(
    *chosen: Callable[[], None], clock: SandboxClock | None = None, runtime: LambdaRuntime | None = None
) -> Iterator[None]:
    """Only the ``chosen`` seams, for tests that run moto without a Sandbox (without ``runtime`` the
    seams that route to one keep moto's behaviour; with it, ``route_lambda_invoke`` runs its functions
    in-process; Step Functions timers on ``clock``, else the enclosing one, else wall time). Nests
    (the innermost one may bring a runtime); refused while a sandbox is running."""
    with _lock:
        if _state.runtime is not None:
            raise RuntimeError("a sandbox is running: its seams are already installed")
        mark = len(_state.undo)
        try:
            if clock is not None:
                _use_clock(clock)
            for seam in chosen:
                seam()
        except BaseException:
            _undo_to(mark)
            raise
        _state.runtime = runtime
    try:
        yield
    finally:
        with _lock:
            _state.runtime = None
            _undo_to(mark)


def _undo_to(mark: int) -> None:
    while len(_state.undo) > mark:
        _state.undo.pop()()


def _undo_all() -> None:
    _undo_to(0)
    _state.runtime = None


def active_runtime() -> LambdaRuntime | None:
    return _state.runtime


def delivery_errors() -> list[str]:
    return list(_state.delivery_errors)
