"""POST /clusters is validated once into the CreateCluster model, and the create goes on with that model
(logic/create_cluster.py CreateClusterCommand): the request SageMaker gets is still the config as the caller
wrote it, plus Autopilot's cost tags, and nothing reads the request's JSON after the validation."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.logic.create_cluster import create_cluster, plan_create
from autopilot.logic.dependencies import Dependencies, Validator
from autopilot.models.bodies import CreateClusterBody
from autopilot.settings import ApiSettings
from autopilot_config.validation import validate_config
from autopilot_config.validation.report import ValidationReport
from botocore.stub import Stubber
from botocore.validate import ParamValidator

from tests.samples import API_ENVIRONMENT, create_body

REPO = Path(__file__).resolve().parents[2]
USER = "arn:aws:iam::123456789012:user/ann"
SETTINGS = ApiSettings.model_validate(API_ENVIRONMENT)


class FakeStepFunctions:
    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    def start_execution(self, **request: Any) -> dict[str, str]:
        self.started.append(request)
        return {"executionArn": f"arn:aws:states:us-east-1:123456789012:execution:create:{request['name']}"}


def dependencies(
    validator: Validator = validate_config, sfn: FakeStepFunctions | None = None
) -> Dependencies:
    # A real client for botocore's parameter validation of the request; SageMaker knows no cluster.
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(sagemaker)
    stubber.add_client_error("describe_cluster", service_error_code="ResourceNotFound")
    stubber.activate()
    return Dependencies(
        SETTINGS,
        InMemoryStateStore(),
        sagemaker=sagemaker,
        stepfunctions=cast(Any, sfn or FakeStepFunctions()),
        validator=validator,
    )


def _example(folder: str) -> dict[str, Any]:
    body = create_body()
    body["clusterConfig"] = json.loads((REPO / "examples" / folder / "cluster-config.json").read_text())
    parameters = REPO / "examples" / folder / "provisioning_parameters.json"
    body["provisioningParameters"] = json.loads(parameters.read_text()) if parameters.exists() else None
    return body


@pytest.mark.parametrize(
    "body", [create_body(), _example("slurm"), _example("eks")], ids=["event", "slurm", "eks"]
)
def test_sagemaker_gets_the_config_as_written_with_the_cost_tags(body: dict[str, Any]) -> None:
    config = copy.deepcopy(body["clusterConfig"])

    plan = plan_create(dependencies(), CreateClusterBody.model_validate(body), requested_by=USER)

    own = config.get("Tags", [])
    added = [tag for tag in plan.cost_tags if tag["Key"] not in {t["Key"] for t in own}]
    assert added, "Autopilot's cost tags reach the request"
    assert plan.create_cluster_request == {**config, "Tags": [*own, *added]}


@pytest.mark.parametrize("given", [1796083200, "2026-12-01T00:00:00+00:00", "2026-12-01T00:00:00Z"])
def test_a_next_patch_date_goes_to_sagemaker_as_the_instant_the_caller_gave(given: object) -> None:
    body = create_body()
    group = body["clusterConfig"]["InstanceGroups"][2]
    group["AutoPatchConfig"] = {"PatchingStrategy": "WhenIdle", "PatchSchedule": {"NextPatchDate": given}}

    plan = plan_create(dependencies(), CreateClusterBody.model_validate(body), requested_by=USER)

    request = plan.create_cluster_request
    sent = request["InstanceGroups"][2]["AutoPatchConfig"]
    # ISO 8601 in JSON (the workflow's input), the same instant botocore would have sent
    assert sent == {
        "PatchingStrategy": "WhenIdle",
        "PatchSchedule": {"NextPatchDate": "2026-12-01T00:00:00Z"},
    }
    shape = boto3.client("sagemaker", region_name="us-east-1").meta.service_model
    input_shape = shape.operation_model("CreateCluster").input_shape
    assert not ParamValidator().validate(json.loads(json.dumps(request)), input_shape).has_errors()


def test_the_create_goes_on_with_the_validated_model_not_the_requests_json() -> None:
    def validate_then_forget(
        config: Mapping[str, Any], parameters: Mapping[str, Any] | None
    ) -> ValidationReport:
        report = validate_config(config, parameters)
        # Whatever read the request's JSON after this would find it empty.
        cast(dict[str, Any], config).clear()
        cast(dict[str, Any], parameters).clear()
        return report

    body = CreateClusterBody.model_validate(create_body())
    config = copy.deepcopy(body.cluster_config)
    sfn = FakeStepFunctions()
    deps = dependencies(validate_then_forget, sfn)

    accepted = create_cluster(deps, body, requested_by=USER)

    assert body.cluster_config == {}
    assert accepted.cluster_name == "ml-cluster"
    [started] = sfn.started
    request = json.loads(started["input"])["createClusterRequest"]
    assert {key: value for key, value in request.items() if key != "Tags"} == {
        key: value for key, value in config.items() if key != "Tags"
    }
    cluster = deps.store.get_cluster("ml-cluster")
    assert cluster is not None
    # from the validated provisioning parameters: the controller and login groups are not workers
    assert cluster.worker_groups == ["worker-group-1"]
