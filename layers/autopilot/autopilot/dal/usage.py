"""Chargeback's items in the state table (docs/operations.md, "Chargeback"). Their ``<scope>`` is the
cluster's incarnation, ``<name>@<createdAt>`` (usage_scope): a cluster deleted and created again under
the same name starts its chargeback afresh — its Slurm restarts at job 1, and the old cluster's totals,
alert claims and counted jobs stay the old one's (they expire with the table's TTL):

- ``CLUSTER#<scope>`` / ``USAGEJOB#<jobId>@<start epoch>``: a finished job, priced (models/usage.py
  JobCost) — its presence is what makes a report's job count once (the start too: a Slurm whose job ids
  restart, its state lost, reuses an id for a new job);
- ``CLUSTER#<scope>`` / ``USAGE#<YYYY-MM>#<account>#<user>``: the month's totals of one Slurm account
  and user (usd, gpuHours, jobs, unpricedJobs: those with a node that could not be priced), ADDed to
  by each job (per-account and per-user lines are their sums);
- ``CLUSTER#<scope>`` / ``ACCTALERT#<YYYY-MM>#<account>#<threshold>``: a department budget's alert of
  that month and threshold, claimed (``claimedAt``; the conditional put is the dedup) and sent
  (``publishedAt``); a claim left unpublished past ALERT_CLAIM_LEASE is taken over;
- ``CLUSTER#<scope>`` / ``USAGEEXPORT#<YYYY-MM>``: the closed month's CSV was written for finance;
- ``CLUSTER#<scope>`` / ``USAGENODES``: Slurm node name -> instance type of the nodes earlier reports
  found listed, so a job's node replaced (gone from ListClusterNodes) before its report is still priced;
- the registry item's (``CLUSTER#<name>``) ``accountBudgets`` (PUT /clusters/{name}/account-budgets).

A job is written with the ADDs of its totals in one TransactWriteItems whose job put is conditional
(``attribute_not_exists``): however often a report is retried or resent, and wherever an invocation
dies, a job is counted once or not at all (then its next report counts it). All items but the
registry's carry ``expiresAt`` (the table's TTL) and no ``kind``: they are never listed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, Protocol

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient, error_code
from autopilot.dal.table import attribute_value, from_attributes, is_condition_failure, time_value
from autopilot.models.records import iso
from autopilot.models.usage import JobCost, UsageTotals

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# Jobs and totals outlive their month for more than a year (last year's chargeback stays readable).
RETENTION: Final = timedelta(days=400)
# DynamoDB's limits: 100 items per TransactWriteItems, 100 keys per BatchGetItem.
MAX_TRANSACTION_ITEMS: Final = 100
# ... and 4 MB per TransactWriteItems: a batch stops short of this (the items' estimated JSON size, a
# margin for DynamoDB's own accounting of names and types).
MAX_TRANSACTION_BYTES: Final = 3_500_000
# a totals update's size at most (names, account, user, month, three numbers)
_TOTALS_UPDATE_BYTES: Final = 1_000
MAX_BATCH_GET: Final = 100
# Longer than AgentFunction's timeout (30 s): a claim this old and not published belongs to an
# invocation that died between its claim and its publish, and the next report publishes the alert.
ALERT_CLAIM_LEASE: Final = timedelta(minutes=2)
# A released claim's claimedAt: older than any lease, so it is claimed again at once.
RELEASED: Final = datetime(1970, 1, 1, tzinfo=UTC)
# Slurm node names remembered per cluster with their instance type (~40 bytes each: the item stays far
# under DynamoDB's 400 KB); past it only the nodes listed now are kept.
MAX_REMEMBERED_NODES: Final = 5_000
# A transaction cancelled for a job another invocation counted meanwhile is rebuilt without it; more
# rounds than this means something else is wrong.
_MAX_ROUNDS: Final = 5


class UnprocessedKeysError(RuntimeError):
    """BatchGetItem kept leaving keys unread (throttling): the report fails and is sent again."""


def _pk(cluster_name: str) -> str:
    return f"CLUSTER#{cluster_name}"


def usage_scope(cluster_name: str, created_at: datetime | None) -> str:
    """The key of one incarnation of cluster ``cluster_name`` (its registry item's createdAt) that the
    usage items' methods below take for ``cluster_name`` ("@" is in no cluster name); the name alone
    for a cluster without a registry item. The account budgets stay on the registry item (the name)."""
    return f"{cluster_name}@{iso(created_at)}" if created_at else cluster_name


def job_key(cluster_name: str, job_ref: str) -> dict[str, Any]:
    """``job_ref``: models/usage.py job_ref (the job id and its start)."""
    return {"pk": {"S": _pk(cluster_name)}, "sk": {"S": f"USAGEJOB#{job_ref}"}}


def totals_sk(month: str, account: str, user: str) -> str:
    # Slurm account and user names never hold "#" (models/agent.py SLURM_NAME)
    return f"USAGE#{month}#{account}#{user}"


def alert_key(cluster_name: str, month: str, account: str, threshold: int) -> dict[str, Any]:
    return {"pk": {"S": _pk(cluster_name)}, "sk": {"S": f"ACCTALERT#{month}#{account}#{threshold}"}}


def nodes_key(cluster_name: str) -> dict[str, Any]:
    return {"pk": {"S": _pk(cluster_name)}, "sk": {"S": "USAGENODES"}}


def export_key(cluster_name: str, month: str) -> dict[str, Any]:
    return {"pk": {"S": _pk(cluster_name)}, "sk": {"S": f"USAGEEXPORT#{month}"}}


def totals_adds(cost: JobCost) -> dict[tuple[str, str, str], tuple[Decimal, Decimal, int]]:
    """(month, account, user) -> (usd, gpuHours, jobs) a job adds: its share of each month it ran in,
    and one job to the month it ended in."""
    adds: dict[tuple[str, str, str], tuple[Decimal, Decimal, int]] = {}
    for month, share in cost.months.items():
        adds[(month, cost.account, cost.user)] = (share.usd, share.gpu_hours, 0)
    key = (cost.ended_month, cost.account, cost.user)
    usd, gpu_hours, _ = adds.get(key, (Decimal(0), Decimal(0), 0))
    adds[key] = (usd, gpu_hours, 1)
    return adds


class UsageStore(Protocol):
    def known_jobs(self, cluster_name: str, job_refs: Sequence[str]) -> set[str]:
        """Which of the jobs (models/usage.py job_ref) are counted already."""

    def record_jobs(self, cluster_name: str, costs: Sequence[JobCost], *, now: datetime) -> list[str]:
        """Count the jobs not yet counted, each with its totals, atomically per job; their refs."""

    def month_totals(self, cluster_name: str, month: str, *, account: str | None = None) -> list[UsageTotals]:
        """The month's (account, user) totals, of one account or all."""

    def account_budgets(self, cluster_name: str) -> dict[str, str]:
        """The registry item's accountBudgets (USD a month as text); {} without any or any cluster."""

    def set_account_budgets(
        self, cluster_name: str, budgets: dict[str, str], *, updated_at: datetime
    ) -> bool:
        """Replace the registry item's accountBudgets; False when the cluster is not registered."""

    def claim_account_alert(
        self, cluster_name: str, month: str, account: str, threshold: int, *, now: datetime, expires_at: int
    ) -> bool:
        """Claim the alert for publishing; False when it was published, or is claimed by an invocation
        that may still publish it (a claim older than ALERT_CLAIM_LEASE without a publish is taken over:
        its invocation died between the claim and the publish)."""

    def mark_account_alert_published(
        self, cluster_name: str, month: str, account: str, threshold: int, *, now: datetime
    ) -> None: ...

    def release_account_alert(self, cluster_name: str, month: str, account: str, threshold: int) -> None:
        """Give up a claim whose alert could not be published: claimable again at once (the resend of
        the report, or any later report with jobs, publishes it)."""

    def unpublished_alert_accounts(self, cluster_name: str, month: str, *, now: datetime) -> set[str]:
        """Accounts with a claim older than ALERT_CLAIM_LEASE and not published (an invocation died)."""

    def remembered_node_types(self, cluster_name: str) -> dict[str, str]:
        """Slurm node name -> instance type of the nodes earlier reports' jobs found listed."""

    def remember_node_types(self, cluster_name: str, types: dict[str, str], *, now: datetime) -> None:
        """Add ``types`` to what is remembered (past MAX_REMEMBERED_NODES, ``types`` alone is)."""

    def closed_month_exported(self, cluster_name: str, month: str) -> bool:
        """Whether the closed month's CSV was written for finance (UsageExportFunction)."""

    def mark_closed_month_exported(
        self, cluster_name: str, month: str, *, at: datetime, expires_at: int
    ) -> None: ...


class UsageTable:
    """UsageStore on the state table (DynamoDB)."""

    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def known_jobs(self, cluster_name: str, job_refs: Sequence[str]) -> set[str]:
        known: set[str] = set()
        unique = list(dict.fromkeys(job_refs))
        for first in range(0, len(unique), MAX_BATCH_GET):
            keys = [job_key(cluster_name, j) for j in unique[first : first + MAX_BATCH_GET]]
            request: dict[str, Any] = {
                self._table: {"Keys": keys, "ProjectionExpression": "sk", "ConsistentRead": True}
            }
            for attempt in range(_MAX_ROUNDS + 1):
                answer = self.dynamodb.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self._table, []):
                    known.add(str(item["sk"]["S"]).removeprefix("USAGEJOB#"))
                request = dict(answer.get("UnprocessedKeys") or {})
                if not request:
                    break
                # throttled past the SDK's retries: back off, then fail the report (the agent resends)
                time.sleep(0.05 * 2**attempt)
            else:
                raise UnprocessedKeysError(
                    f"DynamoDB left {len(keys)} job keys unread after {_MAX_ROUNDS} rounds"
                )
        return known

    def record_jobs(self, cluster_name: str, costs: Sequence[JobCost], *, now: datetime) -> list[str]:
        expires_at = int((now + RETENTION).timestamp())
        recorded: list[str] = []
        waiting = list(costs)
        rounds = 0
        while waiting:
            batch, waiting = _next_batch(waiting)
            try:
                self.dynamodb.transact_write_items(
                    TransactItems=self._writes(cluster_name, batch, expires_at=expires_at)
                )
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                rounds += 1
                if rounds > _MAX_ROUNDS:
                    raise
                # Some job of the batch was counted meanwhile (another invocation of the same report):
                # nothing of the batch was written; it is tried again without the jobs now present.
                present = self.known_jobs(cluster_name, [c.ref for c in batch])
                waiting = [c for c in batch if c.ref not in present] + waiting
                continue
            recorded += [c.ref for c in batch]
        return recorded

    def _writes(
        self, cluster_name: str, batch: Sequence[JobCost], *, expires_at: int
    ) -> list[TransactWriteItemTypeDef]:
        writes: list[TransactWriteItemTypeDef] = []
        totals: dict[tuple[str, str, str], list[Any]] = {}
        for cost in batch:
            item = {
                **job_key(cluster_name, cost.ref),
                **{
                    k: attribute_value(v)
                    for k, v in cost.model_dump(
                        by_alias=True, mode="python", exclude_none=True, exclude={"months", "start", "end"}
                    ).items()
                },
                "start": time_value(cost.start),
                "end": time_value(cost.end),
                "months": attribute_value({m: s.model_dump(by_alias=True) for m, s in cost.months.items()}),
                "expiresAt": {"N": str(expires_at)},
            }
            writes.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": item,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
            for key, (usd, gpu_hours, jobs) in totals_adds(cost).items():
                held = totals.setdefault(key, [Decimal(0), Decimal(0), 0, 0])
                held[0] += usd
                held[1] += gpu_hours
                held[2] += jobs
                held[3] += jobs if cost.unpriced_nodes else 0  # the usage report's warning
        for (month, account, user), (usd, gpu_hours, jobs, unpriced) in totals.items():
            writes.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": {
                            "pk": {"S": _pk(cluster_name)},
                            "sk": {"S": totals_sk(month, account, user)},
                        },
                        "UpdateExpression": "SET account = :account, #user = :user, #month = :month, "
                        "expiresAt = :expires ADD usd :usd, gpuHours :gpuHours, jobs :jobs, "
                        "unpricedJobs :unpriced",
                        # "user" and "month" are DynamoDB reserved words
                        "ExpressionAttributeNames": {"#user": "user", "#month": "month"},
                        "ExpressionAttributeValues": {
                            ":account": {"S": account},
                            ":user": {"S": user},
                            ":month": {"S": month},
                            ":expires": {"N": str(expires_at)},
                            ":usd": {"N": str(usd)},
                            ":gpuHours": {"N": str(gpu_hours)},
                            ":jobs": {"N": str(jobs)},
                            ":unpriced": {"N": str(unpriced)},
                        },
                    }
                }
            )
        return writes

    def month_totals(self, cluster_name: str, month: str, *, account: str | None = None) -> list[UsageTotals]:
        prefix = f"USAGE#{month}#" + (f"{account}#" if account is not None else "")
        found: list[UsageTotals] = []
        paginator = self.dynamodb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": _pk(cluster_name)}, ":prefix": {"S": prefix}},
            ConsistentRead=True,
        ):
            found += [UsageTotals.model_validate(from_attributes(item)) for item in page.get("Items", [])]
        return found

    def account_budgets(self, cluster_name: str) -> dict[str, str]:
        item = self.dynamodb.get_item(
            TableName=self._table,
            Key={"pk": {"S": _pk(cluster_name)}, "sk": {"S": _pk(cluster_name)}},
            ProjectionExpression="accountBudgets",
            ConsistentRead=True,
        ).get("Item")
        budgets = from_attributes(item).get("accountBudgets") if item else None
        return {str(k): str(v) for k, v in (budgets or {}).items()}

    def set_account_budgets(
        self, cluster_name: str, budgets: dict[str, str], *, updated_at: datetime
    ) -> bool:
        key = {"pk": {"S": _pk(cluster_name)}, "sk": {"S": _pk(cluster_name)}}
        if budgets:
            expression = "SET accountBudgets = :budgets, updatedAt = :now"
            values: dict[str, Any] = {
                ":budgets": attribute_value(budgets),
                ":now": time_value(updated_at),
            }
        else:
            expression, values = (
                "SET updatedAt = :now REMOVE accountBudgets",
                {":now": time_value(updated_at)},
            )
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def claim_account_alert(
        self, cluster_name: str, month: str, account: str, threshold: int, *, now: datetime, expires_at: int
    ) -> bool:
        try:
            self.dynamodb.put_item(
                TableName=self._table,
                Item={
                    **alert_key(cluster_name, month, account, threshold),
                    "account": {"S": account},
                    "claimedAt": {"S": iso(now)},
                    "expiresAt": {"N": str(expires_at)},
                },
                ConditionExpression="attribute_not_exists(pk) OR "
                "(attribute_not_exists(publishedAt) AND claimedAt < :stale)",
                ExpressionAttributeValues={":stale": {"S": iso(now - ALERT_CLAIM_LEASE)}},
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def mark_account_alert_published(
        self, cluster_name: str, month: str, account: str, threshold: int, *, now: datetime
    ) -> None:
        self.dynamodb.update_item(
            TableName=self._table,
            Key=alert_key(cluster_name, month, account, threshold),
            UpdateExpression="SET publishedAt = :now",
            ExpressionAttributeValues={":now": {"S": iso(now)}},
        )

    def unpublished_alert_accounts(self, cluster_name: str, month: str, *, now: datetime) -> set[str]:
        stale = iso(now - ALERT_CLAIM_LEASE)
        accounts: set[str] = set()
        for page in self.dynamodb.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            FilterExpression="attribute_not_exists(publishedAt) AND claimedAt < :stale",
            ExpressionAttributeValues={
                ":pk": {"S": _pk(cluster_name)},
                ":prefix": {"S": f"ACCTALERT#{month}#"},
                ":stale": {"S": stale},
            },
            ConsistentRead=True,
        ):
            accounts |= {str(item["account"]["S"]) for item in page.get("Items", []) if "account" in item}
        return accounts

    def release_account_alert(self, cluster_name: str, month: str, account: str, threshold: int) -> None:
        # An UpdateItem, not a DeleteItem (AgentFunction has none on the table): the claim is made older
        # than any lease, so the resend of the report claims it again at once, and until then it is
        # one unpublished_alert_accounts lists for any later report.
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=alert_key(cluster_name, month, account, threshold),
                UpdateExpression="SET claimedAt = :released",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(publishedAt)",
                ExpressionAttributeValues={":released": {"S": iso(RELEASED)}},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise

    def remembered_node_types(self, cluster_name: str) -> dict[str, str]:
        item = self.dynamodb.get_item(TableName=self._table, Key=nodes_key(cluster_name)).get("Item")
        types = from_attributes(item).get("types") if item else None
        return {str(k): str(v) for k, v in (types or {}).items()}

    def remember_node_types(self, cluster_name: str, types: dict[str, str], *, now: datetime) -> None:
        known = self.remembered_node_types(cluster_name)
        if all(known.get(name) == kind for name, kind in types.items()):
            return
        # Best effort, one PutItem: two invocations at once may drop each other's new names, which the
        # next report's listing adds again.
        merged = types if len(known) + len(types) > MAX_REMEMBERED_NODES else {**known, **types}
        self.dynamodb.put_item(
            TableName=self._table,
            Item={
                **nodes_key(cluster_name),
                "types": attribute_value(dict(list(merged.items())[:MAX_REMEMBERED_NODES])),
                "expiresAt": {"N": str(int((now + RETENTION).timestamp()))},
            },
        )

    def closed_month_exported(self, cluster_name: str, month: str) -> bool:
        item = self.dynamodb.get_item(
            TableName=self._table, Key=export_key(cluster_name, month), ConsistentRead=True
        ).get("Item")
        return item is not None

    def mark_closed_month_exported(
        self, cluster_name: str, month: str, *, at: datetime, expires_at: int
    ) -> None:
        self.dynamodb.put_item(
            TableName=self._table,
            Item={
                **export_key(cluster_name, month),
                "exportedAt": time_value(at),
                "expiresAt": {"N": str(expires_at)},
            },
        )


def _item_bytes(cost: JobCost) -> int:
    return len(cost.model_dump_json(by_alias=True)) + 200  # and its keys and expiresAt


def _next_batch(costs: Sequence[JobCost]) -> tuple[list[JobCost], list[JobCost]]:
    """The first jobs whose puts and (merged) totals updates fit one transaction — in items and in
    bytes — and the rest."""
    batch: list[JobCost] = []
    keys: set[tuple[str, str, str]] = set()
    size = 0
    for index, cost in enumerate(costs):
        mine = set(totals_adds(cost))
        grown = size + _item_bytes(cost) + _TOTALS_UPDATE_BYTES * len(mine - keys)
        if batch and (
            len(batch) + 1 + len(keys | mine) > MAX_TRANSACTION_ITEMS or grown > MAX_TRANSACTION_BYTES
        ):
            return batch, list(costs[index:])
        batch.append(cost)
        keys |= mine
        size = grown
    return batch, []


class InMemoryUsageStore:
    """UsageStore in memory with the same rules (unit tests); ``budgets`` stands for the
    registry items' accountBudgets of the clusters it was given."""

    def __init__(self, clusters: Iterable[str] = ()) -> None:
        self.jobs: dict[tuple[str, str], JobCost] = {}
        self.totals: dict[tuple[str, str, str, str], UsageTotals] = {}
        self.alerts: set[tuple[str, str, str, int]] = set()  # published
        self.claims: dict[tuple[str, str, str, int], datetime] = {}
        self.exported: set[tuple[str, str]] = set()
        self.node_types: dict[str, dict[str, str]] = {}
        self.budgets: dict[str, dict[str, str]] = {name: {} for name in clusters}
        # a test makes a transaction fail after N jobs: nothing of that transaction is kept
        self.fail_after: int | None = None

    def known_jobs(self, cluster_name: str, job_refs: Sequence[str]) -> set[str]:
        return {j for j in job_refs if (cluster_name, j) in self.jobs}

    def record_jobs(self, cluster_name: str, costs: Sequence[JobCost], *, now: datetime) -> list[str]:
        recorded: list[str] = []
        for cost in costs:
            if (cluster_name, cost.ref) in self.jobs:
                continue
            if self.fail_after is not None and len(recorded) >= self.fail_after:
                raise RuntimeError("the transaction failed (test)")
            self.jobs[(cluster_name, cost.ref)] = cost
            for (month, account, user), (usd, gpu_hours, jobs) in totals_adds(cost).items():
                held = self.totals.setdefault(
                    (cluster_name, month, account, user),
                    UsageTotals(account=account, user=user, month=month),
                )
                held.usd += usd
                held.gpu_hours += gpu_hours
                held.jobs += jobs
                held.unpriced_jobs += jobs if cost.unpriced_nodes else 0
            recorded.append(cost.ref)
        return recorded

    def month_totals(self, cluster_name: str, month: str, *, account: str | None = None) -> list[UsageTotals]:
        return [
            t.model_copy()
            for (name, m, a, _), t in sorted(self.totals.items())
            if name == cluster_name and m == month and (account is None or a == account)
        ]

    def account_budgets(self, cluster_name: str) -> dict[str, str]:
        return dict(self.budgets.get(cluster_name, {}))

    def set_account_budgets(
        self, cluster_name: str, budgets: dict[str, str], *, updated_at: datetime
    ) -> bool:
        if cluster_name not in self.budgets:
            return False
        self.budgets[cluster_name] = dict(budgets)
        return True

    def claim_account_alert(
        self, cluster_name: str, month: str, account: str, threshold: int, *, now: datetime, expires_at: int
    ) -> bool:
        key = (cluster_name, month, account, threshold)
        claimed = self.claims.get(key)
        if key in self.alerts or (claimed is not None and claimed > now - ALERT_CLAIM_LEASE):
            return False
        self.claims[key] = now
        return True

    def mark_account_alert_published(
        self, cluster_name: str, month: str, account: str, threshold: int, *, now: datetime
    ) -> None:
        self.alerts.add((cluster_name, month, account, threshold))

    def unpublished_alert_accounts(self, cluster_name: str, month: str, *, now: datetime) -> set[str]:
        return {
            a
            for (c, m, a, t), at in self.claims.items()
            if c == cluster_name
            and m == month
            and at < now - ALERT_CLAIM_LEASE
            and (c, m, a, t) not in self.alerts
        }

    def release_account_alert(self, cluster_name: str, month: str, account: str, threshold: int) -> None:
        key = (cluster_name, month, account, threshold)
        if key in self.claims and key not in self.alerts:
            self.claims[key] = RELEASED

    def remembered_node_types(self, cluster_name: str) -> dict[str, str]:
        return dict(self.node_types.get(cluster_name, {}))

    def remember_node_types(self, cluster_name: str, types: dict[str, str], *, now: datetime) -> None:
        known = self.node_types.setdefault(cluster_name, {})
        if len(known) + len(types) > MAX_REMEMBERED_NODES:
            known.clear()
        known.update(list(types.items())[:MAX_REMEMBERED_NODES])

    def closed_month_exported(self, cluster_name: str, month: str) -> bool:
        return (cluster_name, month) in self.exported

    def mark_closed_month_exported(
        self, cluster_name: str, month: str, *, at: datetime, expires_at: int
    ) -> None:
        self.exported.add((cluster_name, month))
