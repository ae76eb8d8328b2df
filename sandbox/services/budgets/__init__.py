"""AWS Budgets simulator: spend accrues from the simulated HyperPod fleet and alerts go out via SNS.

moto's budgets backend already stores budgets and their notifications (CreateBudget with
NotificationsWithSubscribers, DescribeBudget(s), DeleteBudget, Create/DeleteNotification,
DescribeNotificationsForBudget) and returns whatever ``CalculatedSpend`` the stored budget holds.
It computes no spend and sends no alerts; that is this module:

- AWS Budgets is a global service: one per account (botocore's endpoint rules send every client,
  whatever its region, to budgets.amazonaws.com signed for us-east-1; moto keeps one backend per
  account), and its spend covers the account's clusters in every region: ``fleet`` is the whole
  account's fleet (the Sandbox passes every region's HyperPod simulator); instances of other
  accounts are not charged here.
- :meth:`BudgetsSimulator.tick` charges every running instance ``price/hour x simulated hours``
  since the previous tick (the fleet is sampled at the tick) into a per-day cost ledger, keyed by
  region, instance type and the cluster's tags (cost allocation tags, ``user:`` prefixed in
  filters). A budget's ActualSpend is the ledger within its current period (calendar month /
  quarter / year / day on the sandbox clock, or the CUSTOM TimePeriod) that matches its
  ``CostFilters`` or ``FilterExpression``, so a budget created mid-month sees the month's spend,
  as AWS does. ForecastedSpend = actual + the current burn rate x the hours left in the period.
- AWS Budgets refreshes its data up to three times a day, so budgets are *evaluated* (their
  CalculatedSpend rewritten, their alerts sent) only on that cadence: at UTC midnight and every
  ``refresh_hours`` (default 8) after it, at the first tick past each such time. In between,
  DescribeBudget shows the spend of the last refresh, as on AWS. The exact times of AWS's
  refreshes are not documented (unverified).
- Each notification (ACTUAL | FORECASTED; GREATER_THAN | LESS_THAN | EQUAL_TO; PERCENTAGE |
  ABSOLUTE_VALUE) alerts once when its condition becomes true (OK -> ALARM) and again only after
  it was false or a new period began. The SNS subscriber's topic receives the plain-text message
  AWS Budgets sends (format below) through moto's SNS, so the topic's subscriptions (SQS, the
  sandbox Lambda runtime) get it; the topic policy must allow ``budgets.amazonaws.com`` to
  ``SNS:Publish``, as in AWS, or the delivery is recorded as failed. EMAIL subscribers are only
  recorded (:attr:`BudgetsSimulator.deliveries`).
- ``duplicate_deliveries`` (a share, 0 to 1; seeded by ``seed``) publishes that share of SNS alerts
  twice, each with its own MessageId, as AWS Budgets does now and then (the same crossing notified
  twice); subscribers must alert once anyway.
- :func:`_patch_moto_budgets_backend` (the seam) validates CreateBudget / CreateNotification
  where moto does not: subscriber limits, FORECASTED on a DAILY budget, and anything the
  simulator could not attribute spend for (a non-COST budget, a filter dimension it does not
  know) is rejected loudly instead of silently showing $0.
- :func:`_patch_moto_budgets_responses` (the subscriber seam) serves what moto's
  ``BudgetsResponse`` lacks: DescribeSubscribersForNotification, CreateSubscriber and
  DeleteSubscriber, over the subscribers moto stores with each notification (which the alerts
  are sent to, so a subscriber added or deleted changes who is alerted).

The message body follows real AWS Budgets SNS deliveries (captured in public test fixtures)::

    AWS Budget Notification September 26, 2022
    AWS Account 017790921725

    Dear AWS Customer,

    You requested that we alert you when the ACTUAL Cost associated with your Test Budget budget is
    greater than $0.16 for the current month. The ACTUAL Cost associated with this budget is $0.59.
    You can find additional details below and by accessing the AWS Budgets dashboard [1].

    Budget Name: Test Budget
    Budget Type: Cost
    Budgeted Amount: $0.20
    Alert Type: ACTUAL
    Alert Threshold: > $0.16
    ACTUAL Amount: $0.59

    [1] https://console.aws.amazon.com/billing/home#/budgets

(the "You requested" paragraph is one line). Deliveries captured since (January 2026) link the
Cost Management console instead, ``[1] https://console.aws.amazon.com/costmanagement/home#/budgets``,
and so does the simulator. A PERCENTAGE threshold is stated in dollars (80% of
$0.20 -> "$0.16"), as AWS does. Amounts use two decimals with thousands separators ("$1,234.50").
Subject: ``AWS Budgets: <name> has exceeded your alert threshold`` (cut to SNS's 100 characters).

The package, by job: model.py (limits, errors, the cost ledger and its filters, periods),
notifications.py (what an alert says, the topic policy), simulator.py (``BudgetsSimulator``),
validation.py (what AWS checks that moto does not), seam.py (moto's backend, the installed
simulators), subscribers.py (the *Subscriber* actions moto lacks).
"""

from sandbox.services.budgets.model import DEFAULT_REFRESH_HOURS, CostLine, budget_matcher, budget_period
from sandbox.services.budgets.notifications import BudgetDelivery, budget_message, topic_allows_budgets
from sandbox.services.budgets.simulator import BudgetsSimulator
from sandbox.services.budgets.subscribers import SUBSCRIBER_OPERATIONS

__all__ = [
    "DEFAULT_REFRESH_HOURS",
    "SUBSCRIBER_OPERATIONS",
    "BudgetDelivery",
    "BudgetsSimulator",
    "CostLine",
    "budget_matcher",
    "budget_message",
    "budget_period",
    "topic_allows_budgets",
]
