"""The SQS event-source mappings: batches polled from moto's queues and delivered to their
functions as Lambda's pollers do (batch size, visibility, partial batch responses).
"""

from __future__ import annotations

import threading
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from moto.awslambda.utils import get_backend
from moto.sqs.models import sqs_backends

from sandbox.emulator.lambda_runtime.results import SQS_POLLERS, FunctionThrottled, InvocationResult
from sandbox.emulator.lambda_runtime.runtime import LambdaRuntime


class SqsEventSourcePoller:
    """Lambda's SQS poller: batches of BatchSize, partial batch responses, visibility and redrive.

    Reads the event-source mappings from moto's Lambda backend (so Create/Update/Delete
    EventSourceMapping and Enabled take effect) and the queues from moto's SQS backend. A failed
    message stays in the queue for the queue's VisibilityTimeout (scaled to sandbox time by
    ``visibility_seconds``) and moves to the RedrivePolicy's DLQ after maxReceiveCount receives.
    """

    def __init__(
        self,
        runtime: LambdaRuntime,
        *,
        visibility_seconds: Callable[[float], float] | None = None,
        interval: float = 0.02,
    ) -> None:
        self.runtime = runtime
        self._visibility_seconds = visibility_seconds or (lambda seconds: seconds)
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll_lock = threading.Lock()
        self._flight = threading.Lock()
        self._in_flight: Counter[str] = Counter()  # batches running per mapping
        self.batches = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox-sqs-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delivered = self.poll_once(wait=False)
            except Exception:  # noqa: BLE001 - keep polling; the error is printed
                traceback.print_exc()
                delivered = 0
            if not delivered:
                self._stop.wait(self._interval)

    def poll_once(self, *, wait: bool = True) -> int:
        """One pass over every enabled SQS mapping: each gets as many batches as it has pollers free
        (``SQS_POLLERS``, or its ScalingConfig's MaximumConcurrency), each invoked in a thread of its
        own, so batches run at once as on Lambda. Returns how many started; with ``wait``, after they end."""
        started: list[threading.Thread] = []
        with self._poll_lock:
            runtime = self.runtime
            sqs = sqs_backends[runtime.account_id][runtime.region]
            mappings = list(get_backend(runtime.account_id, runtime.region)._event_source_mappings.values())
            for mapping in mappings:
                arn = str(mapping.event_source_arn)
                if (
                    arn.split(":")[2] != "sqs"
                    or not mapping.enabled
                    or not runtime.knows(mapping.function_arn)
                ):
                    continue
                queue = next((q for q in sqs.queues.values() if q.queue_arn == arn), None)
                if queue is None:
                    continue
                pollers = int((mapping.scaling_config or {}).get("MaximumConcurrency") or SQS_POLLERS)
                visibility = int(queue.visibility_timeout)  # type: ignore[attr-defined]
                while self._busy(mapping.uuid) < pollers:
                    messages = sqs.receive_message(queue.name, int(mapping.batch_size or 10), 0, visibility)
                    if not messages:
                        break
                    with self._flight:
                        self._in_flight[mapping.uuid] += 1
                    self.batches += 1
                    thread = threading.Thread(
                        target=self._deliver,
                        args=(mapping, queue.name, arn, messages, visibility),
                        name="sandbox-sqs-batch",
                        daemon=True,
                    )
                    thread.start()
                    started.append(thread)
        if wait:
            for thread in started:
                thread.join()
        return len(started)

    def in_flight(self) -> int:
        """Batches being delivered now."""
        with self._flight:
            return sum(self._in_flight.values())

    def _busy(self, mapping_id: str) -> int:
        with self._flight:
            return self._in_flight[mapping_id]

    def _deliver(self, mapping: Any, queue_name: str, arn: str, messages: list[Any], visibility: int) -> None:
        runtime = self.runtime
        sqs = sqs_backends[runtime.account_id][runtime.region]
        try:
            event = {"Records": [_sqs_record(message, arn, runtime.region) for message in messages]}
            try:
                result = runtime.invoke(mapping.function_arn, event)
            except FunctionThrottled:
                failed = {str(message.id) for message in messages}  # back to the queue, as Lambda does
            else:
                failed = _failed_message_ids(result, messages, mapping.function_response_types or [])
            retry_after = max(0, round(self._visibility_seconds(visibility)))
            for message in messages:
                receipt = str(message.receipt_handle)
                if message.id in failed:
                    sqs.change_message_visibility(queue_name, receipt, retry_after)
                else:
                    sqs.delete_message(queue_name, receipt)
        except Exception:  # noqa: BLE001 - a failed batch must not end the poller; printed
            traceback.print_exc()
        finally:
            with self._flight:
                self._in_flight[mapping.uuid] -= 1


def _sqs_record(message: Any, queue_arn: str, region: str) -> dict[str, Any]:
    attributes = {
        "ApproximateReceiveCount": str(message.approximate_receive_count),
        "SentTimestamp": str(message.sent_timestamp),
        "SenderId": str(message.sender_id),
        "ApproximateFirstReceiveTimestamp": str(message.approximate_first_receive_timestamp),
    }
    if message.group_id:
        attributes["MessageGroupId"] = str(message.group_id)
    if message.deduplication_id:
        attributes["MessageDeduplicationId"] = str(message.deduplication_id)
    if message.sequence_number:
        attributes["SequenceNumber"] = str(message.sequence_number)
    record: dict[str, Any] = {
        "messageId": message.id,
        "receiptHandle": message.receipt_handle,
        "body": message.body,
        "attributes": attributes,
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value.get("DataType"),
            }
            for name, value in (message.message_attributes or {}).items()
        },
        "md5OfBody": message.body_md5,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.message_attributes:
        record["md5OfMessageAttributes"] = message.attribute_md5
    return record


def _failed_message_ids(result: InvocationResult, messages: list[Any], response_types: list[str]) -> set[str]:
    """Which messages stay in the queue: all on error; with ReportBatchItemFailures, those reported."""
    every = {str(message.id) for message in messages}
    if not result.ok:
        return every
    if "ReportBatchItemFailures" not in response_types:
        return set()
    response = result.json()
    if not isinstance(response, dict) or not response.get("batchItemFailures"):
        return set()
    failures = response["batchItemFailures"]
    ids = {item.get("itemIdentifier") for item in failures if isinstance(item, dict)}
    if not isinstance(failures, list) or None in ids or "" in ids or not ids <= every:
        return every  # an invalid partial response fails the whole batch, as Lambda does
    return {str(i) for i in ids}
