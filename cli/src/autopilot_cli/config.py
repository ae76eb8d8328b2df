"""Where the CLI finds the API: ``--endpoint``, else ``$AUTOPILOT_ENDPOINT``, else the config file
``autopilot configure`` wrote.

The file is ``$AUTOPILOT_CONFIG`` when set, else ``$XDG_CONFIG_HOME/autopilot/config.json`` (by
default ``~/.config/autopilot/config.json``)::

    {"endpoint": "https://abc123.execute-api.us-east-1.amazonaws.com/Prod",
     "region": "us-east-1", "stack": "hyperpod-autopilot"}
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

CONFIG_ENV = "AUTOPILOT_CONFIG"
ENDPOINT_ENV = "AUTOPILOT_ENDPOINT"


class ConfigError(Exception):
    """The config file exists but cannot be used."""


@dataclass(frozen=True)
class Config:
    endpoint: str | None = None
    region: str | None = None
    stack: str | None = None


def config_path() -> Path:
    if explicit := os.environ.get(CONFIG_ENV):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "autopilot" / "config.json"


def load_config() -> Config:
    path = config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Config()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object")
    return Config(**{key: data.get(key) for key in ("endpoint", "region", "stack")})


def save_config(config: Config) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    shown = {key: value for key, value in asdict(config).items() if value is not None}
    path.write_text(json.dumps(shown, indent=2) + "\n", encoding="utf-8")
    return path
