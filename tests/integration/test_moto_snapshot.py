"""The moto state snapshot the deployed-stack fixtures start each test from: a restore is the account as
it was taken, every copy is independent, and what holds a lock or a key still works afterwards."""

from __future__ import annotations

import threading
from typing import Any

import boto3
from moto import mock_aws

from sandbox.harness.moto_snapshot import AccountSnapshot

ACCOUNT = "123456789012"


def _clients() -> tuple[Any, Any, Any]:
    return (
        boto3.client("sqs", region_name="us-east-1"),
        boto3.client("kms", region_name="us-east-1"),
        boto3.client("dynamodb", region_name="us-east-1"),
    )


def test_a_restore_is_the_account_as_taken_whatever_an_earlier_restore_did() -> None:
    with mock_aws():
        sqs, kms, dynamodb = _clients()
        queue = sqs.create_queue(QueueName="q")["QueueUrl"]
        key = kms.create_key(KeySpec="RSA_2048", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]["KeyId"]
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        snapshot = AccountSnapshot.take(ACCOUNT, extra={"queue": queue, "key": key})

    with mock_aws():
        extra = snapshot.restore()
        sqs, kms, dynamodb = _clients()
        # a queue's condition (its lock's own methods) works on the copy: send wakes no stale lock
        sqs.send_message(QueueUrl=extra["queue"], MessageBody="first test")
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "first test"}})
        sqs.create_queue(QueueName="made-by-the-first-test")
        # the KMS key's private key was copied, not shared or lost
        oaep = "RSAES_OAEP_SHA_256"
        sealed = kms.encrypt(KeyId=extra["key"], Plaintext=b"x", EncryptionAlgorithm=oaep)
        opened = kms.decrypt(
            KeyId=extra["key"], CiphertextBlob=sealed["CiphertextBlob"], EncryptionAlgorithm=oaep
        )
        assert opened["Plaintext"] == b"x"

    with mock_aws():
        extra = snapshot.restore()
        sqs, _, dynamodb = _clients()
        assert "Messages" not in sqs.receive_message(QueueUrl=extra["queue"])
        assert dynamodb.scan(TableName="t")["Items"] == []
        assert [url.rsplit("/", 1)[1] for url in sqs.list_queues()["QueueUrls"]] == ["q"]
        sqs.send_message(QueueUrl=extra["queue"], MessageBody="second test")
        [message] = sqs.receive_message(QueueUrl=extra["queue"])["Messages"]
        assert message["Body"] == "second test"


def test_locks_conditions_and_events_come_back_new_and_working() -> None:
    lock, rlock, condition, event = (
        threading.Lock(),
        threading.RLock(),
        threading.Condition(),
        threading.Event(),
    )
    event.set()
    with mock_aws():
        boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="q")
        snapshot = AccountSnapshot.take(ACCOUNT, extra=[lock, rlock, condition, event])
    with mock_aws():
        copies = snapshot.restore()
    assert all(
        copy is not original for copy, original in zip(copies, [lock, rlock, condition, event], strict=True)
    )
    new_lock, new_rlock, new_condition, new_event = copies
    with new_lock, new_rlock, new_rlock, new_condition:
        new_condition.notify_all()  # its own lock is held: no "un-acquired lock"
    assert new_event.is_set()


def test_extra_comes_back_as_a_copy() -> None:
    with mock_aws():
        boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="q")
        snapshot = AccountSnapshot.take(ACCOUNT, extra={"names": ["a"]})
    with mock_aws():
        first = snapshot.restore()
        first["names"].append("b")
    with mock_aws():
        assert snapshot.restore() == {"names": ["a"]}
