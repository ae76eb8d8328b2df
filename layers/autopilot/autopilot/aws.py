"""Lazily created, cached boto3 clients.

Creating a client is not free (a SageMaker client costs ~0.25 s of cold start), so each is made on
first use and reused for the life of the execution environment. Tests inject their own clients or
call ``clients.cache_clear()`` between moto contexts.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from botocore.config import Config

# Standard retry mode: exponential backoff with jitter on throttling and 5xx.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})


@cache
def client(service: str, region: str | None = None) -> Any:
    """Return the cached boto3 client for ``service`` (typed at call sites with mypy-boto3 stubs)."""
    return boto3.session.Session().client(service, region_name=region, config=_CONFIG)  # type: ignore[call-overload]
