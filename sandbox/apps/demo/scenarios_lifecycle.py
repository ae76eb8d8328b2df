"""Cluster lifecycle scenarios: validate, create, create without capacity, clean up.

Each drives the control plane through its HTTP API (SigV4) and the HyperPod simulator's fault
injection, then checks the outcome where a user would: the API's answer and AWS itself (SageMaker
DescribeCluster / ListTags, Budgets, the tagging API, the notifications topic).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Final

from autopilot_cli.client import ApiError, new_idempotency_key

from sandbox.apps.demo.clusters import (
    ALERT_EMAIL,
    BUDGET_USD,
    EVENT_TIMEOUT_S,
    EXPECTED_NOTIFICATIONS,
    FAILED_EVENT,
    OWNER,
    PROJECT,
    SUCCEEDED_EVENT,
    AlertsInbox,
    NotificationsInbox,
    accepted,
    aws_error_code,
    budget_notifications_topic,
    budget_subscribers,
    create_body,
    create_cluster_and_wait,
    error_paths,
    tagged_with_cluster,
    unique_name,
    workshop_config,
)
from sandbox.apps.demo.runner import DemoContext, scenario


# --------------------------------------------------------------------------------------------------
# scenarios
# --------------------------------------------------------------------------------------------------
@scenario(
    "validate_rejects_bad_config",
    "POST /validate and POST /clusters with a broken config -> 400 naming every field; nothing created",
)
def validate_rejects_bad_config(ctx: DemoContext) -> None:
    name = unique_name(ctx, "demo-broken")
    config, provisioning = workshop_config(name, ctx.api.region)
    config["InstanceGroups"][0]["ThreadsPerCore"] = 3
    config["InstanceGroups"][2]["InstanceCount"] = -1
    del config["VpcConfig"]
    provisioning["worker_groups"][0]["instance_group_name"] = "no-such-group"
    broken = {
        "InstanceGroups[0].ThreadsPerCore",
        "InstanceGroups[2].InstanceCount",
        "VpcConfig",
        "worker_groups[0].instance_group_name",
    }
    sfn = ctx.aws("stepfunctions")
    machine = ctx.env.stack_output("CreateClusterStateMachineArn")
    executions_before = len(sfn.list_executions(stateMachineArn=machine)["executions"])

    result = ctx.call(
        "POST /validate",
        lambda: ctx.api.validate({"clusterConfig": config, "provisioningParameters": provisioning}),
        lambda r: f"200 valid={str(r['valid']).lower()}, {len(r['errors'])} errors",
    )
    for error in result["errors"]:
        ctx.info(f"  {error.get('file')}: {error['path']}: {error['message']}")
    ctx.check(result["valid"] is False, "POST /validate says valid=false")
    missing = broken - error_paths(result["errors"])
    ctx.check(not missing, "POST /validate names every broken field", f"not named: {sorted(missing)}")

    body = {
        "clusterConfig": config,
        "provisioningParameters": provisioning,
        "owner": OWNER,
        "project": PROJECT,
        "budget": {"monthlyLimitUsd": -5, "alertEmails": ["not-an-address"]},
    }
    refused = ctx.expect_api_error("POST /clusters (bad budget)", lambda: ctx.api.create_cluster(body), 400)
    shape_paths = error_paths(refused.errors)
    ctx.check(
        {"budget.monthlyLimitUsd", "budget.alertEmails[0]"} <= shape_paths,
        "400 names budget.monthlyLimitUsd and budget.alertEmails[0]",
        f"named: {sorted(shape_paths)}",
    )
    body["budget"] = {"monthlyLimitUsd": BUDGET_USD, "alertEmails": [ALERT_EMAIL]}
    refused = ctx.expect_api_error("POST /clusters (bad config)", lambda: ctx.api.create_cluster(body), 400)
    for error in refused.errors:
        ctx.info(f"  {error.get('file')}: {error['path']}: {error['message']}")
    missing = broken - error_paths(refused.errors)
    ctx.check(not missing, "the 400 lists every broken field", f"not named: {sorted(missing)}")

    try:
        ctx.api.get_cluster(name)
        registered = True
    except ApiError as error:
        registered = error.status != 404
    ctx.check(not registered, f"GET /clusters/{name} -> 404 (nothing registered)")
    names = [c["ClusterName"] for c in ctx.aws("sagemaker").list_clusters()["ClusterSummaries"]]
    ctx.check(name not in names, "SageMaker ListClusters has no such cluster", f"found {name}")
    executions_after = len(sfn.list_executions(stateMachineArn=machine)["executions"])
    ctx.check(
        executions_after == executions_before,
        "no Create workflow started",
        f"{executions_after - executions_before} new execution(s)",
    )
    ctx.details.update(errors=sorted(error_paths(refused.errors)), validate_errors=len(result["errors"]))
    ctx.summary = f"{len(refused.errors)} problems named (e.g. {sorted(broken)[0]}); nothing created"


@scenario(
    "create_cluster",
    "POST /clusters (workshop config) -> SUCCEEDED; InService; cost tags; budget with 4 alerts; event",
)
def create_cluster(ctx: DemoContext) -> None:
    inbox = NotificationsInbox.of(ctx)
    name = unique_name(ctx, "demo-llm")
    sfn = ctx.aws("stepfunctions")
    machine = ctx.env.stack_output("CreateClusterStateMachineArn")
    executions_before = len(sfn.list_executions(stateMachineArn=machine)["executions"])
    key = new_idempotency_key()
    operation = create_cluster_and_wait(ctx, name, idempotency_key=key)
    ctx.check(operation["status"] == "SUCCEEDED", "operation SUCCEEDED", json.dumps(operation.get("error")))
    operation_id = str(operation["operationId"])

    # A client retrying after a timeout: the same Idempotency-Key and body get the first answer.
    replayed = ctx.call(
        f"POST /clusters ({name}) again with the same Idempotency-Key",
        lambda: ctx.api.create_cluster(create_body(name, ctx.api.region), idempotency_key=key),
        accepted,
    )
    ctx.check(
        replayed["operationId"] == operation_id,
        "the retried POST answers with the same operationId",
        str(replayed["operationId"]),
    )
    started = len(sfn.list_executions(stateMachineArn=machine)["executions"]) - executions_before
    ctx.check(started == 1, "the retry started no second Create execution", f"{started} execution(s)")

    described = ctx.aws("sagemaker").describe_cluster(ClusterName=name)
    ctx.check(
        described["ClusterStatus"] == "InService", "DescribeCluster: InService", described["ClusterStatus"]
    )
    view = ctx.call(
        f"GET /clusters/{name}", lambda: ctx.api.get_cluster(name), lambda v: f"200 {v['status']}"
    )
    ctx.check(view["status"] == "ACTIVE", "Autopilot records the cluster ACTIVE", str(view["status"]))
    nodes = list(ctx.api.list_nodes(name))
    wanted = sum(int(g["InstanceCount"]) for g in workshop_config(name, ctx.api.region)[0]["InstanceGroups"])
    running = [n for n in nodes if n["InstanceStatus"]["Status"] == "Running"]
    ctx.check(
        len(running) == wanted, f"GET /clusters/{name}/nodes: {wanted} nodes Running", f"{len(running)}"
    )

    tags = {
        t["Key"]: t["Value"]
        for t in ctx.aws("sagemaker").list_tags(ResourceArn=described["ClusterArn"])["Tags"]
    }
    expected_tags = {
        "ClusterName": name,
        "owner": OWNER,
        "project": PROJECT,
        "autopilot:operation-id": operation_id,
    }
    wrong = {k: tags.get(k) for k, v in expected_tags.items() if tags.get(k) != v}
    ctx.check(not wrong, "ListTags: ClusterName, owner, project, operation id", f"wrong or missing: {wrong}")

    budgets = ctx.aws("budgets")
    account = described["ClusterArn"].split(":")[4]
    budget_name = str(view.get("budgetName"))
    budget = budgets.describe_budget(AccountId=account, BudgetName=budget_name)["Budget"]
    ctx.check(
        float(budget["BudgetLimit"]["Amount"]) == BUDGET_USD and budget["BudgetType"] == "COST",
        f"DescribeBudget {budget_name}: COST, {BUDGET_USD:g} USD a month",
        json.dumps(budget["BudgetLimit"]),
    )
    cost_filter = budget.get("CostFilters", {}).get("TagKeyValue", [])
    ctx.check(
        cost_filter == [f"user:ClusterName${name}"],
        "the budget filters on the ClusterName tag",
        str(cost_filter),
    )
    notifications = budgets.describe_notifications_for_budget(AccountId=account, BudgetName=budget_name)[
        "Notifications"
    ]
    seen = {
        (n["NotificationType"], float(n["Threshold"]))
        for n in notifications
        if n["ComparisonOperator"] == "GREATER_THAN" and n.get("ThresholdType", "PERCENTAGE") == "PERCENTAGE"
    }
    ctx.check(
        seen == EXPECTED_NOTIFICATIONS,
        "budget alerts at 50/80/100 % actual and 100 % forecast",
        f"found {sorted(seen)}",
    )
    # AWS Budgets notifies the stack's budget notifications topic; BudgetAlertsFunction turns each
    # crossing into one alert on the AlertsTopic (budget_alert).
    wanted_subscribers = {("SNS", budget_notifications_topic(ctx)), ("EMAIL", ALERT_EMAIL)}
    for alert in notifications:
        subscribers = budget_subscribers(budgets, account, budget_name, alert)
        ctx.check(
            wanted_subscribers <= subscribers,
            f"{alert['NotificationType']} {float(alert['Threshold']):g} % alert goes to the budget "
            f"notifications topic and {ALERT_EMAIL}",
            f"subscribers: {sorted(subscribers)}",
        )
    event = ctx.wait_until(
        f"a '{SUCCEEDED_EVENT}' event for {operation_id}",
        lambda: inbox.find(SUCCEEDED_EVENT, operation_id),
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(
        event["source"] == "hyperpod.autopilot" and event["detail"].get("clusterName") == name,
        f"'{SUCCEEDED_EVENT}' event on the notifications topic",
        json.dumps(event)[:300],
    )

    ctx.shared["cluster"] = name
    ctx.details.update(cluster=name, clusterArn=described["ClusterArn"], tags=tags, budget=budget_name)
    ctx.summary = f"{name} InService, {len(running)} nodes, 4 cost tags, budget {budget_name}, event"


def _create_under_fault(ctx: DemoContext, name: str, fault: str, **params: Any) -> dict[str, Any]:
    """POST /clusters (rollbackOnFailure) with ``fault`` armed; the operation once it ended."""
    ctx.fault(fault, **params)
    try:
        result = ctx.call(
            f"POST /clusters ({name}, rollbackOnFailure)",
            lambda: ctx.api.create_cluster(create_body(name, ctx.api.region, budget=False, rollback=True)),
            accepted,
        )
        return dict(ctx.wait_for_operation(result["operationId"]))
    finally:
        ctx.fault("clear")


@scenario(
    "create_fails_for_capacity",
    "no ml.p5.48xlarge capacity -> operation FAILED with the cause recorded; cluster rolled back",
)
def create_fails_for_capacity(ctx: DemoContext) -> None:
    inbox = NotificationsInbox.of(ctx)
    name = unique_name(ctx, "demo-nocap")
    operation = _create_under_fault(
        ctx, name, "capacity", instance_type="ml.p5.48xlarge", operation="CreateCluster", times=1
    )
    operation_id = str(operation["operationId"])
    ctx.check(operation["status"] == "FAILED", "operation FAILED", str(operation["status"]))
    error = operation.get("error") or {}
    cause = str(error.get("cause", ""))
    ctx.info(f"  error {error.get('error')}: {cause[:110]}…")
    ctx.check(
        "InsufficientInstanceCapacity" in cause and "ml.p5.48xlarge" in cause,
        "the cause names InsufficientInstanceCapacity for ml.p5.48xlarge",
        cause or "no cause recorded",
    )
    steps = [s["name"] for s in operation.get("steps", [])]
    ctx.check("Roll Back Cluster" in steps, "the workflow rolled the cluster back (as requested)", str(steps))
    view = ctx.api.get_cluster(name)
    ctx.check(
        view["status"] == "CREATE_FAILED", "Autopilot records the cluster CREATE_FAILED", str(view["status"])
    )
    sagemaker = ctx.aws("sagemaker")
    code = ctx.wait_until(
        f"SageMaker to finish deleting {name}",
        lambda: aws_error_code(ctx, lambda: sagemaker.describe_cluster(ClusterName=name)),
        timeout_s=30.0,
    )
    ctx.check(code == "ResourceNotFound", "DescribeCluster -> ResourceNotFound (rolled back)", f"got {code}")
    event = ctx.wait_until(
        f"a '{FAILED_EVENT}' event for {operation_id}",
        lambda: inbox.find(FAILED_EVENT, operation_id),
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(
        event["detail"].get("status") == "FAILED"
        and "InsufficientInstanceCapacity" in event["detail"].get("cause", ""),
        f"'{FAILED_EVENT}' event on the notifications topic, with the cause",
        json.dumps(event["detail"])[:300],
    )
    ctx.details.update(cluster=name, error=error)
    ctx.summary = f"FAILED: {error.get('error')} (InsufficientInstanceCapacity), rolled back"


# A real lifecycle-script failure (awslabs/awsome-distributed-ai issue #96): installing Docker could
# not take the apt lock; the line before is what the workshop's lifecycle_script.py prints.
LIFECYCLE_EXCERPT: Final = (
    "Execute script: ./utils/install_docker.sh",
    "subprocess.CalledProcessError: Command '['sudo', 'bash', './utils/install_docker.sh']' returned "
    "non-zero exit status 100.",
)


@scenario(
    "create_fails_lifecycle_script",
    "a lifecycle script fails on one node -> FAILED with a diagnosis: category, evidence line, fix",
)
def create_fails_lifecycle_script(ctx: DemoContext) -> None:
    alerts = AlertsInbox.of(ctx)
    name = unique_name(ctx, "demo-lcs")
    operation = _create_under_fault(
        ctx, name, "lifecycle_failure", cluster=name, lines=list(LIFECYCLE_EXCERPT)
    )
    operation_id = str(operation["operationId"])
    ctx.check(operation["status"] == "FAILED", "operation FAILED", str(operation["status"]))
    cause = str((operation.get("error") or {}).get("cause", ""))
    ctx.check(
        "Lifecycle scripts did not run successfully" in cause,
        "the cause is SageMaker's FailureMessage, which names no cause",
        cause or "no cause recorded",
    )
    diagnosis = operation.get("diagnosis") or {}
    evidence = diagnosis.get("evidence") or [{}]
    ctx.info(f"  diagnosis {diagnosis.get('category')}: {diagnosis.get('summary')}")
    ctx.info(f"  evidence  {evidence[0].get('stream')}: {evidence[0].get('line')}")
    ctx.info(f"  fix       {diagnosis.get('fix')}")
    ctx.check(
        diagnosis.get("category") == "package-install-failed",
        "GET /operations/{id} diagnoses package-install-failed",
        json.dumps(diagnosis)[:300],
    )
    ctx.check(
        evidence[0].get("line") == LIFECYCLE_EXCERPT[-1]
        and str(evidence[0].get("stream", "")).startswith("LifecycleConfig/"),
        "its evidence quotes the failing line from the instance's lifecycle stream",
        json.dumps(evidence)[:300],
    )
    ctx.check(bool(diagnosis.get("fix")), "and says how to fix it", json.dumps(diagnosis)[:300])
    alert = ctx.wait_until(
        f"a '{FAILED_EVENT}' alert for {operation_id}",
        lambda: alerts.find(FAILED_EVENT, operation_id),
        timeout_s=EVENT_TIMEOUT_S,
    )
    ctx.check(
        (alert["detail"].get("diagnosis") or {}).get("category") == "package-install-failed",
        f"the '{FAILED_EVENT}' alert carries the diagnosis",
        json.dumps(alert["detail"])[:300],
    )
    ctx.details.update(cluster=name, diagnosis=diagnosis)
    ctx.summary = (
        f'FAILED: {diagnosis.get("category")} — "{evidence[0].get("line")}" — fix: {diagnosis.get("fix")}'
    )


@scenario(
    "cleanup_leaves_nothing",
    "DELETE /clusters/{name} for every cluster the demo made -> SUCCEEDED; clusters, budgets, tags gone",
    final=True,
)
def cleanup_leaves_nothing(ctx: DemoContext) -> None:
    inbox = NotificationsInbox.of(ctx)
    names: list[str] = ctx.shared.pop("clusters", [])
    ctx.shared.pop("cluster", None)
    if not names:
        name = unique_name(ctx, "demo-cleanup")
        ctx.info(f"no cluster left by the other scenarios: creating {name} first")
        created = create_cluster_and_wait(ctx, name)
        ctx.check(created["status"] == "SUCCEEDED", f"{name} created", json.dumps(created.get("error")))
        names = ctx.shared.pop("clusters")
    budgets = ctx.aws("budgets")
    # Every DELETE first, then follow each: the deletions run side by side, as an operator's would.
    started: list[tuple[str, str, str, str]] = []
    for name in names:
        view = ctx.api.get_cluster(name)
        budget_name = str(view.get("budgetName"))
        cluster_arn = str((view.get("sagemaker") or {}).get("ClusterArn"))
        account = cluster_arn.split(":")[4]
        code = aws_error_code(
            ctx, partial(budgets.describe_budget, AccountId=account, BudgetName=budget_name)
        )
        ctx.check(code is None, f"before: budget {budget_name} exists", str(code))
        # The "nothing tagged left" check below proves something only if it can see the cluster now.
        before = tagged_with_cluster(ctx, name)
        ctx.check(
            cluster_arn in before,
            f"before: GetResources(ClusterName={name}) finds the cluster",
            f"found {before}",
        )
        result = ctx.call(f"DELETE /clusters/{name}", partial(ctx.api.delete_cluster, name), accepted)
        started.append((name, str(result["operationId"]), budget_name, account))

    for name, operation_id, budget_name, account in started:
        operation = ctx.wait_for_operation(operation_id)
        ctx.check(
            operation["status"] == "SUCCEEDED",
            f"{name}: operation SUCCEEDED",
            json.dumps(operation.get("error")),
        )
        code = aws_error_code(ctx, partial(ctx.aws("sagemaker").describe_cluster, ClusterName=name))
        ctx.check(
            code == "ResourceNotFound",
            f"DescribeCluster {name} -> ResourceNotFound",
            f"got {code or 'the cluster'}",
        )
        code = aws_error_code(
            ctx, partial(budgets.describe_budget, AccountId=account, BudgetName=budget_name)
        )
        ctx.check(
            code == "NotFoundException", f"DescribeBudget {budget_name} -> NotFoundException", f"got {code}"
        )
        leftovers = tagged_with_cluster(ctx, name)
        ctx.check(
            not leftovers, f"after: GetResources(ClusterName={name}): nothing tagged left", str(leftovers)
        )
        recorded = operation.get("leftovers")
        ctx.check(recorded == [], f"{name}: the operation records no leftovers", str(recorded))
        after = ctx.api.get_cluster(name)
        ctx.check(
            after["status"] == "DELETED" and after.get("sagemaker") is None,
            f"GET /clusters/{name}: DELETED, no live cluster",
            f"{after['status']}, sagemaker={after.get('sagemaker')}",
        )
        event = ctx.wait_until(
            f"a '{SUCCEEDED_EVENT}' event for {operation_id}",
            partial(inbox.find, SUCCEEDED_EVENT, operation_id),
            timeout_s=EVENT_TIMEOUT_S,
        )
        ctx.check(
            event["detail"].get("operationType") == "DeleteCluster",
            f"'{SUCCEEDED_EVENT}' event for the cleanup of {name}",
            json.dumps(event["detail"])[:300],
        )
    live = [
        c["ClusterName"]
        for c in ctx.aws("sagemaker").list_clusters()["ClusterSummaries"]
        if c["ClusterName"] in names
    ]
    ctx.check(not live, "SageMaker ListClusters: none of the demo's clusters left", str(live))
    ctx.details.update(clusters=names, budgets=[b for _, _, b, _ in started])
    ctx.summary = f"{len(names)} cluster(s) deleted ({', '.join(names)}); budgets gone; 0 tagged leftovers"
