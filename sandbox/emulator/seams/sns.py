"""The SNS seam: SNS to Lambda with the event shaped as SNS sends it, delivered asynchronously."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from moto.awslambda.utils import get_backend
from moto.sns.models import Subscription

from sandbox.emulator.patching import SeamDrift, expect_signature
from sandbox.emulator.seams.base import replace, state


# --------------------------------------------------------------------------------------------------
# seam: SNS → Lambda with the real event shape
# --------------------------------------------------------------------------------------------------
def sns_lambda_event(
    *,
    subscription_arn: str,
    topic_arn: str,
    message: str,
    message_id: str,
    subject: str | None,
    message_attributes: dict[str, Any] | None,
) -> dict[str, Any]:
    host = f"https://sns.{topic_arn.split(':')[3]}.amazonaws.com"
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": subscription_arn,
                "Sns": {
                    "Type": "Notification",
                    "MessageId": message_id,
                    "TopicArn": topic_arn,
                    "Subject": subject,
                    "Message": message,
                    "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                    "SignatureVersion": "1",
                    "Signature": "EXAMPLE",
                    "SigningCertUrl": f"{host}/SimpleNotificationService-sandbox.pem",
                    "UnsubscribeUrl": f"{host}/?Action=Unsubscribe&SubscriptionArn={subscription_arn}",
                    "MessageAttributes": {
                        name: {"Type": value.get("Type"), "Value": value.get("Value")}
                        for name, value in (message_attributes or {}).items()
                    },
                },
            }
        ]
    }


def deliver_sns_to_lambda() -> None:
    original = expect_signature(
        Subscription,
        "publish",
        [
            "self",
            "message",
            "message_id",
            "subject",
            "message_attributes",
            "group_id",
            "deduplication_id",
            "message_structure",
        ],
        "deliver_sns_to_lambda",
    )
    if not hasattr(Subscription, "_parse_message_structure"):
        raise SeamDrift("deliver_sns_to_lambda: Subscription._parse_message_structure is gone")

    def publish(  # noqa: PLR0917 - moto's signature
        self: Subscription,
        message: str,
        message_id: str,
        subject: str | None = None,
        message_attributes: dict[str, Any] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        message_structure: str | None = None,
    ) -> None:
        runtime = state.runtime
        if self.protocol != "lambda" or runtime is None:
            original(
                self,
                message,
                message_id,
                subject,
                message_attributes,
                group_id,
                deduplication_id,
                message_structure,
            )
            return
        matcher = self._filter_policy_matcher
        if matcher is not None and not matcher.matches(message_attributes, message):
            return
        if message_structure == "json":
            message = self._parse_message_structure(message, self.protocol)
        event = sns_lambda_event(
            subscription_arn=self.arn,
            topic_arn=self.topic.arn,
            message=message,
            message_id=message_id,
            subject=subject,
            message_attributes=message_attributes,
        )
        arn_parts = self.endpoint.split(":")
        get_backend(arn_parts[4], arn_parts[3]).invoke(
            self.endpoint, None, json.dumps(event), {"X-Amz-Invocation-Type": "Event"}, {}
        )
        state.deliveries["sns->lambda"] += 1

    replace(Subscription, "publish", publish)
