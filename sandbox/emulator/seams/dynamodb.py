"""DynamoDB seams: conditional writes atomic, as on AWS, and a transaction's items backed up so a
failed TransactWriteItems leaves nothing written.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import sys
import threading
from typing import Any, Final

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table as DynamoTable
from moto.dynamodb.responses import DynamoHandler

from sandbox.emulator.patching import SeamDrift, expect_signature
from sandbox.emulator.seams.base import replace, state

# --------------------------------------------------------------------------------------------------
# seam: DynamoDB conditional writes atomic, as on AWS
# --------------------------------------------------------------------------------------------------
_DYNAMODB_WRITES: Final = ("put_item", "update_item", "delete_item", "transact_write_items")
# reads that iterate a table (a write meanwhile would change the dict under them)
_DYNAMODB_ITERATING_READS: Final = ("query", "scan")
_dynamodb_write_lock: Final = threading.RLock()


def serialize_dynamodb_writes() -> None:
    for name in (*_DYNAMODB_WRITES, *_DYNAMODB_ITERATING_READS):
        original = expect_signature(DynamoDBBackend, name, ["self"], "serialize_dynamodb_writes")

        def write(self: DynamoDBBackend, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with _dynamodb_write_lock:
                return _original(self, *args, **kwargs)

        replace(DynamoDBBackend, name, write)
    # A read answers with the stored item itself, serialised after the backend returned: a write in
    # place meanwhile changed the dict under the serialisation (GetItem, BatchGetItem). Every DynamoDB
    # request, its answer included, runs under the lock.
    handler = expect_signature(DynamoHandler, "call_action", ["self"], "serialize_dynamodb_writes")

    def call_action(self: DynamoHandler) -> Any:
        with _dynamodb_write_lock:
            return handler(self)

    replace(DynamoHandler, "call_action", call_action)


class _CopyKeepingTables:
    """``copy`` as moto's DynamoDB models module sees it: inside a transaction the seam backs up, a
    deep copy of a whole Table (moto's rollback backup) is the table itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if getattr(_transaction_backup, "active", False) and isinstance(value, DynamoTable):
            return value
        return copy.deepcopy(value, memo)


_transaction_backup = threading.local()


def back_up_transaction_items() -> None:
    """TransactWriteItems backs up the items it names, not the tables (docstring at the top)."""
    seam = "back_up_transaction_items"
    original = expect_signature(DynamoDBBackend, "transact_write_items", ["self", "transact_items"], seam)
    models = sys.modules[DynamoDBBackend.__module__]
    source = inspect.getsource(original)
    if (
        models.__dict__.get("copy") is not copy
        or "copy.deepcopy(" not in source
        or "self.tables[" not in source
    ):
        raise SeamDrift(f"{seam}: transact_write_items no longer backs up tables with copy.deepcopy")

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        with _dynamodb_write_lock:
            before = [
                (table, key, _item_copy(self, table, key))
                for table, key in _transaction_keys(self, transact_items)
            ]
            _transaction_backup.active = True
            try:
                original(self, transact_items)
            except Exception:
                for table, key, item in before:  # moto's rollback put the (same) tables back
                    if item is not _UNREADABLE:
                        with contextlib.suppress(Exception):  # restore the others; raise moto's error
                            _restore_item(self, table, key, item)
                raise
            finally:
                _transaction_backup.active = False

    replace(DynamoDBBackend, "transact_write_items", transact_write_items)
    models.copy = _CopyKeepingTables()  # type: ignore[attr-defined]
    state.undo.append(lambda: setattr(models, "copy", copy))


_UNREADABLE: Final = object()  # an item moto could not read: it fails that item before writing it


def _transaction_keys(
    backend: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> list[tuple[Any, dict[str, Any]]]:
    """(table, key) of every item the transaction names (the table by name or by ARN, as moto takes it)."""
    keys = []
    for entry in transact_items:
        for op_type, op in entry.items():
            try:
                table = backend.get_table(op["TableName"])
            except Exception:  # noqa: BLE001, S112 - no such table: moto fails the item, writes nothing to it
                continue
            if op_type == "Put":
                names = [table.hash_key_attr, *([table.range_key_attr] if table.range_key_attr else [])]
                if all(n in op.get("Item", {}) for n in names):
                    keys.append((table, {n: op["Item"][n] for n in names}))
            elif isinstance(op.get("Key"), dict):
                keys.append((table, op["Key"]))
    return keys


def _item_copy(backend: DynamoDBBackend, table: Any, key: dict[str, Any]) -> Any:
    try:
        return copy.deepcopy(backend.get_item(table.name, key))
    except Exception:  # noqa: BLE001 - a key moto rejects
        return _UNREADABLE


def _restore_item(backend: DynamoDBBackend, table: Any, key: dict[str, Any], item: Any) -> None:
    if item is None:
        if backend.get_item(table.name, key) is not None:
            backend.delete_item(table.name, key)
    else:
        backend.put_item(table.name, item.to_json()["Attributes"])
