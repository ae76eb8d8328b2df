"""An EventBridge rule delivers to an SQS queue only when the queue's policy lets it, as on AWS
(issue 20): the sandbox used to deliver to any queue, so a test or demo could rely on a delivery AWS
never makes."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox.emulator.bus import let_rule_send_to_queue
from sandbox.harness.core import Sandbox

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"


def test_a_rule_delivers_to_a_queue_only_when_the_queue_policy_allows_that_rule() -> None:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=4) as sb:
        sqs, events = sb.client("sqs"), sb.client("events")
        url = sqs.create_queue(QueueName="policy-less")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        rule_arn = events.put_rule(
            Name="to-policy-less", EventPattern=json.dumps({"source": ["trust.test"]})
        )["RuleArn"]
        events.put_targets(Rule="to-policy-less", Targets=[{"Id": "queue", "Arn": arn}])
        entry = {"Source": "trust.test", "DetailType": "x", "Detail": '{"k": 1}'}

        events.put_events(Entries=[entry])
        assert sb.settle()
        assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []

        # another rule's permission is not this rule's
        let_rule_send_to_queue(sqs, url, arn, rule_arn.replace("to-policy-less", "another-rule"))
        events.put_events(Entries=[entry])
        assert sb.settle()
        assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []

        let_rule_send_to_queue(sqs, url, arn, rule_arn)
        events.put_events(Entries=[entry])
        assert sb.settle()
        [message] = sqs.receive_message(QueueUrl=url)["Messages"]
        assert json.loads(message["Body"])["detail"] == {"k": 1}
