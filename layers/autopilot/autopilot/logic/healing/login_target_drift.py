"""The healing sweep's repair of login target group drift (issue 25): each ACTIVE cluster that names
login target groups gets them made to hold exactly its login nodes again: a target someone deregistered,
a login node added by a scale-up, a stale IP left by a scale-down or a replacement Autopilot did not make
(HyperPod's own). Each target registered or deregistered is counted (LoginTargetsRepaired)."""

from __future__ import annotations

from collections import Counter

from botocore.exceptions import BotoCoreError, ClientError

from autopilot.dal.state_store import StateStore
from autopilot.errors import NotFoundError
from autopilot.logic.login_targets import LoginTargets
from autopilot.models.records import ClusterStatus
from autopilot.observability import Count, count, logger


def repair_login_targets(store: StateStore, targets: LoginTargets) -> Counter[str]:
    """Sync every ACTIVE cluster's login target groups; a cluster that fails is logged and left to the
    next sweep (the others are still repaired)."""
    outcomes: Counter[str] = Counter()
    token: str | None = None
    while True:
        page = store.list_clusters(limit=100, next_token=token)
        for cluster in page.items:
            if cluster.status is not ClusterStatus.ACTIVE or not cluster.login_target_group_arns:
                continue
            try:
                drifts = targets.sync_cluster(cluster.cluster_name, cluster.login_target_group_arns)
            except (ClientError, BotoCoreError, NotFoundError):
                logger.exception("login target groups not repaired", cluster=cluster.cluster_name)
                outcomes["login_targets_failed"] += 1
                continue
            for drift in drifts:
                if drift.registered or drift.deregistered:
                    logger.warning(
                        "login target group drift repaired",
                        cluster=cluster.cluster_name,
                        target_group_arn=drift.target_group_arn,
                        registered=[t.id for t in drift.registered],
                        deregistered=[t.id for t in drift.deregistered],
                    )
                outcomes["login_targets_registered"] += len(drift.registered)
                outcomes["login_targets_deregistered"] += len(drift.deregistered)
        token = page.next_token
        if token is None:
            break
    count(
        Count.LOGIN_TARGETS_REPAIRED,
        outcomes["login_targets_registered"] + outcomes["login_targets_deregistered"],
    )
    return outcomes
