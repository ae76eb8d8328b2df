"""What every function's settings share: the base model, its loader, and the types a template
value's text is parsed into (a comma-separated list, CostTagKeys, Enabled/Disabled).

A function's own settings are a module of this package (autopilot.settings), beside this one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Annotated, ClassVar, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from autopilot.models.cost_allocation import CostTagKeys, parse_cost_tag_keys


class SettingsError(RuntimeError):
    """A required environment variable is missing or malformed."""


def comma_separated(value: object) -> object:
    """``"a, b,,c"`` as a template parameter spells a list -> ``("a", "b", "c")`` (a list given as one
    already, by a test, is left to the field's type)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _cost_tag_keys(value: object) -> object:
    # A malformed CostTagKeys fails the settings (ValueError), naming the variable.
    return parse_cost_tag_keys(value) if isinstance(value, str) else value


def _enabled(value: object) -> object:
    """The template's ``Enabled`` / ``Disabled`` switches -> True / False; anything else is an error."""
    if value in ("Enabled", "Disabled"):
        return value == "Enabled"
    if isinstance(value, bool):
        return value
    raise ValueError("must be Enabled or Disabled")


# Comma-separated text (ARNs, names, patterns, types) -> its entries, blanks dropped.
CommaList = Annotated[tuple[str, ...], BeforeValidator(comma_separated)]
# CostTagKeys text (owner=Owner,project=Project,...) -> the keys.
CostTagKeysSetting = Annotated[CostTagKeys, BeforeValidator(_cost_tag_keys)]
# Enabled | Disabled -> bool.
Switch = Annotated[bool, BeforeValidator(_enabled)]
# An ARN that names its account (arn:partition:service:region:account:resource): an ``account`` read
# off it is then always there, a malformed one fails the settings naming the variable.
AccountArn = Annotated[str, Field(pattern=r"^arn:[a-z0-9-]+:[a-z0-9-]+:[a-z0-9-]*:\d{12}:.+")]

# AgentPollSeconds: template.yaml bounds it at 300 for a deployment; the sandbox deploys its real-Slurm
# stacks with more (its agents poll every half wall second, thousands of its simulated seconds), so the
# functions take up to an hour (docs/sandbox.md, "Real Slurm").
AGENT_POLL_LIMIT = 3600


class FunctionSettings(BaseModel):
    """One function's settings: env var names are the fields' aliases, other variables ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)
    # Who reads them, for the error message.
    reader: ClassVar[str]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """The settings in ``environ``; SettingsError naming every missing or malformed variable."""
        try:
            return cls.model_validate(dict(environ))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise SettingsError(f"invalid {cls.reader} environment: {problems}") from exc


def from_environment[T: FunctionSettings](model: type[T]) -> Callable[[], T]:
    """The loader a function calls: ``model`` read from ``os.environ`` once (tests ``cache_clear()``)."""

    @lru_cache(maxsize=1)
    def settings() -> T:
        return model.from_environ(os.environ)

    return settings
