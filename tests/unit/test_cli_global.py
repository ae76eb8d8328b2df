"""What every `autopilot` command shares, through main(): the exit codes of server, usage and credential
errors (JSON in JSON mode), the endpoint and saved config checked, global options, help and --debug, the
output forms, bash completion, and what the installed CLI runs as and loads."""

# ruff: noqa: F811  (the fixtures of cli_support, imported, are the tests' parameters)

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import autopilot_config
import pytest
from autopilot_cli import __version__
from autopilot_cli.main import build_parser
from autopilot_cli.output import print_generic, text_lines

from tests.unit.cli_fake_api import FakeApi
from tests.unit.cli_support import CREDENTIALS, ENDPOINT, api, no_saved_config, run, three_clusters  # noqa: F401  (fixtures)
from tests.unit.validation.builders import SLURM_CONFIG

# --- failures and usage ---------------------------------------------------------------------------


def test_server_errors_exit_3(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters/x", (503, {"message": "AWS is throttling", "operationId": "op-9"}))

    code, _, err = run("clusters", "get", "x")

    assert code == 3
    assert "  operation: op-9" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cluster-config", "/nope.json"], "cannot read"),
        (["--cluster-config", __file__], "is not JSON"),
        (["--cluster-config", str(SLURM_CONFIG), "--budget-usd", "lots"], "invalid float value: 'lots'"),
    ],
)
def test_usage_errors_exit_2(api: FakeApi, run: Any, argv: list[str], message: str) -> None:
    code, _, err = run("clusters", "create", *argv, "--owner", "a", "--project", "p")

    assert code == 2
    assert message in err
    assert api.requests == []


def test_argparse_errors_are_json_in_json_mode(run: Any) -> None:
    code, out, _ = run("clusters", "create", "--output", "json")

    assert code == 2
    assert "the following arguments are required: --cluster-config" in json.loads(out)["error"]["message"]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["clusters", "list", "--endpoint", "127.0.0.1:3000"], "give its scheme, e.g. http://127.0.0.1:3000"),
        (
            ["clusters", "list", "--endpoint", "abc.execute-api.us-east-1.amazonaws.com/Prod"],
            "e.g. https://abc.",
        ),
        (["clusters", "list", "--endpoint", "ftp://example.com"], "http:// or https://, not ftp://"),
        (["configure", "--endpoint", "127.0.0.1:3000"], "give its scheme, e.g. http://127.0.0.1:3000"),
    ],
)
def test_an_endpoint_without_a_scheme_is_a_usage_error_naming_the_fix(
    run: Any, no_saved_config: Path, argv: list[str], reason: str
) -> None:
    code, _, err = run(*argv)

    assert code == 2
    assert reason in err
    assert "Traceback" not in err
    assert not no_saved_config.exists()  # configure saved nothing


def test_an_endpoint_from_the_environment_is_checked_too(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_ENDPOINT", "127.0.0.1:3000")

    code, _, err = run("clusters", "list")

    assert code == 2
    assert (
        "$AUTOPILOT_ENDPOINT: '127.0.0.1:3000' is not a URL: give its scheme, e.g. http://127.0.0.1:3000"
        in err
    )


def test_no_endpoint_is_a_usage_error(run: Any) -> None:
    code, _, err = run("clusters", "list")

    assert code == 2
    assert "no endpoint: pass --endpoint, set $AUTOPILOT_ENDPOINT or run `autopilot configure" in err


def test_no_credentials_exit_3(run: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    code, out, _ = run(
        "clusters",
        "list",
        "--endpoint",
        "https://a1.execute-api.eu-west-1.amazonaws.com/Prod",
        "--output",
        "json",
    )

    assert code == 3
    assert json.loads(out)["error"] == {
        "code": "ClientError",
        "message": "no AWS credentials found (environment, profile, SSO or instance role)",
    }


def test_a_broken_config_file_is_a_usage_error(run: Any, no_saved_config: Path) -> None:
    no_saved_config.parent.mkdir(parents=True)
    no_saved_config.write_text("{endpoint")

    code, out, _ = run("clusters", "list", "--output", "json")

    assert code == 2
    assert json.loads(out)["error"]["message"].startswith(f"cannot read {no_saved_config}")


# --- options, help and the output forms -----------------------------------------------------------


def test_version(run: Any) -> None:
    assert run("--version")[:2] == (0, f"autopilot {__version__}\n")


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += leaf_parsers(child)
    return found or [parser]


def test_global_options_may_come_before_the_command(api: FakeApi, run: Any) -> None:
    three_clusters(api)

    code, out, _ = run("--output", "json", "--query=[].clusterName", "clusters", "list", "--owner", "ann")

    assert code == 0
    assert json.loads(out) == ["a", "c"]


def test_a_mistyped_option_shows_the_subcommands_usage(run: Any) -> None:
    code, _, err = run("clusters", "list", "--ownr", "ann")

    assert code == 2
    assert err.startswith("usage: autopilot clusters list ")
    assert "autopilot clusters list: error: unrecognized arguments: --ownr ann" in err


@pytest.mark.parametrize("command", [["clusters", "list"], ["validate", "--cluster-config", "x.json"]])
def test_an_unknown_region_is_a_usage_error(run: Any, command: list[str]) -> None:
    code, _, err = run(*command, "--region", "us-est-1")

    assert code == 2
    assert "unknown region 'us-est-1'" in err


def test_an_unknown_operation_kind_is_a_usage_error(run: Any) -> None:
    code, _, err = run("operations", "list", "ml-cluster", "--kind", "Replacenode")

    assert code == 2
    assert "invalid choice: 'Replacenode'" in err


def test_debug_shows_each_request_and_answer_without_credentials(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters", (200, {"clusters": []}))

    code, _, err = run("clusters", "list", "--debug")

    assert code == 0
    assert f"debug: > GET {ENDPOINT}/clusters" in err
    assert "debug: < 200 in " in err
    assert CREDENTIALS.secret_key not in err
    assert "Signature=" not in err


def test_every_option_shows_its_default_in_help() -> None:
    leaves = leaf_parsers(build_parser())
    assert len(leaves) == 21
    for parser in leaves:
        help_text = parser.format_help()
        for action in parser._actions:
            if action.option_strings and action.default is not argparse.SUPPRESS:
                shown = parser._get_formatter()._expand_help(action) if action.help else ""
                assert "default" in shown or "required" in shown, f"{parser.prog} {action.option_strings}"
        if parser.prog != "autopilot completion":  # a shell script, in no output form
            assert "(default: table)" in help_text, parser.prog


def test_text_and_generic_table_forms() -> None:
    document = {"name": "a", "count": 2, "ok": True, "groups": [{"g": "x", "n": 1}], "none": None}

    assert text_lines(document) == ["2\ta\t-\ttrue", "x\t1"]
    assert text_lines([]) == []

    class Out(list[str]):
        def write(self, text: str) -> None:
            self.append(text)

    out = Out()
    print_generic(document, out)  # type: ignore[arg-type]
    assert "".join(out).splitlines() == [
        "name    a",
        "count   2",
        "ok      true",
        'groups  [{"g": "x", "n": 1}]',
    ]


# --- how the CLI is installed and run -------------------------------------------------------------


def test_the_cli_loads_neither_powertools_nor_boto3_nor_the_layers_package() -> None:
    """What `pip install ./layers/autopilot/autopilot_config ./cli` brings must be enough: the layer's
    Lambda code (the `autopilot` package, Powertools, boto3) stays out; the shared rules come in."""
    code = (
        "import sys; from autopilot_cli.main import main; "
        f"main(['validate', '--cluster-config', {str(SLURM_CONFIG)!r}, '--output', 'json']); "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'autopilot', 'autopilot_config', 'aws_lambda_powertools', 'boto3'})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    )

    *report, loaded = result.stdout.splitlines()
    assert json.loads("\n".join(report))["valid"] is True
    assert json.loads(loaded) == ["autopilot_config"]
    # ...and the CLI's distribution names the shared one as a dependency, carrying none of its code
    cli = tomllib.loads((Path(__file__).parents[2] / "cli" / "pyproject.toml").read_text())
    assert cli["tool"]["setuptools"]["packages"] == ["autopilot_cli"]
    assert f"hyperpod-autopilot-config=={autopilot_config.__version__}" in cli["project"]["dependencies"]


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "autopilot_cli", "--version"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, f"autopilot {__version__}\n")


def test_the_bash_completion_completes_commands_actions_and_options(run: Any, tmp_path: Path) -> None:
    code, script, _ = run("completion", "bash")
    assert code == 0
    (tmp_path / "completion.bash").write_text(script)

    def complete(*words: str) -> list[str]:
        typed = " ".join(f"'{w}'" for w in words)
        shell = (
            f"source {tmp_path / 'completion.bash'}; COMP_WORDS=(autopilot {typed}); "
            f"COMP_CWORD={len(words)}; _autopilot; echo ${{COMPREPLY[@]}}"
        )
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True)
        return done.stdout.split()

    assert complete("clu") == ["clusters"]
    assert complete("clusters", "cr") == ["create"]
    assert complete("clusters", "create", "--dry") == ["--dry-run"]
    assert complete("healing", "pause", "ml-cluster", "--rea") == ["--reason"]
