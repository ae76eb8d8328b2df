"""Chargeback on the template deployed into moto with the HyperPod simulator (issue 25): the agent's
reports go through AgentFunction's logic with the clients and environment the template gives it (the
state table, ListClusterNodes of the simulated cluster, the alerts topic), the spend meter meters the
same nodes, and the API answers GET /clusters/{name}/usage and PUT .../account-budgets. Who may report
is trust.py's (tested on its own): here the controller is given."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from types import ModuleType
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.dal.agent import AgentTable
from autopilot.dal.spend import SpendTable
from autopilot.dal.state_table import StateTable
from autopilot.dal.usage import UsageTable, usage_scope
from autopilot.logic.agent.reports import AgentDeps, handle_report
from autopilot.logic.agent.trust import Controller, ControllerReader
from autopilot.logic.spend_meter import month_end, month_of, run_spend_meter
from autopilot.logic.usage_ingest import UsageDeps, listed_node_types, registry_created_at
from autopilot.settings import AgentSettings, api_settings, usage_export_settings
from aws_lambda_powertools.utilities.typing import LambdaContext

from sandbox.harness.stack import ACCOUNT, Deployed, deployed
from sandbox.services.pricing.list_prices import price_per_hour
from tests.integration.test_healing_sweep import registered
from tests.samples import ROOT, api_event, create_body, load_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
CALLER = f"arn:aws:sts::{ACCOUNT}:assumed-role/controller-role/i-0controller"
ADMIN = "arn:aws:sts::123456789012:assumed-role/ResearcherRole/researcher"  # the sample events' caller
P5 = price_per_hour("ml.p5.48xlarge")


class Context:
    function_name = "UsageExportFunction"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:UsageExportFunction"
    aws_request_id = "00000000-0000-4000-8000-000000000000"


class GivenController(ControllerReader):
    def controller(self, cluster_name: str) -> Controller:
        return Controller(group="controller-machine", role_arn=f"arn:aws:iam::{ACCOUNT}:role/controller-role")

    def instances(self, cluster_name: str, group: str) -> frozenset[str]:
        return frozenset({"i-0controller"})

    def describe(self, cluster_name: str) -> dict[str, Any]:
        return {"ClusterName": cluster_name, "Orchestrator": {"Slurm": {}}}


class Prices:
    """The list prices the sandbox's Price List serves (sandbox/services/pricing/list_prices.py)."""

    def price(self, instance_type: str, *, now: datetime) -> Decimal | None:
        return price_per_hour(instance_type)


class World:
    def __init__(self, stack: Deployed) -> None:
        self.stack = stack
        # a month with a day left at least: the jobs and the meter stay within one month
        now = stack.clock.now()
        if month_end(now) - now < timedelta(days=1):
            stack.clock.advance((month_end(now) - now).total_seconds() + 3600)
        self.workers = registered(stack, "c1")["worker-group-1"]
        sagemaker = stack.client("sagemaker")
        nodes = sagemaker.list_cluster_nodes(ClusterName="c1")["ClusterNodeSummaries"]
        self.slurm = {
            n["InstanceId"]: n["PrivateDnsHostname"].split(".")[0]
            for n in nodes
            if n["InstanceGroupName"] == "worker-group-1"
        }
        self.launched = max(n["LaunchTime"] for n in nodes)
        settings = AgentSettings.from_environ(stack.environment("AgentFunction"))
        dynamodb = stack.client("dynamodb")
        self.usage = UsageTable(settings.state_table_name, dynamodb=dynamodb)
        self.deps = AgentDeps(
            agents=AgentTable(settings.state_table_name, dynamodb=dynamodb),
            controllers=GivenController(),
            stepfunctions=stack.client("stepfunctions"),
            poll_seconds=settings.poll_seconds,
            account=ACCOUNT,
            now=stack.clock.now,
            usage=UsageDeps(
                usage=self.usage,
                prices=Prices(),
                node_types=listed_node_types(lambda: sagemaker),
                sns=lambda: stack.client("sns"),
                alerts_topic_arn=settings.alerts_topic_arn,
                created_at=registry_created_at(StateTable(settings.state_table_name, dynamodb).get_cluster),
            ),
        )
        self.alerts_queue = self._subscribe(settings.alerts_topic_arn)

    def _subscribe(self, topic: str) -> str:
        sqs = self.stack.client("sqs")
        url = sqs.create_queue(QueueName="alerts-subscriber")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.stack.client("sns").subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
        )
        return str(url)

    def alerts(self) -> list[dict[str, Any]]:
        sqs = self.stack.client("sqs")
        found = []
        while messages := sqs.receive_message(QueueUrl=self.alerts_queue, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for m in messages:
                found.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=self.alerts_queue, ReceiptHandle=m["ReceiptHandle"])
        return [a for a in found if a.get("kind") == "AccountBudgetThresholdCrossed"]

    def job(
        self, job_id: str, account: str, user: str, workers: list[str], start: datetime, end: datetime
    ) -> dict[str, Any]:
        return {
            "jobId": job_id,
            "account": account,
            "user": user,
            "partition": "gpu",
            "nodes": [self.slurm[w] for w in workers],
            "gpus": 8 * len(workers),
            "start": start.isoformat(),
            "end": end.isoformat(),
            "state": "COMPLETED",
        }

    def report(self, *jobs: dict[str, Any]) -> dict[str, Any]:
        body = {
            "agentVersion": "1.1.0",
            "sentAt": self.stack.clock.now().isoformat(),
            "nodes": [{"name": s, "state": "IDLE", "gpus": 8, "jobs": []} for s in self.slurm.values()],
            "jobs": list(jobs),
        }
        return handle_report(self.deps, "c1", CALLER, body)

    def meter(self) -> None:
        settings_env = self.stack.environment("SpendMeterFunction")
        state = settings_env["STATE_TABLE_NAME"]
        run_spend_meter(
            self.stack.clock.now(),
            store=StateTable(state),
            spend=SpendTable(state, dynamodb=self.stack.client("dynamodb")),
            prices=Prices(),  # type: ignore[arg-type]
            sagemaker=self.stack.client("sagemaker"),
            sns=self.stack.client("sns"),
            alerts_topic_arn=settings_env["ALERTS_TOPIC_ARN"],
        )


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Test")
    with deployed(execute=False) as stack:
        for key, value in stack.environment().items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("ADMIN_PRINCIPAL_ARNS", ADMIN)
        api_settings.cache_clear()
        routes.deps.cache_clear()
        aws.client.cache_clear()
        yield World(stack)
    api_settings.cache_clear()
    routes.deps.cache_clear()
    aws.client.cache_clear()


def call(event: dict[str, Any]) -> tuple[int, Any]:
    response = routes.app.resolve(event, LambdaContext())
    return response["statusCode"], json.loads(response["body"])


def usage(by: str = "account", month: str | None = None) -> tuple[int, Any]:
    query = {"by": by} | ({"month": month} if month else {})
    return call(api_event("get_cluster_usage", path_parameters={"name": "c1"}, query=query))


def test_the_same_report_twice_counts_its_jobs_once(world: World) -> None:
    start = world.launched + timedelta(minutes=10)
    world.stack.clock.advance(4 * 3600)
    jobs = [
        world.job("11", "physics", "ann", world.workers[:2], start, start + timedelta(hours=1)),
        world.job("12", "chemistry", "cy", world.workers[2:3], start, start + timedelta(hours=2)),
    ]
    world.report(*jobs)
    world.report(*jobs)
    world.report(jobs[1])
    # the cluster's incarnation's items (dal/usage.py usage_scope)
    created_at = world.deps.usage.created_at("c1") if world.deps.usage else None
    assert created_at
    totals = world.usage.month_totals(usage_scope("c1", created_at), month_of(start))
    assert sum(t.jobs for t in totals) == 2
    assert sum(t.usd for t in totals) == (2 * P5 + 2 * P5).quantize(Decimal("0.000001"))


def test_usage_lines_and_unused_capacity_add_up_to_the_spend_meters_month_to_date(world: World) -> None:
    world.meter()  # the meter's first run: the nodes from their launch
    start = world.stack.clock.now()
    world.stack.clock.advance(3 * 3600)
    end = world.stack.clock.now()
    world.report(
        world.job("21", "physics", "ann", world.workers[:2], start, end),
        world.job("22", "physics", "bob", world.workers[2:3], start, start + timedelta(hours=1)),
        world.job("23", "chemistry", "cy", world.workers[3:], start, end),
    )
    world.meter()
    state = world.stack.environment("SpendMeterFunction")["STATE_TABLE_NAME"]
    meter = SpendTable(state, dynamodb=world.stack.client("dynamodb")).get_meter("c1", month_of(end))
    assert meter is not None
    month_to_date = float(meter.month_to_date_usd)
    status, view = usage(month=month_of(end))
    assert status == 200, view
    lines = {line["name"]: line for line in view["lines"]}
    assert lines["physics"]["usd"] == pytest.approx(float(7 * P5), abs=0.01)
    assert lines["chemistry"]["usd"] == pytest.approx(float(3 * P5), abs=0.01)
    assert lines["(unused capacity)"]["usd"] > 0
    assert view["warnings"] == []
    total = sum(line["usd"] for line in view["lines"])
    assert total == pytest.approx(month_to_date, rel=0.01)
    assert view["clusterSpendUsd"] == pytest.approx(month_to_date, abs=0.01)
    status, by_user = usage(by="user", month=month_of(end))
    assert [line["name"] for line in by_user["lines"]] == ["ann", "cy", "bob", "(unused capacity)"]
    assert sum(line["usd"] for line in by_user["lines"]) == pytest.approx(total, abs=0.05)


def test_an_account_crossing_80_percent_of_its_budget_gives_one_alert(world: World) -> None:
    budget = float((P5 * 10).quantize(Decimal("0.01")))
    event = api_event(
        "put_account_budgets", path_parameters={"name": "c1"}, body={"accountBudgets": {"physics": budget}}
    )
    status, answer = call(event)
    assert status == 200, answer
    assert answer["accountBudgets"] == {"physics": budget}
    start = world.launched + timedelta(minutes=5)
    world.stack.clock.advance(6 * 3600)
    world.report(
        world.job("31", "physics", "ann", world.workers[:1], start, start + timedelta(hours=4))
    )  # 40 %
    assert world.alerts() == []
    crossing = world.job(
        "32", "physics", "bob", world.workers[1:2], start, start + timedelta(hours=4, minutes=30)
    )
    world.report(crossing)  # 85 %
    world.report(crossing)
    alerts = world.alerts()
    assert sorted(a["thresholdPercent"] for a in alerts) == [50, 80]
    eighty = next(a for a in alerts if a["thresholdPercent"] == 80)
    assert eighty["account"] == "physics"
    assert [u["user"] for u in eighty["topUsers"]] == ["bob", "ann"]
    world.report(world.job("33", "chemistry", "cy", world.workers[2:3], start, start + timedelta(hours=1)))
    assert world.alerts() == []


@pytest.mark.parametrize(
    ("query", "field"),
    [({"by": "group"}, "by"), ({"month": "2026-13"}, "month"), ({"month": "Nov"}, "month")],
)
def test_a_bad_usage_query_is_a_400_naming_the_field(world: World, query: dict[str, str], field: str) -> None:
    status, body = call(api_event("get_cluster_usage", path_parameters={"name": "c1"}, query=query))
    assert status == 400
    assert [(e["location"], e["path"]) for e in body["errors"]] == [("query", field)]


def test_bad_account_budgets_are_a_400_naming_the_field_and_an_unknown_cluster_a_404(world: World) -> None:
    bad = api_event(
        "put_account_budgets", path_parameters={"name": "c1"}, body={"accountBudgets": {"physics": -5}}
    )
    status, body = call(bad)
    assert status == 400
    assert body["errors"][0]["path"] == "accountBudgets"
    unknown = api_event("get_cluster_usage", path_parameters={"name": "nope"}, query={"by": "account"})
    assert call(unknown)[0] == 404
    assert call(api_event("put_account_budgets", path_parameters={"name": "nope"}))[0] == 404


def test_a_create_takes_the_first_account_budgets_and_refuses_bad_ones_naming_the_field(world: World) -> None:
    status, answer = call(
        api_event("create_cluster", body=create_body("c2", accountBudgets={"physics": 250}))
    )
    assert status == 202, answer
    assert world.usage.account_budgets("c2") == {"physics": "250.00"}
    status, cluster = call(api_event("get_cluster", path_parameters={"name": "c2"}))
    assert status == 200
    assert cluster["accountBudgets"] == {"physics": 250.0}
    status, refused = call(api_event("create_cluster", body=create_body("c3", accountBudgets={"physics": 0})))
    assert status == 400
    assert [e["path"] for e in refused["errors"]] == ["accountBudgets"]


def load_function(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_app", ROOT / "functions" / name / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_export_writes_each_clusters_month_under_the_stacks_prefix_as_athena_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Test")
    parameters = {"UsageExportBucket": "finance-exports", "UsageExportPrefix": "hpc/usage"}
    with deployed(execute=False, parameters=parameters) as stack:
        world = World(stack)
        start = world.launched + timedelta(minutes=10)
        stack.clock.advance(3 * 3600)
        world.meter()
        world.report(world.job("41", "physics", "ann", world.workers[:1], start, start + timedelta(hours=1)))
        s3 = stack.client("s3")
        s3.create_bucket(Bucket="finance-exports")
        for key, value in stack.environment("UsageExportFunction").items():
            monkeypatch.setenv(key, value)
        usage_export_settings.cache_clear()
        aws.client.cache_clear()
        event = load_event("schedule/scheduled_event.json") | {"time": stack.clock.now().isoformat()}
        sent: list[dict[str, Any]] = []
        aws.client("s3").meta.events.register(
            "provide-client-params.s3.PutObject", lambda params, **_: sent.append(dict(params))
        )
        counts = load_function("usage_export").lambda_handler(event, Context())
        month = month_of(stack.clock.now())
        body = s3.get_object(Bucket="finance-exports", Key=f"hpc/usage/cluster=c1/month={month}/usage.csv")[
            "Body"
        ]
        rows = list(csv.DictReader(io.StringIO(body.read().decode())))
        role = stack.stack.physical_id("UsageExportFunctionRole")
        granted = stack.client("iam").get_role_policy(RoleName=role, PolicyName="usage-export")[
            "PolicyDocument"
        ]["Statement"]
    usage_export_settings.cache_clear()
    aws.client.cache_clear()
    assert counts["monthToDate"] == 1
    assert [(r["account"], r["user"]) for r in rows] == [("physics", "ann"), ("(unused capacity)", "")]
    assert Decimal(rows[0]["usd"]) == P5
    assert sum(Decimal(r["usd"]) for r in rows) == pytest.approx(
        Decimal(rows[0]["cluster_spend_usd"]), abs=Decimal("0.01")
    )
    assert granted == [{"Sid": "WriteUsageCsv", "Effect": "Allow", "Action": "s3:PutObject",
                        "Resource": "arn:aws:s3:::finance-exports/hpc/usage/*"}]  # fmt: skip
    assert {p["ExpectedBucketOwner"] for p in sent} == {ACCOUNT}  # never a bucket of another account


def test_only_the_clusters_owners_and_admins_may_set_its_account_budgets(world: World) -> None:
    event = api_event(
        "put_account_budgets", path_parameters={"name": "c1"}, body={"accountBudgets": {"x": 1}}
    )
    event["requestContext"]["identity"]["userArn"] = f"arn:aws:sts::{ACCOUNT}:assumed-role/Student/bob"
    status, body = call(event)
    assert status == 403, body
    assert world.usage.account_budgets("c1") == {}
