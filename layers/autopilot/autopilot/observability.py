"""The one place where the logger and metrics are created; everything else imports them.

No Powertools Tracer: it needs the X-Ray SDK (not in the layer, and ~0.3 s of cold start when it is;
Powertools imports it even to disable tracing). The functions keep ``Tracing: Active``: Lambda itself
records each invocation (initialization, invocation, overhead, errors) in the trace API Gateway or
Step Functions started, and the Logger writes that trace's id (``xray_trace_id``) on every line.
What is not recorded is a subsegment per AWS call (docs/operations.md, "Cold start").
"""

from __future__ import annotations

import warnings
from enum import StrEnum

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

logger = Logger()
metrics = Metrics()
# Most invocations count nothing (a sweep that found nothing, a GET): Powertools would warn on each,
# into every function's log. Its documented way to say that is expected:
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


class Count(StrEnum):
    """Every count Autopilot emits: namespace POWERTOOLS_METRICS_NAMESPACE, dimension ``service``
    (Powertools' default), unit Count; the dashboard and alarms in template.yaml read these names
    (docs/operations.md, "Metrics and alarms")."""

    CLUSTER_EVENTS_HANDLED = "ClusterEventsHandled"
    BREAKERS_TRIPPED = "BreakersTripped"
    SESSIONS_TERMINATED = "SessionsTerminated"
    CLUSTER_TAGS_REPAIRED = "ClusterTagsRepaired"
    # Clusters whose resources carry another owner's / project's / cost center's tags (left untagged).
    COST_TAG_CONFLICTS = "CostTagConflicts"
    BUDGET_ALERTS_FIRED = "BudgetAlertsFired"
    # Events and budget messages dropped because their origin or claim did not check out (issue 20).
    UNTRUSTED_EVENTS_DROPPED = "UntrustedEventsDropped"
    UNTRUSTED_BUDGET_MESSAGES = "UntrustedBudgetMessages"
    # Slurm agent reports refused: not the cluster's controller role (issue 21).
    UNTRUSTED_AGENT_REPORTS = "UntrustedAgentReports"
    # Slurm nodes down only for a reboot that the healing sweep had the agent resume (issue 21).
    SLURM_NODES_RESUMED = "SlurmNodesResumed"
    # Login target group targets the healing sweep registered or deregistered: drift (issue 25).
    LOGIN_TARGETS_REPAIRED = "LoginTargetsRepaired"
    # Finished jobs chargeback cannot store (running over a year): answered in
    # the report's rejectedJobs, logged, never counted (issue 25).
    FINISHED_JOBS_REJECTED = "FinishedJobsRejected"


def count(name: Count, value: int = 1) -> None:
    """Add to a count of this invocation; the handler's ``@metrics.log_metrics`` writes it (EMF in the
    function's log, no PutMetricData call). A zero is written too, so a quiet period shows as 0."""
    metrics.add_metric(name=name.value, unit=MetricUnit.Count, value=value)
