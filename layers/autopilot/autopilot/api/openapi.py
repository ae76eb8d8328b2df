"""Write the API's OpenAPI document: ``python -m autopilot.api.openapi docs/openapi.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autopilot.api.routes import openapi_document


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autopilot.api.openapi OUTPUT.json", file=sys.stderr)
        return 2
    Path(args[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
