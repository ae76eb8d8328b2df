"""`make bench`'s healing section at a tiny scale, so its figures stay computed as they claim: a
12-node cluster, 2 reaction samples, 3 spread faults delivered 3 times each, a storm of 5."""

from __future__ import annotations

import pytest

from sandbox.apps.bench import healing

# the healing bench runs whole sandboxes on a running clock: the slow tier
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]


def test_the_healing_bench_measures_reaction_spread_faults_and_a_storm() -> None:
    measured = healing.measure(
        nodes=12, reaction_samples=2, spread_failures=3, spread_hours=0.5, copies=3, storm_failures=5
    )

    reaction = measured["reaction"]
    assert reaction["samples"] == 2
    assert 0 < reaction["p50_ms"] <= reaction["p99_ms"] <= reaction["max_ms"]

    spread = measured["spread"]
    assert spread["copies_per_event"] == 3
    assert (spread["repaired"], spread["operations"], spread["acted_on_twice"]) == (3, 3, 0)
    assert 1 <= spread["max_lease_holders_sampled"] <= spread["max_concurrent_repairs"]
    assert spread["all_running_at_end"]
    assert spread["aws_calls_per_repaired_node"] > 0

    storm = measured["storm"]
    # 20 % of 12 nodes: the 3rd report trips; only the 2 claimed before it may have acted while paused
    assert storm["trip_threshold_reports"] == 3
    assert storm["tripped_at_reports"] == 3
    assert storm["paused_by"] == "breaker"
    assert storm["paused_until_resume"]
    assert storm["repair_calls_before_resume"] <= 2
    assert storm["repair_calls_after_pause_seen"] <= storm["max_concurrent_repairs"]
    assert storm["alerts"] == 1
    assert (storm["repaired_after_resume"], storm["failed_repairs"], storm["acted_on_twice"]) == (5, 0, 0)
    assert storm["max_lease_holders_sampled"] <= storm["max_concurrent_repairs"]
    assert storm["all_running_at_end"]
    assert measured["iam_denials"] == 0
