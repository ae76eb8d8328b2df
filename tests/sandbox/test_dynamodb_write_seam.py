"""seam serialize_dynamodb_writes: a conditional write is atomic per item, as DynamoDB's is.

Threads race to join a capped set (the repair lease's condition, ``size(holders) < :cap``); with the
seam no more than the cap ever get in. moto's own check-then-write lets more through when threads
switch often (here every microsecond: without the seam most rounds let 4 to 7 in).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.responses import DynamoHandler

from sandbox.emulator import seams

CAP = 3
THREADS = 24
ROUNDS = 5


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws(), seams.installed(seams.serialize_dynamodb_writes):
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb


def test_every_write_goes_through_the_seam() -> None:
    with seams.installed(seams.serialize_dynamodb_writes):
        for name in ("put_item", "update_item", "delete_item", "transact_write_items", "query", "scan"):
            assert DynamoDBBackend.__dict__[name].__name__ == "write"
    assert DynamoDBBackend.__dict__["update_item"].__name__ == "update_item"
    with seams.installed(seams.serialize_dynamodb_writes):
        assert DynamoHandler.__dict__["call_action"].__name__ == "call_action"
        assert DynamoHandler.__dict__["call_action"].__module__ == "sandbox.emulator.seams.dynamodb"


def test_a_capped_set_never_holds_more_than_its_cap(table: Any) -> None:
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        rounds = [race(table, f"lease-{n}") for n in range(ROUNDS)]
    finally:
        sys.setswitchinterval(switching)
    assert rounds == [CAP] * ROUNDS


def create_pk_sk_table(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.mark.slow  # a stress run: threads switching every microsecond (10-25 s under coverage)
def test_a_query_never_fails_while_items_are_written() -> None:
    # moto's Query iterates the table's dict: an unlocked write meanwhile raised "dictionary changed
    # size during iteration" from the read
    with mock_aws(), seams.installed(seams.serialize_dynamodb_writes):
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(dynamodb)

        def write() -> None:
            for n in range(300):
                dynamodb.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"{n:05}"}})

        def read() -> None:
            dynamodb.query(
                TableName="t",
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": "p"}},
                Select="COUNT",
            )

        errors = reads_while(write, read)

    assert errors == []


@pytest.mark.slow  # a stress run, as above
def test_a_batch_get_never_fails_while_the_item_grows(table: Any) -> None:
    # moto answers a read with the stored item itself, serialised after the backend returned: an
    # update in place meanwhile (a set growing) changed the dict under that serialisation
    def grow() -> None:
        for n in range(300):
            table.update_item(
                TableName="t",
                Key={"pk": {"S": "item"}},
                UpdateExpression="SET #a = :v",
                ExpressionAttributeNames={"#a": f"attribute{n}"},
                ExpressionAttributeValues={":v": {"S": "x"}},
            )

    def read() -> None:
        table.batch_get_item(RequestItems={"t": {"Keys": [{"pk": {"S": "item"}}]}})

    errors = reads_while(grow, read)

    assert errors == []


def reads_while(write: Callable[[], None], read: Callable[[], None], readers: int = 3) -> list[BaseException]:
    """``read`` over and over in ``readers`` threads while ``write`` runs, threads switching every
    microsecond; what the reads raised (any failure of a read is the bug)."""
    written = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            write()
        finally:
            written.set()

    def reader() -> None:
        try:
            while not written.is_set():
                read()
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [
            threading.Thread(target=writer),
            *(threading.Thread(target=reader) for _ in range(readers)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    return errors


def race(table: Any, key: str) -> int:
    """THREADS threads join the set at once; how many got in (each refusal is the condition's)."""
    start = threading.Barrier(THREADS)
    joined: list[str] = []
    refused: list[str] = []

    def join(holder: str) -> None:
        start.wait()
        try:
            table.update_item(
                TableName="t",
                Key={"pk": {"S": key}},
                UpdateExpression="ADD holders :me",
                ConditionExpression="attribute_not_exists(holders) OR size(holders) < :cap",
                ExpressionAttributeValues={":me": {"SS": [holder]}, ":cap": {"N": str(CAP)}},
            )
            joined.append(holder)
        except ClientError as error:
            refused.append(error.response["Error"]["Code"])

    threads = [threading.Thread(target=join, args=(f"op-{n}",)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    holders = table.get_item(TableName="t", Key={"pk": {"S": key}})["Item"]["holders"]["SS"]
    assert sorted(holders) == sorted(joined)
    assert refused == ["ConditionalCheckFailedException"] * (THREADS - len(joined))
    return len(joined)


# ------------------------------------------------------------------ seam back_up_transaction_items


def test_a_cancelled_transaction_leaves_every_item_as_it_was_without_copying_the_table() -> None:
    """moto backs up whole tables (a deep copy per item of the transaction); the seam backs up the
    named items. What DynamoDB promises stays: a transaction with one failing condition writes
    nothing (a new item not created, a changed item unchanged, a deleted item still there)."""
    with mock_aws(), seams.installed(seams.back_up_transaction_items, seams.serialize_dynamodb_writes):
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(dynamodb)
        for pk in ("changed", "deleted", "guard"):
            dynamodb.put_item(TableName="t", Item={"pk": {"S": pk}, "sk": {"S": "x"}, "n": {"N": "1"}})
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        table_object = backend.tables["t"]
        before = dynamodb.scan(TableName="t")["Items"]
        arn = dynamodb.describe_table(TableName="t")["Table"]["TableArn"]

        def key(pk: str) -> dict[str, Any]:
            return {"pk": {"S": pk}, "sk": {"S": "x"}}

        with pytest.raises(ClientError, match="TransactionCanceled"):
            dynamodb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "t", "Item": {**key("new"), "n": {"N": "1"}}}},
                    {"Put": {"TableName": arn, "Item": {**key("by-arn"), "n": {"N": "1"}}}},  # by ARN
                    {
                        "Update": {
                            "TableName": "t",
                            "Key": key("changed"),
                            "UpdateExpression": "SET n = :two, extra = :two",
                            "ExpressionAttributeValues": {":two": {"N": "2"}},
                        }
                    },
                    {"Delete": {"TableName": "t", "Key": key("deleted")}},
                    {
                        "ConditionCheck": {
                            "TableName": "t",
                            "Key": key("guard"),
                            "ConditionExpression": "n = :two",
                            "ExpressionAttributeValues": {":two": {"N": "2"}},
                        }
                    },
                ]
            )
        assert sorted(dynamodb.scan(TableName="t")["Items"], key=str) == sorted(before, key=str)
        assert backend.tables["t"] is table_object  # rolled back item by item, not table by table

        dynamodb.transact_write_items(  # and one that succeeds writes
            TransactItems=[{"Put": {"TableName": "t", "Item": {**key("new"), "n": {"N": "1"}}}}]
        )
        assert len(dynamodb.scan(TableName="t")["Items"]) == 4
