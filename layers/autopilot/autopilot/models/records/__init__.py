"""Autopilot's records: clusters, operations and their history, as the state table holds them.

Field names are the table's attribute names (camelCase aliases); the Step Functions workflows write
the same attributes (statemachines/), so renaming one here means renaming it there.

Times are ``datetime`` (UTC, to the millisecond: ``Time``); the table holds them as ISO text
(``iso``: "2026-11-22T12:15:00.000Z"), the spelling the workflows' ``$states.context`` times and
``$now()`` have too, so stored times compare as strings in time order. The text is made and read at
the edge only: a JSON dump (the DAL's ``record_values``, the API) writes it, validation reads it.

One module per item (``cluster.py``, ``operation.py`` with its ``diagnosis.py`` and ``repair.py``,
``healing.py``, ``history.py``, ``page.py``); ``base.py`` holds the base model, the times and the enums.
``from autopilot.models.records import Cluster`` works for every name: the enums and helpers are here
at once, and a model's module is imported when the model is first read (``__getattr__``), so a function
creates the record classes it uses (~0.3-0.5 ms each), not the thirteen (docs/operations.md, "Cold start").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from autopilot.models.records.base import (
    DELETABLE_STATUSES,
    REUSABLE_NAME_STATUSES,
    ActionResult,
    ClusterStatus,
    DiagnosisConfidence,
    NodeAction,
    NodeHealth,
    OperationStatus,
    OperationType,
    RecordModel,
    RepairActor,
    RepairTrigger,
    Time,
    iso,
    new_operation_id,
    utc_ms,
)

if TYPE_CHECKING:
    from autopilot.models.records.cluster import Cluster as Cluster
    from autopilot.models.records.diagnosis import Diagnosis as Diagnosis
    from autopilot.models.records.diagnosis import Evidence as Evidence
    from autopilot.models.records.healing import HealingState as HealingState
    from autopilot.models.records.healing import NodeRecord as NodeRecord
    from autopilot.models.records.history import HistoryEntry as HistoryEntry
    from autopilot.models.records.operation import Operation as Operation
    from autopilot.models.records.operation import OperationError as OperationError
    from autopilot.models.records.operation import Step as Step
    from autopilot.models.records.page import Page as Page
    from autopilot.models.records.repair import Fault as Fault
    from autopilot.models.records.repair import RepairAction as RepairAction

# Each record model -> the module of this package that defines it.
_MODULE_OF: Final = {
    "Cluster": "cluster",
    "Diagnosis": "diagnosis",
    "Evidence": "diagnosis",
    "HealingState": "healing",
    "NodeRecord": "healing",
    "HistoryEntry": "history",
    "Operation": "operation",
    "OperationError": "operation",
    "Step": "operation",
    "Page": "page",
    "Fault": "repair",
    "RepairAction": "repair",
}

__all__ = [
    "DELETABLE_STATUSES",
    "REUSABLE_NAME_STATUSES",
    "ActionResult",
    "Cluster",
    "ClusterStatus",
    "Diagnosis",
    "DiagnosisConfidence",
    "Evidence",
    "Fault",
    "HealingState",
    "HistoryEntry",
    "NodeAction",
    "NodeHealth",
    "NodeRecord",
    "Operation",
    "OperationError",
    "OperationStatus",
    "OperationType",
    "Page",
    "RecordModel",
    "RepairAction",
    "RepairActor",
    "RepairTrigger",
    "Step",
    "Time",
    "iso",
    "new_operation_id",
    "utc_ms",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
