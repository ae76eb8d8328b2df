"""A page of a list the state table answers, with the token of the next."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Page[T](BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[T]
    next_token: str | None = None
