"""Print the paths of the layer modules the CLI's wheel takes (cli/pyproject.toml's packages and
py-modules from ../layers/autopilot): `make lint` type-checks them for the CLI's oldest Python."""

from __future__ import annotations

import tomllib
from pathlib import Path

CLI = Path(__file__).resolve().parent


def layer_sources() -> list[Path]:
    setuptools = tomllib.loads((CLI / "pyproject.toml").read_text())["tool"]["setuptools"]
    layer = (CLI / setuptools["package-dir"]["autopilot"]).resolve()
    root = layer.parent.relative_to(CLI.parent)
    packages = [p for p in setuptools["packages"] if p.split(".")[0] == "autopilot"]
    return [root / p.replace(".", "/") for p in packages] + [
        root / f"{m.replace('.', '/')}.py" for m in setuptools["py-modules"]
    ]


if __name__ == "__main__":
    print(*layer_sources())
