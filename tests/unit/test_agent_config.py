"""The agent's settings: its config.json, and HyperPod's resource_config.json for what it leaves out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from autopilot_agent import config

# the shape HyperPod writes on every node (AWS's lifecycle-script samples read ClusterConfig.ClusterArn
# and ClusterName, and InstanceGroups[].Instances[].CustomerIpAddress, from it)
RESOURCE_CONFIG = {
    "ClusterConfig": {
        "ClusterArn": "arn:aws:sagemaker:eu-west-1:123456789012:cluster/abcdefghijkl",
        "ClusterName": "ml-cluster",
    },
    "InstanceGroups": [
        {
            "Name": "controller-machine",
            "InstanceType": "ml.c5.xlarge",
            "Instances": [{"InstanceName": "controller-machine-1", "CustomerIpAddress": "10.1.2.3"}],
        }
    ],
}


def write(tmp_path: Path, name: str, body: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(body) if not isinstance(body, str) else body)
    return str(path)


def test_every_setting_from_the_config_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "config.json",
        {
            "apiUrl": "https://a1b2c3.execute-api.us-west-2.amazonaws.com/Prod/",
            "region": "us-west-2",
            "clusterName": "my-cluster",
            "pollSeconds": 0.5,
        },
    )

    settings = config.load({"AUTOPILOT_AGENT_CONFIG": path})

    assert settings == config.Config(
        "https://a1b2c3.execute-api.us-west-2.amazonaws.com/Prod", "us-west-2", "my-cluster", 0.5
    )
    assert (
        settings.reports_url
        == "https://a1b2c3.execute-api.us-west-2.amazonaws.com/Prod/agent/my-cluster/reports"
    )


def test_cluster_name_and_region_come_from_hyperpods_resource_config(tmp_path: Path) -> None:
    path = write(
        tmp_path, "config.json", {"apiUrl": "https://a1b2c3.execute-api.eu-west-1.amazonaws.com/Prod"}
    )
    resource = write(tmp_path, "resource_config.json", RESOURCE_CONFIG)

    settings = config.load({"AUTOPILOT_AGENT_CONFIG": path, "SAGEMAKER_RESOURCE_CONFIG_PATH": resource})

    assert (settings.cluster_name, settings.region) == ("ml-cluster", "eu-west-1")
    assert settings.poll_seconds is None  # the API's answers decide


@pytest.mark.parametrize(
    ("settings", "resource", "message"),
    [
        ({"apiUrl": "file:///etc/passwd", "clusterName": "c", "region": "us-west-2"}, None, "apiUrl"),
        (
            {"apiUrl": "https://x/Prod", "clusterName": "c; rm -rf /", "region": "us-west-2"},
            None,
            "clusterName",
        ),
        ({"apiUrl": "https://x/Prod", "clusterName": "c", "region": "mars"}, None, "region"),
        (
            {"apiUrl": "https://x/Prod", "clusterName": "c", "region": "us-west-2", "pollSeconds": 0},
            None,
            "poll",
        ),
        ({"apiUrl": "https://x/Prod", "region": "us-west-2"}, None, "resource config"),
        ({"apiUrl": "https://x/Prod", "region": "us-west-2"}, {"ClusterConfig": {}}, "clusterName"),
        ("{not json", None, "not valid JSON"),
    ],
)
def test_a_bad_setting_is_named(tmp_path: Path, settings: Any, resource: Any, message: str) -> None:
    env = {
        "AUTOPILOT_AGENT_CONFIG": write(tmp_path, "config.json", settings),
        "SAGEMAKER_RESOURCE_CONFIG_PATH": (
            write(tmp_path, "resource.json", resource) if resource else str(tmp_path / "absent.json")
        ),
    }

    with pytest.raises(config.ConfigError, match=message):
        config.load(env)


def test_a_missing_config_file_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError, match=r"agent config .*nowhere\.json"):
        config.load({"AUTOPILOT_AGENT_CONFIG": str(tmp_path / "nowhere.json")})
