"""BudgetAlertsFunction's use case under test: the state table in moto's DynamoDB (its conditional writes
are what dedupe), small fakes of Budgets, SageMaker, SNS and EventBridge that record the calls made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot.dal.state_table import StateTable
from autopilot.logic.budget_alerts import BudgetAlertDeps
from autopilot.models.records import Cluster, ClusterStatus
from autopilot.settings import BudgetAlertsSettings
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.deploy import load_template
from tests.samples import load_event
from tests.samples.state_table import create_state_table

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
TABLE = "state"
ACCOUNT = "123456789012"
ALERTS = f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts"
API_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/dev"
NOW = datetime(2026, 11, 10, 8, 1, tzinfo=UTC)
EVENT_MESSAGE = str(load_event("budgets/sns_notification.json")["Records"][0]["Sns"]["Message"])


def group(name: str, target: int, **extra: Any) -> dict[str, Any]:
    return {
        "InstanceGroupName": name,
        "InstanceType": "ml.p5.48xlarge",
        "CurrentCount": target,
        "TargetCount": target,
        "Status": "InService",
        "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/sagemaker-hyperpod-execution-role",
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/src/", "OnCreate": "on_create.sh"},
        "ThreadsPerCore": 1,
        **extra,
    }


# -- the use case ------------------------------------------------------------------------------------
@dataclass
class FakeBudgets:
    spend: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (actual, forecast)
    limit: str = "2500.0"

    def describe_budget(self, *, AccountId: str, BudgetName: str) -> dict[str, Any]:
        if BudgetName not in self.spend:
            raise ClientError({"Error": {"Code": "NotFoundException", "Message": "nope"}}, "DescribeBudget")
        actual, forecast = self.spend[BudgetName]
        return {
            "Budget": {
                "BudgetName": BudgetName,
                "BudgetLimit": {"Amount": self.limit, "Unit": "USD"},
                "TimeUnit": "MONTHLY",
                "CalculatedSpend": {
                    "ActualSpend": {"Amount": actual, "Unit": "USD"},
                    "ForecastedSpend": {"Amount": forecast, "Unit": "USD"},
                },
            }
        }


@dataclass
class FakeSageMaker:
    groups: list[dict[str, Any]]
    updates: list[dict[str, Any]] = field(default_factory=list)
    fail_with: str | None = None

    def describe_cluster(self, *, ClusterName: str) -> dict[str, Any]:
        return {"ClusterName": ClusterName, "ClusterStatus": "InService", "InstanceGroups": self.groups}

    def update_cluster(self, **request: Any) -> dict[str, Any]:
        if self.fail_with:
            raise ClientError({"Error": {"Code": self.fail_with, "Message": "no"}}, "UpdateCluster")
        self.updates.append(request)
        return {"ClusterArn": "arn"}


@dataclass
class FakeSns:
    published: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0
    dies: bool = False

    def publish(self, **request: Any) -> dict[str, str]:
        if self.dies:
            raise TimeoutError("Task timed out")
        if self.failures:
            self.failures -= 1
            raise ClientError({"Error": {"Code": "InternalError", "Message": "down"}}, "Publish")
        self.published.append(request)
        return {"MessageId": f"m-{len(self.published)}"}

    def alerts(self) -> list[dict[str, Any]]:
        return [json.loads(p["Message"]) for p in self.published]


@dataclass
class FakeEvents:
    details: list[dict[str, Any]] = field(default_factory=list)
    down: bool = False

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.down:
            raise ClientError({"Error": {"Code": "InternalException", "Message": "down"}}, "PutEvents")
        self.details += [json.loads(e["Detail"]) for e in Entries]
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}


def cluster(name: str, enforcement: str = "alert", status: ClusterStatus = ClusterStatus.ACTIVE) -> Cluster:
    return Cluster(
        cluster_name=name,
        status=status,
        created_at="2026-11-01T00:00:00.000Z",
        updated_at="2026-11-01T00:00:00.000Z",
        last_operation_id="op-20261101000000-aaaaaaaa",
        owner="alice",
        project="llm-pretraining",
        budget_name=f"hyperpod-{name}",
        budget_enforcement=enforcement,
        worker_groups=["worker-group-1"],
    )


@dataclass
class World:
    deps: BudgetAlertDeps
    store: StateTable
    alerts: BudgetAlertTable
    budgets: FakeBudgets
    sagemaker: FakeSageMaker
    sns: FakeSns
    events: FakeEvents
    clock: list[datetime]

    def register(self, registered: Cluster) -> None:
        item: dict[str, Any] = {
            "pk": {"S": f"CLUSTER#{registered.cluster_name}"},
            "sk": {"S": f"CLUSTER#{registered.cluster_name}"},
            "kind": {"S": "CLUSTER"},
        }
        for key, value in registered.model_dump(by_alias=True, mode="json", exclude_none=True).items():
            item[key] = {"L": [{"S": v} for v in value]} if isinstance(value, list) else {"S": str(value)}
        boto3.client("dynamodb", region_name="us-east-1").put_item(TableName=TABLE, Item=item)


@pytest.fixture
def world() -> Iterator[World]:
    environment = TEMPLATE["Resources"]["BudgetAlertsFunction"]["Properties"]["Environment"]["Variables"]
    assert set(environment) == {"ALERTS_TOPIC_ARN", "API_URL"}  # what the settings below stand for
    settings = BudgetAlertsSettings(STATE_TABLE_NAME=TABLE, ALERTS_TOPIC_ARN=ALERTS, API_URL=API_URL)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(ddb, TABLE)
        clock = [NOW]
        store, alerts = StateTable(TABLE, client=ddb), BudgetAlertTable(TABLE, ddb=ddb)
        fakes = (
            FakeBudgets({"hyperpod-ml-cluster": ("2210.5", "3900")}),
            FakeSageMaker([group("controller-machine", 1), group("worker-group-1", 4, MinCount=1)]),
            FakeSns(),
            FakeEvents(),
        )
        deps = BudgetAlertDeps(
            settings=settings,
            store=store,
            alerts=alerts,
            budgets=cast(Any, fakes[0]),
            sagemaker=cast(Any, fakes[1]),
            sns=cast(Any, fakes[2]),
            events=cast(Any, fakes[3]),
            hourly_rate=lambda name, day: (
                (Decimal("396.94"), "spend-meter") if (name, day) == ("ml-cluster", NOW.date()) else None
            ),
            now=lambda: clock[0],
        )
        yield World(deps, store, alerts, *fakes, clock)


# DescribeBudget's figures once ACTUAL spend is past the $2,500 limit (what a real 100 % notification follows)
OVER = ("2610.25", "3900")


def crossing(percent: int, alert_type: str = "ACTUAL", name: str = "hyperpod-ml-cluster") -> str:
    threshold = Decimal(2500) * percent / 100
    return (
        EVENT_MESSAGE.replace("> $2,000.00", f"> ${threshold:,.2f}")
        .replace("ACTUAL", alert_type)
        .replace("hyperpod-ml-cluster", name)
    )
