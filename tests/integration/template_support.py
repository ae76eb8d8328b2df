"""What test_template*.py share: template.yaml as the sandbox loads it, its resources by type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox.emulator.deploy import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == kind}
