"""Static checks of both ASL files: service models, retry policies, error names, shared wait, contracts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from autopilot.emitted_events import DETAIL_TYPES, SOURCE, OperationEventDetail
from autopilot.logic.healing.start_repair import AGENT_COMMAND_SECONDS, RESUME_SECONDS
from autopilot.models.hyperpod_events import DETAIL_TYPES as DETAIL_TYPES_HYPERPOD
from autopilot.models.hyperpod_events import AwaitCluster, AwaitNode
from autopilot.settings import ClusterEventsSettings
from autopilot.workflows.inputs import (
    CleanupClusterWorkflowInput,
    CreateClusterWorkflowInput,
    ReplaceNodeWorkflowInput,
)
from botocore.model import ListShape, OperationModel, Shape, StructureShape
from pydantic import BaseModel

from sandbox.emulator import sdk_error_names
from sandbox.emulator.deploy import load_template

ROOT = Path(__file__).resolve().parents[2]
MACHINES: dict[str, type[BaseModel]] = {
    "create_cluster": CreateClusterWorkflowInput,
    "cleanup_cluster": CleanupClusterWorkflowInput,
    "replace_node": ReplaceNodeWorkflowInput,
}
# The wait request each workflow's callback task sends (ClusterEventsFunction parses it).
WAIT_REQUESTS: dict[str, type[BaseModel]] = {
    "create_cluster": AwaitCluster,
    "cleanup_cluster": AwaitCluster,
    "replace_node": AwaitNode,
}
# The template parameters bounding how long each workflow waits on its own (seconds, or minutes *60):
# together they must stay within its TimeoutSeconds.
DEADLINE_PARAMETERS: dict[str, tuple[tuple[str, int], ...]] = {
    "create_cluster": (("CreateTimeoutSeconds", 1),),
    "cleanup_cluster": (("DeleteTimeoutSeconds", 1),),
    # a slot (at most the replace deadline), then a reboot or HyperPod's repair, then a replace; on
    # Slurm the wait for the jobs, drain and requeue (5 minutes and three polls each) and resume (30
    # minutes and six polls)
    "replace_node": (
        ("ReplaceDeadlineMinutes", 60),
        ("HyperPodRepairDeadlineMinutes", 60),
        ("ReplaceDeadlineMinutes", 60),
        ("DrainTimeoutMinutes", 60),
        ("AgentPollSeconds", 2 * 3 + 6),
    ),
}
# What each workflow waits beyond its parameters: ReplaceNode's drain and requeue (300 s each) and
# Resume In Slurm (1800 s).
DEADLINE_SECONDS = {"create_cluster": 0, "cleanup_cluster": 0, "replace_node": 2 * 300 + 1800}
SDK = re.compile(r"^arn:\$\{Partition\}:states:::aws-sdk:(?P<service>[a-z0-9]+):(?P<action>[a-zA-Z]+)$")
OPTIMIZED = {
    "arn:${Partition}:states:::dynamodb:updateItem": ("dynamodb", "UpdateItem"),
    "arn:${Partition}:states:::events:putEvents": ("events", "PutEvents"),
    "arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken": ("sqs", "SendMessage"),
    "arn:${Partition}:states:::sns:publish": ("sns", "Publish"),
    "arn:${Partition}:states:::lambda:invoke": ("lambda", "Invoke"),
    "arn:${Partition}:states:::lambda:invoke.waitForTaskToken": ("lambda", "Invoke"),
}
CALLBACK = "arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken"
TITLE_CASE = re.compile(r"^[A-Z][a-z]*( [A-Z][a-z]*)*$")
EXPRESSION = re.compile(r"^\{%.*%\}$", re.DOTALL)
# The wait both workflows share, state for state; only where it leads differs.
WAIT_STATES = ("Await Cluster", "Check Cluster", "Cluster Reached")
WAIT_EXITS = {
    "create_cluster": ("Continuous Provisioning", "Check Before Rollback"),
    "cleanup_cluster": ("Deregister Login Targets", "Record Cluster Failed"),
}


def _backoff(*errors: str) -> dict[str, Any]:
    return {
        "ErrorEquals": list(errors),
        "IntervalSeconds": 2,
        "BackoffRate": 2,
        "MaxDelaySeconds": 60,
        "JitterStrategy": "FULL",
        "MaxAttempts": 8,
    }


# The named retry policies, written once: transient errors as Step Functions names them for each
# integration. aws-sdk: the service's modelled throttling / internal errors and its generic exception
# (unmodelled errors such as SageMaker's throttling arrive as <Service>.<Service>Exception). Optimized
# integrations (dynamodb, events, sqs, lambda): States.TaskFailed, since their names for throttling and
# 5xx are not documented per error (a Lambda task's function errors too: the functions are idempotent).
RETRY_POLICIES: dict[str, list[dict[str, Any]]] = {
    "sagemaker": [_backoff("SageMaker.SageMakerException")],
    "budgets": [
        _backoff("Budgets.ThrottlingException", "Budgets.InternalErrorException", "Budgets.BudgetsException")
    ],
    "resourcegroupstaggingapi": [
        _backoff(
            "ResourceGroupsTaggingApi.ThrottledException",
            "ResourceGroupsTaggingApi.InternalServiceException",
            "ResourceGroupsTaggingApi.ResourceGroupsTaggingApiException",
        )
    ],
    "cloudformation": [_backoff("CloudFormation.CloudFormationException")],
    "optimized": [_backoff("States.TaskFailed")],
}
# The Slurm agent's tasks (AgentFunction): only the invoke's own transient errors, as Step Functions
# names them for lambda:invoke (AWS's "Handle transient Lambda service exceptions"); States.TaskFailed
# would also match the agent's answer (Autopilot.AgentCommandFailed: a drain refused, a job left) and
# repeat a command that was carried out.
AGENT_TASK = [
    _backoff(
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
    )
]
# Check Agent is a read (AgentFunction's status: DescribeCluster and the state table), so its function
# errors are retried too, twice: a throttled DescribeCluster must not cost a repair its drain, and a
# status that keeps failing leaves today's repair within seconds.
AGENT_READ = [
    *AGENT_TASK,
    {
        "ErrorEquals": ["States.TaskFailed"],
        "IntervalSeconds": 2,
        "BackoffRate": 2,
        "MaxDelaySeconds": 60,
        "JitterStrategy": "FULL",
        "MaxAttempts": 2,
    },
]
# A conditional write whose condition failing is an answer (the lease is taken, the repair is not this
# one's): never retried, although States.TaskFailed would match it.
CONDITIONAL_WRITE = [{"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "MaxAttempts": 0}]
# Cleanup's DeleteCluster on a cluster mid-update or already Deleting (another delete) gets a
# ConflictException (botocore models it; when AWS raises it is not documented): waited out for 32
# minutes (within DeleteTimeoutSeconds' default hour, which also covers the deletion), after which the
# delete goes through or finds the cluster gone (ResourceNotFound: done), or the cleanup fails with it.
DELETE_CONFLICT = [
    {
        "ErrorEquals": ["SageMaker.ConflictException"],
        "IntervalSeconds": 60,
        "BackoffRate": 2,
        "MaxDelaySeconds": 300,
        "MaxAttempts": 8,
    }
]
# ReplaceNode's BatchReplaceClusterNodes: an older cluster's "run UpdateClusterSoftware first" arrives as
# SageMaker.SageMakerException, as throttling does; Replace Call Failed tells them apart (the first is
# never retried, the others are, each minute until the action's deadline), so the task retries nothing.
REPLACE_NOT_RETRIED = [{"ErrorEquals": ["SageMaker.SageMakerException"], "MaxAttempts": 0}]
_session = botocore.session.get_session()


def definition(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "statemachines" / f"{name}.asl.json").read_text())
    return document


def tasks(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for state_name, state in definition(name)["States"].items():
        if state["Type"] == "Task":
            yield state_name, state


def all_tasks() -> list[tuple[str, str, dict[str, Any]]]:
    return [(machine, state_name, state) for machine in MACHINES for state_name, state in tasks(machine)]


def operation_model(resource: str) -> OperationModel:
    match = SDK.match(resource)
    if match:
        model = _session.get_service_model(match["service"])
        action = match["action"][0].upper() + match["action"][1:]
    else:
        service, action = OPTIMIZED[resource]
        model = _session.get_service_model(service)
    return model.operation_model(action)


def check_payload(value: Any, shape: Shape, where: str) -> list[str]:
    """Member names must exist and required ones be there; literal values must have the member's type
    (a JSONata expression is checked when it runs)."""
    if isinstance(value, str) and EXPRESSION.match(value):
        return []
    problems: list[str] = []
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            return [f"{where}: expected a structure"]
        for key, member_value in value.items():
            if key not in shape.members:
                problems.append(f"{where}.{key}: not a member of {shape.name}")
            else:
                problems += check_payload(member_value, shape.members[key], f"{where}.{key}")
        problems += [
            f"{where}.{m}: required by {shape.name}" for m in shape.required_members if m not in value
        ]
    elif isinstance(shape, ListShape):
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        for index, item in enumerate(value):
            problems += check_payload(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "map":
        if not isinstance(value, dict):
            problems.append(f"{where}: expected a map")
    elif shape.type_name == "string":
        if not isinstance(value, str):
            problems.append(f"{where}: expected a string")
        elif "enum" in shape.metadata and value not in shape.metadata["enum"]:
            problems.append(f"{where}: {value!r} not in {shape.metadata['enum']}")
    elif shape.type_name in ("integer", "long", "double", "float"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(f"{where}: expected a number")
    elif shape.type_name == "boolean" and not isinstance(value, bool):
        problems.append(f"{where}: expected a boolean")
    return problems


@pytest.mark.parametrize(
    ("machine", "state_name", "state"), all_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_task_arguments_match_the_service_model(machine: str, state_name: str, state: dict[str, Any]) -> None:
    shape = operation_model(state["Resource"]).input_shape
    assert isinstance(shape, StructureShape)
    arguments = state["Arguments"]
    if state["Resource"].endswith("events:putEvents"):
        # the optimized integration takes Detail as JSON (an object), not a string
        entries = [{k: v for k, v in e.items() if k != "Detail"} for e in arguments["Entries"]]
        assert check_payload({"Entries": entries}, shape, state_name) == []
    elif state["Resource"] == CALLBACK:
        # MessageBody is the wait request ClusterEventsFunction parses
        assert check_payload({**arguments, "MessageBody": "x"}, shape, state_name) == []
        request = WAIT_REQUESTS[machine]
        assert set(arguments["MessageBody"]) == {f.alias or n for n, f in request.model_fields.items()}
        # its literal members (autopilot, until) are values the model accepts
        request.model_validate(
            {k: "x" if EXPRESSION.match(v) else v for k, v in arguments["MessageBody"].items()}
        )
    else:
        assert check_payload(arguments, shape, state_name) == []


def test_create_cluster_passes_the_validated_request_through() -> None:
    """Every member CreateCluster accepts works: the API checks the request against botocore and the
    workflow hands it on whole (no member list to keep in step)."""
    [create] = [s for n, s in tasks("create_cluster") if s["Resource"].endswith(":createCluster")]
    assert create["Arguments"] == "{% $input.createClusterRequest %}"


def test_the_contract_check_catches_a_misspelled_member() -> None:
    shape = operation_model("arn:${Partition}:states:::aws-sdk:sagemaker:addTags").input_shape
    assert shape is not None
    assert check_payload({"ResourceArn": "{% $clusterArn %}", "Tag": []}, shape, "Tag Cluster") == [
        "Tag Cluster.Tag: not a member of AddTagsInput",
        "Tag Cluster.Tags: required by AddTagsInput",
    ]


def integration(resource: str) -> str:
    match = SDK.match(resource)
    return match["service"] if match else "optimized"


@pytest.mark.parametrize(
    ("machine", "state_name", "state"), all_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_task_retries_with_its_named_policy_and_catches_into_a_named_state(
    machine: str, state_name: str, state: dict[str, Any]
) -> None:
    policy = RETRY_POLICIES[integration(state["Resource"])]
    if "ConditionExpression" in state["Arguments"]:
        policy = CONDITIONAL_WRITE + policy
    if (machine, state_name) == ("cleanup_cluster", "Delete Cluster"):
        policy = DELETE_CONFLICT + policy
    if (machine, state_name) == ("replace_node", "Replace Node"):
        policy = REPLACE_NOT_RETRIED
    if "${AgentFunctionArn}" in json.dumps(state["Arguments"]):
        policy = AGENT_READ if (machine, state_name) == ("replace_node", "Check Agent") else AGENT_TASK
    assert state["Retry"] == policy
    catchers = state["Catch"]
    assert catchers[-1]["ErrorEquals"] == ["States.ALL"]
    states = definition(machine)["States"]
    assert all(c["Next"] in states for c in catchers)


def error_names(state: dict[str, Any]) -> set[str]:
    return {name for rule in state.get("Retry", []) + state.get("Catch", []) for name in rule["ErrorEquals"]}


def raisable(resource: str) -> set[str]:
    """Error names Step Functions can raise for a task: States.*, for aws-sdk the operation's
    modelled errors and the service's generic exception as sandbox/emulator/sdk_error_names.py names them
    (the sandbox names them by the same rule), for the optimized DynamoDB integration its modelled
    errors as DynamoDB.<error code>."""
    match = SDK.match(resource)
    if resource == "arn:${Partition}:states:::dynamodb:updateItem":
        return {f"DynamoDB.{shape.name}" for shape in operation_model(resource).error_shapes}
    if resource.startswith("arn:${Partition}:states:::lambda:invoke"):
        # Invoke's modelled errors, and the AWS SDK for Java's own two (AWS's Lambda retry guidance)
        modelled = {f"Lambda.{shape.name}" for shape in operation_model(resource).error_shapes}
        return modelled | {"Lambda.AWSLambdaException", "Lambda.SdkClientException"}
    if not match:
        return set()
    service = match["service"]
    modelled = {
        sdk_error_names.error_name(service, shape.name) for shape in operation_model(resource).error_shapes
    }
    return modelled | {sdk_error_names.generic_error_name(service)}


@pytest.mark.parametrize(
    ("machine", "state_name", "state"), all_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_error_name_is_one_step_functions_raises_for_the_task(
    machine: str, state_name: str, state: dict[str, Any]
) -> None:
    names = {n for n in error_names(state) if not n.startswith("States.")}
    assert names <= raisable(state["Resource"]), names - raisable(state["Resource"])


def test_the_error_name_check_refuses_names_step_functions_never_raises() -> None:
    resource = "arn:${Partition}:states:::aws-sdk:sagemaker:createCluster"
    assert "SageMaker.ResourceInUseException" in raisable(resource)
    assert "SageMaker.ThrottlingException" not in raisable(resource)  # unmodelled: SageMakerException
    assert "sagemaker.ResourceInUseException" not in raisable(resource)
    tagging = "arn:${Partition}:states:::aws-sdk:resourcegroupstaggingapi:getResources"
    assert "ResourceGroupsTaggingApi.ThrottledException" in raisable(tagging)
    assert "ResourceGroupsTaggingAPI.ThrottledException" not in raisable(tagging)  # botocore's spelling


# botocore service -> the AWS SDK for Java v2's client name (software.amazon.awssdk.services.*.<Name>Client):
# the names Step Functions' documentation and LocalStack's AWS-checked executor show (AcmPca, DynamoDb,
# Sfn), the services the control plane calls, and words the rule must split (versions, acronyms).
JAVA_V2_CLIENTS = {
    "acm-pca": "AcmPca",
    "dynamodb": "DynamoDb",
    "stepfunctions": "Sfn",
    "sagemaker": "SageMaker",
    "cloudformation": "CloudFormation",
    "budgets": "Budgets",
    "resourcegroupstaggingapi": "ResourceGroupsTaggingApi",
    "ec2": "Ec2",
    "ssm": "Ssm",
    "iam": "Iam",
    "fsx": "FSx",
    "s3": "S3",
    "events": "EventBridge",
    "logs": "CloudWatchLogs",
    "apigateway": "ApiGateway",
    "sesv2": "SesV2",
    "elbv2": "ElasticLoadBalancingV2",
    "ce": "CostExplorer",
}


@pytest.mark.parametrize(("service", "java_name"), JAVA_V2_CLIENTS.items())
def test_the_service_name_rule_gives_the_java_sdks_client_names(service: str, java_name: str) -> None:
    assert sdk_error_names.error_service_name(service) == java_name


@pytest.mark.parametrize(
    ("machine", "state_name", "state"), all_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_the_resources_service_is_the_error_names_service_in_lower_case(
    machine: str, state_name: str, state: dict[str, Any]
) -> None:
    """AWS's guide: "you may also see the service name in lowercase in the Task state's Resource
    field" — the rule's name must give back the ARN's service."""
    if match := SDK.match(state["Resource"]):
        assert sdk_error_names.error_service_name(match["service"]).lower() == match["service"]


@pytest.mark.parametrize("machine", MACHINES)
def test_states_are_title_case_and_every_transition_exists(machine: str) -> None:
    document = definition(machine)
    states = document["States"]
    assert document["StartAt"] in states
    reachable = {document["StartAt"]}
    frontier = [document["StartAt"]]
    while frontier:
        state = states[frontier.pop()]
        for target in [state.get("Next"), state.get("Default")] + [
            c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])
        ]:
            assert target is None or target in states, target
            if target and target not in reachable:
                reachable.add(target)
                frontier.append(target)
    assert reachable == set(states), f"unreachable: {set(states) - reachable}"
    assert all(TITLE_CASE.match(name) for name in states), [n for n in states if not TITLE_CASE.match(n)]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_workflow_reads_only_fields_its_input_model_has(machine: str) -> None:
    text = json.dumps(definition(machine))
    read = set(re.findall(r"\$input\.([a-zA-Z]+)", text))
    known = {field.alias for field in MACHINES[machine].model_fields.values()}
    assert read, "the workflow reads its input as $input"
    assert read <= known, read - known


@pytest.mark.parametrize("machine", MACHINES)
def test_workflows_are_jsonata_with_a_timeout_beyond_their_deadlines(machine: str) -> None:
    document = definition(machine)
    parameters = load_template(ROOT / "template.yaml")["Parameters"]
    longest = sum(parameters[p]["MaxValue"] * unit for p, unit in DEADLINE_PARAMETERS[machine])
    longest += DEADLINE_SECONDS[machine]
    assert document["QueryLanguage"] == "JSONata"
    assert longest + 3600 <= document["TimeoutSeconds"], "the workflow must reach its own deadline first"


def _wait_states(machine: str) -> dict[str, Any]:
    ok, failed = WAIT_EXITS[machine]
    text = json.dumps({name: definition(machine)["States"][name] for name in WAIT_STATES})
    return dict(json.loads(text.replace(f'"{ok}"', '"<reached>"').replace(f'"{failed}"', '"<failed>"')))


def test_both_workflows_wait_with_the_same_states() -> None:
    create, cleanup = (_wait_states(machine) for machine in WAIT_EXITS)
    assert create == cleanup
    assert "<reached>" in json.dumps(create)
    assert "<failed>" in json.dumps(create)


def test_no_other_state_is_written_twice() -> None:
    create, cleanup = (definition(machine)["States"] for machine in WAIT_EXITS)
    twice = {name for name in create.keys() & cleanup.keys() if create[name] == cleanup[name]}
    assert twice <= {*WAIT_STATES, "Invalid Input"}, twice


@pytest.mark.parametrize("machine", MACHINES)
def test_emitted_events_follow_the_event_contract(machine: str) -> None:
    for state_name, state in tasks(machine):
        if not state["Resource"].endswith("events:putEvents"):
            continue
        [entry] = state["Arguments"]["Entries"]
        assert entry["Source"] == SOURCE
        assert entry["DetailType"] in DETAIL_TYPES
        fields = set(entry["Detail"])
        assert fields <= set(OperationEventDetail.model_json_schema(by_alias=True)["properties"]), state_name


@pytest.mark.parametrize("machine", MACHINES)
def test_the_operation_status_is_the_last_record_written(machine: str) -> None:
    """A client that sees SUCCEEDED/FAILED must also see the cluster's status and every step."""
    states = definition(machine)["States"]
    for final_record in ("Record Success", "Record Failure"):
        name = states[final_record]["Next"]
        while name:
            state = states[name]
            assert not state.get("Resource", "").endswith("dynamodb:updateItem"), (
                f"{name} after {final_record}"
            )
            name = state.get("Next")


TEMPLATE_RESOURCES: dict[str, Any] = load_template(ROOT / "template.yaml")["Resources"]


def test_hyperpod_events_reach_cluster_events_function_with_a_dead_letter_queue_and_an_alarm() -> None:
    rule = TEMPLATE_RESOURCES["HyperPodEventsRule"]["Properties"]
    assert rule["EventPattern"]["source"] == ["aws.sagemaker"]
    assert set(rule["EventPattern"]["detail-type"]) == set(DETAIL_TYPES_HYPERPOD)
    [target] = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["ClusterEventsQueue", "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["ClusterEventsDeadLetterQueue", "Arn"]}
    queue = TEMPLATE_RESOURCES["ClusterEventsQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["ClusterEventsDeadLetterQueue", "Arn"]
    }
    alarm = TEMPLATE_RESOURCES["ClusterEventsDeadLetterAlarm"]["Properties"]
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["ClusterEventsDeadLetterQueue", "QueueName"]}
    function = TEMPLATE_RESOURCES["ClusterEventsFunction"]["Properties"]
    [source] = function["Events"].values()
    assert source["Type"] == "SQS"
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # Lambda's SQS guide: the queue's visibility timeout at least six times the function's timeout
    assert queue["VisibilityTimeout"] >= 6 * function.get("Timeout", 30)


@pytest.mark.parametrize(
    "machine", ["CreateClusterStateMachine", "CleanupClusterStateMachine", "ReplaceNodeStateMachine"]
)
def test_state_machines_log_trace_and_may_send_wait_requests_only_to_the_cluster_events_queue(
    machine: str,
) -> None:
    props = TEMPLATE_RESOURCES[machine]["Properties"]
    assert props["Tracing"] == {"Enabled": True}
    assert props["Logging"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"] == {
        "Fn::GetAtt": ["WorkflowLogGroup", "Arn"]
    }
    statements = props["Policies"][0]["Statement"]
    [send] = [s for s in statements if s["Action"] == "sqs:SendMessage"]
    assert send["Resource"] == {"Fn::GetAtt": ["ClusterEventsQueue", "Arn"]}
    assert all(s["Resource"] != "*" for s in statements if s["Sid"] not in ("FindLeftovers", "ExecutionLogs"))


def test_cluster_events_function_gets_every_setting_it_needs() -> None:
    template = load_template(ROOT / "template.yaml")
    environment = set(template["Globals"]["Function"]["Environment"]["Variables"])
    function = TEMPLATE_RESOURCES["ClusterEventsFunction"]["Properties"]
    environment |= set(function.get("Environment", {}).get("Variables", {}))
    needed = {field.alias for field in ClusterEventsSettings.model_fields.values()}
    assert needed <= environment, needed - environment


def test_each_agent_command_carries_its_states_own_deadline_and_the_healing_code_knows_them() -> None:
    """The agent drops a command at the deadline it was given, and the task times out at its own: the
    two are one expression. The sweep and the deep-health allowance bound a repair by the same limits
    (autopilot.logic.healing.start_repair)."""
    states = definition("replace_node")["States"]
    commands = {
        name: state
        for name, state in states.items()
        if state.get("Resource") == "arn:${Partition}:states:::lambda:invoke.waitForTaskToken"
    }
    # Keep Operator Drain takes Resume In Slurm's place after the reboot of a node an operator drained
    assert set(commands) == {
        "Drain Node",
        "Await Jobs",
        "Requeue Jobs",
        "Resume In Slurm",
        "Keep Operator Drain",
    }
    for name, state in commands.items():
        command = state["Arguments"]["Payload"]["command"]
        assert command["timeoutSeconds"] == state["TimeoutSeconds"], name
        assert command["taskToken"] == "{% $states.context.Task.Token %}", name
        assert state["Arguments"]["FunctionName"] == "${AgentFunctionArn}", name
    poll = load_template(ROOT / "template.yaml")["Parameters"]["AgentPollSeconds"]["MaxValue"]
    for name in ("Drain Node", "Requeue Jobs", "Keep Operator Drain"):
        assert commands[name]["TimeoutSeconds"] == "{% 300 + 3 * ${AgentPollSeconds} %}"
    assert poll * 3 + 300 == AGENT_COMMAND_SECONDS
    assert commands["Await Jobs"]["TimeoutSeconds"] == "{% ${DrainTimeoutMinutes} * 60 %}"
    # the agent takes a poll to see the resume and one to report it: the limit scales with the polls
    # (the sandbox's agents poll every few thousand simulated seconds)
    assert commands["Resume In Slurm"]["TimeoutSeconds"] == "{% 1800 + 6 * ${AgentPollSeconds} %}"
    assert poll * 6 + 1800 == RESUME_SECONDS
    assert DEADLINE_SECONDS["replace_node"] == 2 * 300 + 1800
