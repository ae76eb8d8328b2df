"""PUT /clusters/{name}/instance-groups/{group} through the Powertools resolver, on the template deployed
into moto with the HyperPod simulator: block-growth refuses scale-ups only, until an admin lifts it."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported and named by the tests)

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot.models.records import iso

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import USER_ARN, as_admin, call, registered_active, stack

ADMIN = "arn:aws:iam::123456789012:role/PlatformAdmin"
OTHER_USER = "arn:aws:iam::123456789012:user/mallory"
BLOCKED_UNTIL = datetime(2099, 1, 1, tzinfo=UTC)


def active_cluster(stack: Deployed, name: str = "ml-cluster") -> None:
    """A cluster created through the API (worker-group-1 at 4, controller and login at 1), ACTIVE, and
    InService in SageMaker."""
    registered_active(stack, name)
    config = {k: v for k, v in create_body(name)["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)
    stack.clock.advance(3 * 3600)  # the create, then the workers' deep health checks (about 2 h)


def scale(body: Any, *, group: str = "worker-group-1", caller: str = USER_ARN) -> tuple[int, Any]:
    event = api_event(
        "scale_instance_group", path_parameters={"name": "ml-cluster", "group": group}, body=body
    )
    event["requestContext"]["identity"]["userArn"] = caller
    return call(event)


def lift(caller: str) -> tuple[int, Any]:
    """DELETE /clusters/ml-cluster/growth-block as ``caller``."""
    event = api_event("delete_cluster", query=None)
    path = "/clusters/ml-cluster/growth-block"
    event["resource"] = event["requestContext"]["resourcePath"] = "/clusters/{name}/growth-block"
    event["path"] = path
    event["requestContext"]["path"] = f"/dev{path}"
    event["requestContext"]["identity"]["userArn"] = caller
    return call(event)


def block_growth(stack: Deployed) -> None:
    table = BudgetAlertTable(stack.stack.physical_id("StateTable"), stack.client("dynamodb"))
    table.block_growth(
        "ml-cluster",
        until=BLOCKED_UNTIL,
        at=datetime(2026, 11, 22, tzinfo=UTC),
        by="budget:hyperpod-ml-cluster",
    )


def worker_count(stack: Deployed) -> int:
    described = stack.client("sagemaker").describe_cluster(ClusterName="ml-cluster")
    [group] = [g for g in described["InstanceGroups"] if g["InstanceGroupName"] == "worker-group-1"]
    return int(group["TargetCount"])


def test_scale_up_asks_update_cluster_and_records_the_operation(stack: Deployed) -> None:
    active_cluster(stack)

    status, answer = scale({"instanceCount": 6})

    assert status == 200, answer
    assert answer["previousCount"] == 4
    assert answer["targetCounts"] == {"controller-machine": 1, "login-group": 1, "worker-group-1": 6}
    assert worker_count(stack) == 6
    status, cluster = call(api_event("get_cluster"))
    assert ("ScaleInstanceGroup", answer["operationId"]) in [
        (h["operationType"], h["operationId"]) for h in cluster["history"]
    ]


def test_a_blocked_cluster_refuses_a_scale_up_naming_the_block_and_its_end(stack: Deployed) -> None:
    active_cluster(stack)
    block_growth(stack)

    status, answer = scale({"instanceCount": 5})

    assert status == 409
    assert "block-growth" in answer["message"]
    assert iso(BLOCKED_UNTIL) in answer["message"]
    assert worker_count(stack) == 4


def test_a_blocked_cluster_may_scale_down(stack: Deployed) -> None:
    active_cluster(stack)
    block_growth(stack)

    status, answer = scale({"instanceCount": 1})

    assert status == 200, answer
    assert worker_count(stack) == 1


def test_after_an_admin_lifts_the_block_a_scale_up_is_allowed(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, ADMIN)
    active_cluster(stack)
    block_growth(stack)
    assert scale({"instanceCount": 5})[0] == 409

    status, lifted = lift(ADMIN)
    assert status == 200, lifted
    status, answer = scale({"instanceCount": 5})

    assert status == 200, answer
    assert worker_count(stack) == 5


@pytest.mark.parametrize("group", ["controller-machine", "login-group"])
def test_controller_and_login_groups_are_refused_naming_the_group(stack: Deployed, group: str) -> None:
    active_cluster(stack)

    status, answer = scale({"instanceCount": 0}, group=group)

    assert status == 409
    assert repr(group) in answer["message"]


def test_an_unknown_group_is_404_naming_it(stack: Deployed) -> None:
    active_cluster(stack)

    status, answer = scale({"instanceCount": 2}, group="worker-group-9")

    assert status == 404
    assert "'worker-group-9'" in answer["message"]


@pytest.mark.parametrize(
    "body",
    [{}, {"instanceCount": -1}, {"instanceCount": "3"}, {"instanceCount": 2.5}, {"instanceCount": 6759}],
)
def test_a_bad_body_is_400_naming_the_field(stack: Deployed, body: dict[str, Any]) -> None:
    active_cluster(stack)

    status, answer = scale(body)

    assert status == 400
    assert [e["path"] for e in answer["errors"]] == ["instanceCount"]
    assert worker_count(stack) == 4


def test_only_the_creator_or_an_admin_may_scale(stack: Deployed) -> None:
    active_cluster(stack)

    status, answer = scale({"instanceCount": 2}, caller=OTHER_USER)

    assert status == 403
    assert OTHER_USER in answer["message"]
    assert worker_count(stack) == 4


def test_an_unmanaged_cluster_is_404(stack: Deployed) -> None:
    status, answer = scale({"instanceCount": 2})

    assert status == 404
    assert "'ml-cluster'" in answer["message"]
