"""A cluster's registry item, as the state table holds it."""

from __future__ import annotations

from autopilot.models.records.base import ClusterStatus, RecordModel, Time


class Cluster(RecordModel):
    cluster_name: str
    status: ClusterStatus
    created_at: Time
    updated_at: Time
    last_operation_id: str
    owner: str | None = None
    project: str | None = None
    cluster_arn: str | None = None
    budget_name: str | None = None
    # The budget's monthly limit in USD ("2500.00", as CreateBudget got it): the spend meter's reference.
    budget_limit_usd: str | None = None
    # The `cost-center` cost tag, and the FSx file systems its provisioning parameters name (both
    # tagged by CostTaggerFunction, as the cluster, its lifecycle bucket and its security groups).
    cost_center: str | None = None
    file_system_ids: list[str] | None = None
    # The IAM identity ARN that created it through the API: it (and the admins) may delete it.
    created_by: str | None = None
    # The identities the create request named (``owners``) who may act on it as its creator may.
    owners: list[str] | None = None
    # SageMaker's ClusterStatus as last seen by a workflow or a HyperPod event.
    sagemaker_status: str | None = None
    # Budget enforcement at 100 % ACTUAL ("alert" | "scale-to-min" | "block-growth"), and the instance
    # groups scale-to-min may shrink (neither the Slurm controller nor the login group), both from the
    # create request (logic/budget_enforcement.py).
    budget_enforcement: str | None = None
    worker_groups: list[str] | None = None
    # block-growth: scale-ups are refused until this time (the next budget period) unless lifted.
    growth_blocked_until: Time | None = None
    growth_blocked_at: Time | None = None
    growth_blocked_by: str | None = None
    # The project budget this create asked for ("9000.00" USD, its e-mails): the project's first live
    # cluster that asked holds the budget's terms, its creator owns them (logic/project_budget.py).
    project_budget_limit_usd: str | None = None
    project_budget_emails: list[str] | None = None
    # The ELBv2 target groups that hold the login group's node IPs (logic/login_targets.py).
    login_target_group_arns: list[str] | None = None
    # Department budgets: USD a month per Slurm account ("5000.00"), alerted at 50/80/100 % of the
    # account's jobs' cost (logic/account_budget_alerts.py; PUT /clusters/{name}/account-budgets).
    account_budgets: dict[str, str] | None = None
