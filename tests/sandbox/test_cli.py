"""``python -m sandbox``: invoke, up (API + AWS endpoint), inject, demo dispatch."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
import requests

from sandbox import cli

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"


def test_invoke_prints_the_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"hello": "cli"}))
    code = cli.main(
        ["invoke", "EchoFunction", "--event", str(event), "--template", str(TEMPLATE), "-p", "Greeting=hey"]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["event"] == {"hello": "cli"}
    assert result["env"]["GREETING"] == "hey"


def test_invoke_function_error_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"fail": True}))
    assert cli.main(["invoke", "EchoFunction", "-e", str(event), "--template", str(TEMPLATE)]) == 1
    assert json.loads(capsys.readouterr().out)["errorType"] == "FixtureError"


def test_invoke_unknown_function(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["invoke", "Nope", "--template", str(TEMPLATE)]) == 2
    assert "Nope is not a function of the template" in capsys.readouterr().err


def test_inject_without_a_running_sandbox(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inject", "node_unhealthy", "--aws-url", "http://127.0.0.1:9"]) == 2
    assert "no sandbox at" in capsys.readouterr().err


def test_demo_is_dispatched_to_sandbox_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    class FakeDemo:
        @staticmethod
        def main(argv: list[str]) -> int:
            calls.append(argv)
            return 0

    monkeypatch.setitem(sys.modules, "sandbox.demo", FakeDemo)
    assert cli.main(["demo", "--scenario", "heal"]) == 0
    assert calls == [["--scenario", "heal"]]


def test_up_serves_api_and_aws_endpoint_until_sigint() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "up",
            "--api-port",
            "0",
            "--aws-port",
            "0",
            "--template",
            str(TEMPLATE),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        output = "".join(lines)
        api_url = re.search(r"API \(SigV4, service execute-api\): (\S+)", output)
        aws_url = re.search(r"AWS endpoint:\s+(\S+)", output)
        assert api_url, output
        assert aws_url, output
        assert "export AWS_ACCESS_KEY_ID=testing" in output
        assert "GET    /items/{id}  -> ApiFunction [AWS_IAM]" in output

        # the AWS endpoint is moto sharing the sandbox's backends (and the simulators)
        sqs = boto3.client(
            "sqs",
            endpoint_url=aws_url.group(1),
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        assert any("WorkQueue" in url for url in sqs.list_queues()["QueueUrls"])
        sagemaker = boto3.client(
            "sagemaker",
            endpoint_url=aws_url.group(1),
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        assert sagemaker.list_clusters()["ClusterSummaries"] == []
        health = requests.get(f"{aws_url.group(1)}/_sandbox/health", timeout=10).json()
        assert health["ok"] is True

        # inject goes through the admin route to HyperPodSimulator.apply_fault
        injected = subprocess.run(
            [
                sys.executable,
                "-m",
                "sandbox",
                "inject",
                "no_such_fault",
                "--param",
                "cluster=x",
                "--aws-url",
                aws_url.group(1),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert injected.returncode == 1
        assert "error" in json.loads(injected.stdout)

        assert requests.get(f"{api_url.group(1)}/items/1", timeout=10).status_code == 403
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
