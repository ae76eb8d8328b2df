"""The failure catalog and the matcher: every category is recognised from the public lines it was built
from, the first cause wins over its symptoms, and what nothing recognises (or no log at all) is said."""

from __future__ import annotations

import pytest
from autopilot.diagnosis.catalog import UNKNOWN, catalog
from autopilot.diagnosis.matcher import (
    FAILURE_MESSAGE,
    MAX_LINE_CHARS,
    UNKNOWN_TAIL_LINES,
    ClusterEvent,
    LogLine,
    LogStream,
    diagnose,
)

# The issue's categories, spelled exactly so (issue 23).
CATEGORIES = {
    "s3-access-denied",
    "s3-unreachable",
    "script-not-found",
    "crlf-line-endings",
    "script-not-executable",
    "script-timeout",
    "fsx-mount-failed",
    "provisioning-parameters-mismatch",
    "controller-unreachable",
    "package-install-failed",
    "insufficient-capacity",
    "quota-exceeded",
    "subnet-ips-exhausted",
}
# SageMaker's FailureMessage of a lifecycle failure (awslabs/awsome-distributed-ai #188, #632): it names
# an instance but no cause.
LIFECYCLE_FAILED = (
    'Instance i-0b66516c4a8bfcea4 failed to provision with the following error: "Lifecycle scripts did not '
    "run successfully. Ensure the scripts exist in provided S3 path, are accessible, and run without errors. "
    'Please see CloudWatch logs for lifecycle script execution details." Note that multiple instances may be '
    "impacted."
)
HEALTHY = ("Execute script: ./add_users.sh", "Script ./add_users.sh executed successully")


def _stream(instance: str, lines: list[str], start: int = 0, group: str = "worker-group") -> LogStream:
    return LogStream(
        f"LifecycleConfig/{group}/{instance}",
        tuple(LogLine(start + 1000 * index, line) for index, line in enumerate(lines)),
    )


def test_the_catalog_has_every_category_of_the_issue_and_nothing_else() -> None:
    assert {entry.category for entry in catalog()} == CATEGORIES


def test_every_entry_has_a_fix_and_a_published_example() -> None:
    for entry in catalog():
        assert entry.fix, entry.category
        assert entry.summary, entry.category
        assert entry.examples, entry.category
        for example in entry.examples:
            assert example.source.startswith(("https://", "unconfirmed:")), (entry.category, example)


@pytest.mark.parametrize(
    ("category", "line"),
    [(entry.category, example.line) for entry in catalog() for example in entry.examples],
)
def test_each_example_line_in_a_lifecycle_stream_is_diagnosed_as_its_category(
    category: str, line: str
) -> None:
    streams = [_stream("i-0b66516c4a8bfcea4", [*HEALTHY, line, "[ERROR] lifecycle script failed"])]

    diagnosis = diagnose(streams, failure_message=LIFECYCLE_FAILED)

    assert diagnosis.category == category
    assert diagnosis.evidence[0].stream == "LifecycleConfig/worker-group/i-0b66516c4a8bfcea4"
    assert diagnosis.evidence[0].line == line
    assert diagnosis.confidence == "high"
    entry = next(e for e in catalog() if e.category == category)
    assert (diagnosis.summary, diagnosis.fix) == (entry.summary, entry.fix)


@pytest.mark.parametrize(
    ("message", "category"),
    [
        # awslabs/awsome-distributed-ai #204
        (
            "We currently do not have sufficient capacity for the requested instance type(s). "
            "Please try again.",
            "insufficient-capacity",
        ),
        (
            "Instance group worker-group failed to provision: InsufficientInstanceCapacity: We currently "
            "do not have sufficient ml.p5.48xlarge capacity in the Availability Zone you requested "
            "(us-east-1a).",
            "insufficient-capacity",
        ),
    ],
)
def test_a_failure_message_that_names_the_cause_wins_without_any_log(message: str, category: str) -> None:
    diagnosis = diagnose([], failure_message=message)

    assert diagnosis.category == category
    assert [(e.stream, e.line) for e in diagnosis.evidence] == [(FAILURE_MESSAGE, message)]


def test_a_failing_controller_explains_the_workers_that_failed_after_it() -> None:
    controller = _stream(
        "i-0aaaaaaaaaaaaaaaa",
        [
            *HEALTHY,
            "subprocess.CalledProcessError: Command '['sudo', 'bash', './utils/install_docker.sh']' "
            "returned non-zero exit status 100.",
        ],
        start=0,
        group="controller-machine",
    )
    workers = [
        _stream(
            f"i-0{n:016x}",
            ["slurm_load_partitions: Unable to contact slurm controller (connect failure)"],
            start=60_000,
        )
        for n in range(1, 65)
    ]

    diagnosis = diagnose([*workers, controller], failure_message=LIFECYCLE_FAILED)

    assert diagnosis.category == "package-install-failed"
    assert diagnosis.evidence[0].stream == "LifecycleConfig/controller-machine/i-0aaaaaaaaaaaaaaaa"
    assert len(diagnosis.evidence) == 1  # the 64 workers are its symptoms, not more evidence


def test_the_same_cause_on_several_instances_is_counted_and_quoted_a_few_times() -> None:
    line = "fatal error: An error occurred (403) when calling the HeadObject operation: Forbidden"
    streams = [_stream(f"i-0{n:016x}", [line], start=n) for n in range(10)]

    diagnosis = diagnose(streams)

    assert diagnosis.category == "s3-access-denied"
    assert diagnosis.evidence[0].stream.endswith("i-00000000000000000")
    assert len(diagnosis.evidence) == 4
    assert diagnosis.summary.endswith("The same on 9 other instance(s).")


def test_a_cluster_event_is_evidence_like_a_log_line() -> None:
    event = ClusterEvent(
        5,
        "We currently do not have sufficient capacity to launch new ml.p5.48xlarge instances. "
        "Please try again.",
        "i-0123456789abcdef0",
    )

    diagnosis = diagnose([_stream("i-0123456789abcdef0", list(HEALTHY), start=10)], events=[event])

    assert diagnosis.category == "insufficient-capacity"
    assert diagnosis.evidence[0].stream == "ClusterEvent/i-0123456789abcdef0"


def test_nothing_recognised_is_unknown_with_the_last_lines_of_the_stream_that_stopped_first() -> None:
    first = _stream("i-0b66516c4a8bfcea4", [f"step {n}" for n in range(30)], start=0)
    later = _stream("i-0ccccccccccccccc1", [f"other {n}" for n in range(30)], start=500_000)

    diagnosis = diagnose([later, first])

    assert diagnosis.category == UNKNOWN
    assert diagnosis.confidence == "low"
    assert [e.line for e in diagnosis.evidence] == [f"step {n}" for n in range(30 - UNKNOWN_TAIL_LINES, 30)]
    assert {e.stream for e in diagnosis.evidence} == {first.name}


def test_unknown_prefers_the_instances_the_failure_message_names() -> None:
    named = _stream("i-0b66516c4a8bfcea4", ["waiting"], start=900_000)
    other = _stream("i-0ccccccccccccccc1", ["done"], start=0)

    diagnosis = diagnose([other, named], failure_message=LIFECYCLE_FAILED)

    assert diagnosis.evidence[0].stream == named.name


@pytest.mark.parametrize("streams", [[], [LogStream("LifecycleConfig/worker-group/i-0b66516c4a8bfcea4")]])
def test_no_lifecycle_log_is_a_finding_naming_what_keeps_hyperpod_from_writing(
    streams: list[LogStream],
) -> None:
    # awslabs/awsome-distributed-ai #189: "Cluster creation fails, but CloudWatch logs are empty"
    diagnosis = diagnose(streams, failure_message=LIFECYCLE_FAILED)

    assert diagnosis.category == UNKNOWN
    assert "i-0b66516c4a8bfcea4" in diagnosis.summary
    assert "logs:PutLogEvents" in diagnosis.fix
    assert "endpoint" in diagnosis.fix
    assert [e.stream for e in diagnosis.evidence] == [FAILURE_MESSAGE]


def test_streams_other_than_lifecycle_ones_are_not_read() -> None:
    hma = LogStream("SagemakerHealthMonitoringAgent", (LogLine(0, "Unable to contact slurm controller"),))

    assert diagnose([hma]).category == UNKNOWN


def test_evidence_lines_are_cut_so_a_diagnosis_fits_a_workflow_payload_and_an_event() -> None:
    # a log event may hold 256 KB; Step Functions payloads and EventBridge events are 256 KB at most
    huge = "x" * 300_000
    recognised = diagnose([_stream("i-0b66516c4a8bfcea4", [huge + " Unable to contact slurm controller"])])
    unknown = diagnose([_stream("i-0b66516c4a8bfcea4", [huge] * 30)])

    assert recognised.category == "controller-unreachable"
    assert len(recognised.evidence[0].line) == MAX_LINE_CHARS
    assert recognised.evidence[0].line.endswith("…")
    assert len(unknown.model_dump_json()) < 32_000


def test_the_launches_named_are_the_only_ones_read() -> None:
    # a replacement's successor failed; an old instance's stream holds an error of its own
    old = _stream("i-0ccccccccccccccc1", ["fatal error: An error occurred (403) when calling the HeadObject"])
    successor = _stream(
        "i-0b66516c4a8bfcea4", ["slurm_load_partitions: Unable to contact slurm controller"], 5
    )

    assert (
        diagnose([old, successor], instance_ids=["i-0b66516c4a8bfcea4"]).category == "controller-unreachable"
    )
    silent = diagnose([old], instance_ids=["i-0b66516c4a8bfcea4"])
    assert silent.category == UNKNOWN
    assert "i-0b66516c4a8bfcea4" in silent.summary
