# ruff: noqa: F811  (the fixtures of cli_support, imported, are the tests' parameters)
"""`autopilot usage` and `autopilot account-budgets` through main(), against the fake API that answers
only what docs/openapi.json allows: the query sent, the table, json and csv forms, the warnings on
stderr, a bad month refused before any request, the budgets' body."""

from __future__ import annotations

import csv
import io
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.unit.cli_fake_api import FakeApi
from tests.unit.cli_support import api, no_saved_config, run  # noqa: F401  (fixtures)

REPORT = {
    "clusterName": "ml-cluster",
    "month": "2026-11",
    "by": "account",
    "lines": [
        {"name": "physics", "usd": 688.24, "gpuHours": 56.0, "jobs": 2, "percent": 58.9, "budgetUsd": 5000.0},
        {"name": "chemistry", "usd": 294.96, "gpuHours": 24.0, "jobs": 1, "percent": 25.2, "budgetUsd": None},
        {
            "name": "(unused capacity)",
            "usd": 185.44,
            "gpuHours": 0.0,
            "jobs": 0,
            "percent": 15.9,
            "budgetUsd": None,
        },
    ],
    "jobsUsd": 983.2,
    "clusterSpendUsd": 1168.64,
    "totalUsd": 1168.64,
    "asOf": "2026-11-10T17:15:00.000Z",
    "warnings": [],
}


def test_usage_asks_for_the_month_and_grouping_and_prints_a_table(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters/ml-cluster/usage", (200, REPORT))

    code, out, err = run("usage", "ml-cluster", "--by", "account", "--month", "2026-11")

    assert (code, err) == (0, "")
    query = parse_qs(urlsplit(api.requests[0]["url"]).query)
    assert query == {"by": ["account"], "month": ["2026-11"]}
    lines = out.splitlines()
    assert lines[0].startswith("ml-cluster 2026-11 by account: 1,168.64 USD")
    assert lines[1].split() == ["ACCOUNT", "USD", "%", "GPU-HOURS", "JOBS", "BUDGET"]
    assert lines[2].split() == ["physics", "688.24", "58.9", "56.0", "2", "5,000.00"]
    assert lines[4].split()[:3] == ["(unused", "capacity)", "185.44"]


def test_usage_as_csv_has_a_header_and_a_row_per_line(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters/ml-cluster/usage", (200, REPORT))

    code, out, _ = run("usage", "ml-cluster", "--format", "csv")

    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["name"] for r in rows] == ["physics", "chemistry", "(unused capacity)"]
    assert rows[0] == {
        "cluster": "ml-cluster", "month": "2026-11", "by": "account", "name": "physics", "usd": "688.24",
        "gpuHours": "56.0", "jobs": "2", "percent": "58.9", "budgetUsd": "5000.0",
    }  # fmt: skip
    assert rows[1]["budgetUsd"] == ""
    assert parse_qs(urlsplit(api.requests[0]["url"]).query) == {"by": ["account"]}


def test_usage_as_json_is_the_report_and_its_warnings_go_to_stderr(api: FakeApi, run: Any) -> None:
    warned = {**REPORT, "warnings": ["the month's jobs cost $3.00 more than the spend meter counted"]}
    api.answer("GET", "/clusters/ml-cluster/usage", (200, warned))

    code, out, err = run("usage", "ml-cluster", "--by", "user", "--output", "json")

    assert code == 0
    assert json.loads(out) == warned
    assert err == "warning: the month's jobs cost $3.00 more than the spend meter counted\n"


def test_a_bad_month_is_refused_before_any_request(api: FakeApi, run: Any) -> None:
    code, _, err = run("usage", "ml-cluster", "--month", "2026-13")

    assert code == 2
    assert "is not a month as YYYY-MM" in err
    assert api.requests == []


def test_account_budgets_sends_every_budget(api: FakeApi, run: Any) -> None:
    answer = {"clusterName": "ml-cluster", "accountBudgets": {"chemistry": 1200.0, "physics": 5000.0}}
    api.answer("PUT", "/clusters/ml-cluster/account-budgets", (200, answer))

    code, out, _ = run(
        "account-budgets", "ml-cluster", "--budget", "physics=5000", "--budget", "chemistry=1200"
    )

    assert code == 0
    assert json.loads(api.requests[0]["body"]) == {"accountBudgets": {"physics": 5000.0, "chemistry": 1200.0}}
    assert out.splitlines()[1].split() == ["chemistry", "1,200.00"]
