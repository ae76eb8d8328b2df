"""The dead-letter queue redrive moto lacks (sandbox/emulator/sqs/message_moves.py): StartMessageMoveTask
moves a DLQ's messages back as new messages, ListMessageMoveTasks reports it, and only a DLQ may be a
source."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.sqs.responses import SQSResponse

from sandbox.emulator.sqs import MessageMoves
from sandbox.emulator.sqs.message_moves import ACTIONS

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        moves = MessageMoves(lambda: NOW)
        moves.install()
        try:
            yield boto3.client("sqs", region_name="us-east-1")
        finally:
            moves.uninstall()


def arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def test_moto_has_no_redrive_of_its_own() -> None:
    # the seam adds the actions; once moto implements them the install refuses (SeamDrift)
    assert not any(action in SQSResponse.__dict__ for action in ACTIONS)


def test_a_redrive_moves_the_dead_letters_back_as_new_messages(sqs: Any) -> None:
    client = sqs
    dlq = client.create_queue(QueueName="events-dlq")["QueueUrl"]
    source = client.create_queue(
        QueueName="events",
        Attributes={
            "RedrivePolicy": f'{{"deadLetterTargetArn": "{arn(client, dlq)}", "maxReceiveCount": "1"}}'
        },
    )["QueueUrl"]
    sent = client.send_message(
        QueueUrl=dlq,
        MessageBody='{"detail-type": "SageMaker HyperPod Cluster Node Health Event"}',
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "node-health"}},
    )

    handle = client.start_message_move_task(SourceArn=arn(client, dlq), DestinationArn=arn(client, source))

    [moved] = client.receive_message(QueueUrl=source, MessageAttributeNames=["All"])["Messages"]
    assert moved["Body"] == '{"detail-type": "SageMaker HyperPod Cluster Node Health Event"}'
    assert moved["MessageAttributes"]["kind"]["StringValue"] == "node-health"
    assert moved["MessageId"] != sent["MessageId"]  # a new message, as AWS documents
    assert "Messages" not in client.receive_message(QueueUrl=dlq)
    [task] = client.list_message_move_tasks(SourceArn=arn(client, dlq))["Results"]
    assert task["Status"] == "COMPLETED"
    assert task["ApproximateNumberOfMessagesMoved"] == 1
    assert task["DestinationArn"] == arn(client, source)
    assert task["StartedTimestamp"] == int(NOW.timestamp() * 1000)
    assert handle["TaskHandle"]


def test_only_a_dead_letter_queue_of_another_queue_is_a_source(sqs: Any) -> None:
    client = sqs
    plain = client.create_queue(QueueName="plain")["QueueUrl"]

    with pytest.raises(ClientError) as refused:
        client.start_message_move_task(SourceArn=arn(client, plain))
    # the query-compatible code botocore's model gives the shape (awsQueryError)
    assert refused.value.response["Error"]["Code"] == "AWS.SimpleQueueService.UnsupportedOperation"
    with pytest.raises(ClientError) as missing:
        client.start_message_move_task(SourceArn="arn:aws:sqs:us-east-1:123456789012:nope")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
