"""ReplaceNode on a login node of a cluster with login target groups (issue 25), on moto's Step Functions
executor with LoginTargetsFunction run in-process: the repair succeeds only once the successor is
registered (Register Successor), and fails as Autopilot.SuccessorNotRegistered when it cannot be."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.models.records import NodeAction

from tests.integration.replace_node_support import fault, operation_of, run, start_repair
from tests.integration.test_login_targets import held, keep, login_nodes, make_cluster, target_group
from tests.integration.workflows import entered, history

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def test_a_replaced_login_node_succeeds_once_its_successor_is_registered(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    ssh = target_group(stack)
    make_cluster(stack, ssh)
    keep(stack)
    [(old, old_ip)] = login_nodes(stack).items()
    arn = start_repair(stack, old, NodeAction.REPLACE, fault(stack, old, "NvidiaErrorTerminate"))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    assert "Register Successor" in entered(history(stack, arn))
    operation = operation_of(execution)
    successor = operation.successor_node_id
    [new_ip] = [ip for node, ip in login_nodes(stack).items() if node == successor]
    live = {target for target, state in held(stack, ssh).items() if state != "draining"}
    assert live == {(new_ip, 22)}
    assert old_ip != new_ip
    [registration] = [a for a in operation.actions or [] if a.action.value == "register-targets"]
    assert registration.result.value == "succeeded"
    assert new_ip in (registration.message or "")
    assert old_ip in (registration.message or "")


def test_a_successor_that_cannot_be_registered_fails_the_repair(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    # a group not named LoginTargetGroupNamePrefix*: LoginTargetsFunction's role may not register in it
    ssh = target_group(stack, "other-login-ssh")
    make_cluster(stack, ssh)
    keep(stack)  # as the test, not the role
    [old] = login_nodes(stack)
    arn = start_repair(stack, old, NodeAction.REPLACE, fault(stack, old, "NvidiaErrorTerminate"))

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.SuccessorNotRegistered"
    [registration] = [a for a in operation.actions or [] if a.action.value == "register-targets"]
    assert registration.result.value == "failed"
    assert "AccessDenied" in (registration.message or "")
