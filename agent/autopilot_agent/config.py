"""The agent's settings: /etc/autopilot-agent/config.json (AUTOPILOT_AGENT_CONFIG overrides the path).

{"apiUrl": "https://<id>.execute-api.<region>.amazonaws.com/Prod", "region": "us-west-2",
 "clusterName": "<name>", "pollSeconds": 10}
pollSeconds is optional: without it the API's answer sets the interval (AgentPollSeconds); with it the
interval is pinned (the sandbox, whose API clock runs faster than the node's).
clusterName is optional: HyperPod writes the cluster's name on every node, in
/opt/ml/config/resource_config.json under ClusterConfig.ClusterName (the path in
SAGEMAKER_RESOURCE_CONFIG_PATH when set, as HyperPod's sample on_create.sh reads it). region, when
missing, comes from that file's ClusterConfig.ClusterArn.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Mapping, NamedTuple, Optional

DEFAULT_PATH = "/etc/autopilot-agent/config.json"
RESOURCE_CONFIG_PATH = "/opt/ml/config/resource_config.json"
DEFAULT_POLL_SECONDS = 10.0  # until the API's first answer says otherwise
# CreateCluster's ClusterName pattern (botocore's sagemaker model)
_CLUSTER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")


class ConfigError(Exception):
    """The configuration cannot be used; the message says which setting and why."""


class Config(NamedTuple):
    api_url: str
    region: str
    cluster_name: str
    poll_seconds: Optional[float]  # None: the API's answer decides

    @property
    def reports_url(self) -> str:
        return f"{self.api_url}/agent/{self.cluster_name}/reports"


def load(environ: Optional[Mapping[str, str]] = None) -> Config:
    """Read and check the settings; raise ConfigError naming the bad one."""
    env = os.environ if environ is None else environ
    path = env.get("AUTOPILOT_AGENT_CONFIG") or DEFAULT_PATH
    raw = _read_json(path, "agent config")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    api_url = raw.get("apiUrl")
    if not isinstance(api_url, str) or not re.match(r"^https?://[^/\s]+(/\S*)?$", api_url):
        raise ConfigError(f"{path}: apiUrl must be the API's URL (https://<id>.execute-api.<region>...)")
    resource: Optional[Dict[str, Any]] = None
    cluster_name = raw.get("clusterName")
    if cluster_name is None:
        resource = _resource_config(env)
        cluster_name = _cluster_config(resource).get("ClusterName")
    if not isinstance(cluster_name, str) or not _CLUSTER_NAME.match(cluster_name):
        raise ConfigError(f"clusterName {cluster_name!r} is not a HyperPod cluster name")
    region = raw.get("region")
    if region is None:
        arn = _cluster_config(resource or _resource_config(env)).get("ClusterArn", "")
        region = arn.split(":")[3] if isinstance(arn, str) and arn.count(":") >= 5 else None
    if not isinstance(region, str) or not _REGION.match(region):
        raise ConfigError(f"{path}: region {region!r} is not an AWS region (e.g. us-west-2)")
    poll = raw.get("pollSeconds")
    if poll is not None and (
        isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll <= 3600
    ):
        raise ConfigError(f"{path}: pollSeconds must be a number of seconds in (0, 3600], not {poll!r}")
    return Config(api_url.rstrip("/"), region, cluster_name, None if poll is None else float(poll))


def is_interval(value: Any) -> bool:
    """A poll interval: a number of seconds in (0, 3600]."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 3600


def _resource_config(env: Mapping[str, str]) -> Dict[str, Any]:
    path = env.get("SAGEMAKER_RESOURCE_CONFIG_PATH") or RESOURCE_CONFIG_PATH
    raw = _read_json(path, "HyperPod resource config (no clusterName in the agent config)")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return raw


def _cluster_config(resource: Dict[str, Any]) -> Dict[str, Any]:
    section = resource.get("ClusterConfig")
    return section if isinstance(section, dict) else {}


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as error:
        raise ConfigError(f"cannot read the {what} {path}: {error.strerror}") from None
    except ValueError as error:
        raise ConfigError(f"{path} is not valid JSON: {error}") from None
