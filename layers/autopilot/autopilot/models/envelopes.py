"""The EventBridge and SNS envelopes Autopilot's functions receive, shaped as Powertools' parser models
them, without importing the parser.

Importing anything from ``aws_lambda_powertools.utilities.parser`` builds every event model it ships
(API Gateway, S3, Kinesis, ... about a hundred pydantic classes): 0.3-0.9 s of cold start under
``python -X importtime`` on the development machine, more than ``import boto3``, in every function
that reads one EventBridge event. These two are the only envelopes the functions read;
tests/unit/test_envelopes.py holds their fields and aliases to Powertools' own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventBridgeModel(BaseModel):
    """An EventBridge event (Powertools' ``EventBridgeModel``); subclasses narrow ``detail``."""

    model_config = ConfigDict(populate_by_name=True, defer_build=True)

    version: str
    id: str
    source: str
    account: str
    time: datetime
    region: str
    resources: list[str]
    detail_type: str = Field(alias="detail-type")
    detail: Any
    replay_name: str | None = Field(None, alias="replay-name")


class SnsNotificationModel(BaseModel):
    """The part of an SNS notification the functions read (Powertools' ``SnsNotificationModel``)."""

    model_config = ConfigDict(defer_build=True)

    Subject: str | None = None
    TopicArn: str
    MessageId: str
    Message: str
    Timestamp: datetime


class SnsRecordModel(BaseModel):
    model_config = ConfigDict(defer_build=True)

    EventSource: str
    EventVersion: str
    EventSubscriptionArn: str
    Sns: SnsNotificationModel


class SnsModel(BaseModel):
    """SNS invoking a function: its records (Powertools' ``SnsModel``)."""

    model_config = ConfigDict(defer_build=True)

    Records: list[SnsRecordModel]
