"""Step Functions' "Step Functions Execution Status Change" EventBridge event (source ``aws.states``).

Shaped as AWS's samples (events/stepfunctions/, from the Step Functions developer guide, "EventBridge
for Step Functions execution status changes"): ``detail`` carries what DescribeExecution returns, dates
in epoch milliseconds, ``stopDate`` / ``output`` null while running. ``error`` and ``cause`` are read
when present; AWS's samples leave them out, so the use case falls back to DescribeExecution.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autopilot.models.envelopes import EventBridgeModel

DETAIL_TYPE = "Step Functions Execution Status Change"
SOURCE = "aws.states"


class ExecutionStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    PENDING_REDRIVE = "PENDING_REDRIVE"


class ExecutionStatusChangeDetail(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    executionArn: str
    stateMachineArn: str
    name: str
    status: ExecutionStatus
    startDate: datetime
    stopDate: datetime | None = None
    error: str | None = None
    cause: str | None = None


class ExecutionStatusChange(EventBridgeModel):
    detail_type: Literal["Step Functions Execution Status Change"] = Field(alias="detail-type")
    source: Literal["aws.states"]
    detail: ExecutionStatusChangeDetail
