"""``python -m sandbox``: invoke, up (API + AWS endpoint), inject, demo dispatch."""

from __future__ import annotations

import io
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
from autopilot_cli.configure import stack_api_url

from sandbox.apps import cli
from sandbox.harness.core import Sandbox

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


def test_inject_help_lists_every_fault_with_its_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["inject", "--help"])
    shown = capsys.readouterr().out

    for kind in ("throttling", "server_error", "latency", "lost_response"):
        assert kind in shown
    assert "node_unhealthy cluster node_id=None" in shown
    assert "repair_action=" in shown  # a parameter added to a fault shows without editing the help
    assert "reboot_does_not_heal cluster node_id" in shown
    assert "capacity instance_type=None" in shown


@pytest.mark.parametrize("command", ["up", "invoke"])
def test_up_and_invoke_help_show_every_default(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    shown = " ".join(capsys.readouterr().out.split())

    assert "--speed SPEED simulated seconds per wall second (default: 600.0)" in shown
    if command == "up":
        assert "(default: 3000)" in shown
        assert "(default: 5000)" in shown


def test_invoke_says_it_does_not_use_a_running_sandbox(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["invoke", "Nope", "--template", str(TEMPLATE)])
    assert "a running `up` is not used" in capsys.readouterr().err


def test_up_describes_its_stack_to_cloudformation_for_autopilot_configure() -> None:
    with Sandbox(TEMPLATE, background=False) as sandbox:
        cli.announce_stack(sandbox, "http://127.0.0.1:3000")

        cloudformation = sandbox.client("cloudformation")
        assert stack_api_url(cloudformation, sandbox.stack.name) == "http://127.0.0.1:3000"
        [described] = cloudformation.describe_stacks(StackName=sandbox.stack.name)["Stacks"]
        assert described["StackStatus"] == "CREATE_COMPLETE"


def test_demo_is_dispatched_to_sandbox_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    class FakeDemo:
        @staticmethod
        def main(argv: list[str]) -> int:
            calls.append(argv)
            return 0

    monkeypatch.setitem(sys.modules, "sandbox.apps.demo", FakeDemo)
    assert cli.main(["demo", "--scenario", "heal"]) == 0
    assert calls == [["--scenario", "heal"]]


NO_REGION_ENV: dict[str, str] = {}


@pytest.mark.parametrize(
    ("flag", "environ", "samconfig", "expected"),
    [
        ("eu-west-1", {"AWS_REGION": "us-west-2"}, 'region = "ap-south-1"', ("eu-west-1", "--region")),
        (
            None,
            {"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "eu-west-1"},
            None,
            ("us-west-2", "AWS_REGION"),
        ),
        (None, {"AWS_DEFAULT_REGION": "eu-west-1"}, None, ("eu-west-1", "AWS_DEFAULT_REGION")),
        (None, {"AWS_REGION": ""}, None, ("us-east-1", "default")),
    ],
)
def test_region_comes_from_the_flag_then_the_environment(
    tmp_path: Path,
    flag: str | None,
    environ: dict[str, str],
    samconfig: str | None,
    expected: tuple[str, str],
) -> None:
    template = tmp_path / "template.yaml"
    if samconfig is not None:
        (tmp_path / "samconfig.toml").write_text(f"version = 0.1\n[default.deploy.parameters]\n{samconfig}\n")
    assert cli.resolve_region(flag, template, environ) == expected


def test_region_then_comes_from_samconfig_as_sam_deploy_reads_it(tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text((ROOT / "samconfig.toml").read_text())  # the project's own: it names no region
    assert cli.resolve_region(None, template, NO_REGION_ENV) == (
        "us-east-1",
        f"default ({samconfig} names no region)",
    )
    samconfig.write_text('version = 0.1\n[default.global.parameters]\nregion = "ap-south-1"\n')
    assert cli.resolve_region(None, template, NO_REGION_ENV) == (
        "ap-south-1",
        f"{samconfig} [default.global.parameters]",
    )
    samconfig.write_text(
        'version = 0.1\n[default.global.parameters]\nregion = "ap-south-1"\n'
        '[default.deploy.parameters]\nregion = "us-west-2"\n'
        '[staging.deploy.parameters]\nregion = "sa-east-1"\n'
    )
    assert cli.resolve_region(None, template, NO_REGION_ENV) == (
        "us-west-2",
        f"{samconfig} [default.deploy.parameters]",
    )


@pytest.mark.slow  # `python -m sandbox up` in a subprocess, until SIGINT
def test_up_serves_api_and_aws_endpoint_until_sigint(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "AWS_REGION": "us-east-1"}
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
        assert "region: us-east-1 (from AWS_REGION)" in output
        assert "state lives in this process's memory: it is gone when the sandbox stops" in output
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

        # `autopilot configure --stack` reads the API's URL from the stack, as on AWS
        configured = subprocess.run(
            [
                sys.executable,
                "-m",
                "autopilot_cli",
                "configure",
                "--stack",
                health["stack"],
                "--output",
                "json",
            ],
            env={
                **env,
                "AWS_ENDPOINT_URL": aws_url.group(1),
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AUTOPILOT_CONFIG": str(tmp_path / "config.json"),
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert configured.returncode == 0, configured.stdout + configured.stderr
        assert json.loads(configured.stdout)["endpoint"] == api_url.group(1)

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


def test_the_console_of_up_keeps_routine_lines_in_the_log_only(tmp_path: Path) -> None:
    console, log = io.StringIO(), io.StringIO()
    quiet = cli.QuietConsole(console, log, verbose=False)
    lines = [
        '{"level":"INFO","message":"healing sweep done","service":"hyperpod-autopilot"}',
        '{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]},"ClusterEventsHandled":[1.0]}',
        '[api] 127.0.0.1 "GET /operations/op-1 HTTP/1.1" 200 -',
        '{"level":"WARNING","message":"cost tags not applied","service":"hyperpod-autopilot"}',
        '[api] 127.0.0.1 "POST /clusters HTTP/1.1" 202 -',
        '[api] 127.0.0.1 "GET /clusters/x HTTP/1.1" 404 -',
        "HyperPod Autopilot sandbox: stack hyperpod-autopilot in us-east-1",
    ]
    for line in lines:
        quiet.write(line[:10])  # in pieces, as a logger may write
        quiet.write(line[10:] + "\n")

    assert console.getvalue().splitlines() == lines[3:]
    assert log.getvalue().splitlines() == lines

    everything = io.StringIO()
    verbose = cli.QuietConsole(everything, io.StringIO(), verbose=True)
    verbose.write("\n".join(lines) + "\n")
    assert everything.getvalue().splitlines() == lines
