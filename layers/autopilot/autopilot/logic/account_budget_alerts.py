"""Department budgets: when a Slurm account's jobs on a cluster cross 50, 80 or 100 % of its monthly
budget (``accountBudgets``), ONE enriched alert per threshold and month on the alerts topic — the
account, its spend and budget, its top users, the jobs Slurm runs now — as BudgetAlertsFunction does
for a cluster's AWS Budget.

Checked after each agent report carrying finished jobs (logic/usage_ingest.py), against the month's
totals as the state table holds them. The conditional put of ``ACCTALERT#<month>#<account>#<threshold>``
is the dedup: of two invocations crossing at once one publishes. A publish SNS refuses releases the
claim and fails the report; the agent resends it and the check runs again. An invocation that dies
between its claim and its publish leaves a claim without ``publishedAt``: past ALERT_CLAIM_LEASE the
next report carrying jobs takes it over and publishes (at least once, never lost).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from autopilot.dal.usage import RETENTION
from autopilot.logic.spend_meter import month_end
from autopilot.models.agent import SlurmNode
from autopilot.models.usage import (
    ACCOUNT_BUDGET_THRESHOLDS,
    RUNNING_JOBS_LISTED,
    TOP_USERS,
    AccountBudgetAlert,
    TopUser,
    UsageTotals,
)
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.logic.usage_ingest import UsageDeps

SNS_SUBJECT_MAX = 100


def crossed(spend: Decimal, budget: Decimal) -> list[int]:
    """The thresholds (percent) ``spend`` has reached of ``budget``."""
    return [t for t in ACCOUNT_BUDGET_THRESHOLDS if budget > 0 and spend * 100 >= budget * t]


def top_users(totals: Sequence[UsageTotals], limit: int = TOP_USERS) -> list[TopUser]:
    ranked = sorted(totals, key=lambda t: (-t.usd, t.user))[:limit]
    return [
        TopUser(user=t.user, usd=t.usd.quantize(Decimal("0.01")), gpu_hours=t.gpu_hours, jobs=t.jobs)
        for t in ranked
    ]


def running_jobs(nodes: Sequence[SlurmNode]) -> list[str]:
    """The distinct jobs on the report's nodes, in job-id order (numbers as numbers)."""
    ids = {job for node in nodes for job in node.jobs}
    return sorted(ids, key=lambda j: (len(j), j))


def account_alert(
    cluster_name: str,
    account: str,
    month: str,
    threshold: int,
    *,
    totals: Sequence[UsageTotals],
    budget: Decimal,
    running: Sequence[SlurmNode],
    owner: str | None,
    project: str | None,
) -> AccountBudgetAlert:
    spend = sum((t.usd for t in totals), Decimal(0))
    jobs = running_jobs(running)
    percent = (spend * 100 / budget).quantize(Decimal("0.1"))
    return AccountBudgetAlert(
        summary=f"Slurm account {account} has spent ${spend:.2f} on cluster {cluster_name} in {month}: "
        f"{percent}% of its ${budget:.2f} budget (threshold {threshold}%). List prices of the nodes its "
        f"jobs held; {len(jobs)} jobs run on the cluster now.",
        cluster_name=cluster_name,
        owner=owner,
        project=project,
        account=account,
        month=month,
        threshold_percent=threshold,
        spend_usd=spend.quantize(Decimal("0.01")),
        budget_usd=budget,
        percent_of_budget=percent,
        top_users=top_users(totals),
        running_jobs=jobs[:RUNNING_JOBS_LISTED],
        running_job_count=len(jobs),
    )


def check_account_budgets(
    deps: UsageDeps,
    cluster_name: str,
    *,
    scope: str | None = None,
    accounts: Collection[str],
    months: Collection[str],
    running: Sequence[SlurmNode],
    now: datetime,
) -> int:
    """Publish the alerts due for ``accounts`` in ``months``; how many were published. ``scope``: the
    cluster's incarnation (dal/usage.py usage_scope) whose totals and claims count; the budgets are the
    registry item's."""
    budgets = deps.usage.account_budgets(cluster_name)
    incarnation = scope or cluster_name
    if not budgets:
        return 0
    owner, project = deps.cluster_tags(cluster_name)
    sent = 0
    for month in sorted(months):
        # with the accounts whose alert an invocation claimed and died before publishing
        pending = deps.usage.unpublished_alert_accounts(incarnation, month, now=now)
        for account in sorted(a for a in {*accounts, *pending} if a in budgets):
            totals = deps.usage.month_totals(incarnation, month, account=account)
            budget = Decimal(budgets[account])
            spend = sum((t.usd for t in totals), Decimal(0))
            for threshold in crossed(spend, budget):
                expires = int(
                    (month_end(datetime.fromisoformat(f"{month}-01T00:00:00+00:00")) + RETENTION).timestamp()
                )
                if not deps.usage.claim_account_alert(
                    incarnation, month, account, threshold, now=now, expires_at=expires
                ):
                    continue
                alert = account_alert(
                    cluster_name,
                    account,
                    month,
                    threshold,
                    totals=totals,
                    budget=budget,
                    running=running,
                    owner=owner,
                    project=project,
                )
                try:
                    deps.sns().publish(
                        TopicArn=deps.alerts_topic_arn,
                        Subject=f"{cluster_name}: Slurm account {account} at {threshold}% of its budget"[
                            :SNS_SUBJECT_MAX
                        ],
                        Message=json.dumps(alert.model_dump(mode="json", by_alias=True), indent=2),
                        MessageAttributes={
                            "kind": {"DataType": "String", "StringValue": alert.kind},
                            "clusterName": {"DataType": "String", "StringValue": cluster_name},
                        },
                    )
                except (ClientError, BotoCoreError):
                    deps.usage.release_account_alert(incarnation, month, account, threshold)
                    raise
                deps.usage.mark_account_alert_published(incarnation, month, account, threshold, now=now)
                logger.info(
                    "account budget alert published",
                    cluster=cluster_name,
                    account=account,
                    month=month,
                    threshold=threshold,
                    spend_usd=str(alert.spend_usd),
                )
                sent += 1
    return sent
