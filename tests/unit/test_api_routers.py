"""The API includes a resource's router on the first request for its paths (autopilot.api.routes):
the table of each router's paths must be the router's own rules, or a route would never be served."""

from __future__ import annotations

import importlib
import pkgutil
import re

import autopilot.api
import pytest
from autopilot.api.routes import ROUTER_PATHS, routers_for


def test_the_table_lists_every_router_with_its_own_rules() -> None:
    routers = {}
    for module in pkgutil.iter_modules(autopilot.api.__path__):
        router = getattr(importlib.import_module(f"autopilot.api.{module.name}"), "router", None)
        if router is not None:
            routers[module.name] = {rule for rule, *_ in router._routes}

    assert routers == {resource: set(paths) for resource, paths in ROUTER_PATHS.items()}


@pytest.mark.parametrize(
    ("resource", "rule"), [(r, rule) for r, rules in ROUTER_PATHS.items() for rule in rules]
)
def test_a_path_of_a_route_includes_its_router_alone(resource: str, rule: str) -> None:
    path = re.sub(r"<\w+>", "ml-cluster_1.a", rule)

    assert routers_for(path) == [resource]


@pytest.mark.parametrize(
    "path", ["/", "/nowhere", "/clusters/a/b", "/clusters/a/nodes/b", "/clusters//cost", "/clusters/a/cost/"]
)
def test_a_path_of_no_route_includes_no_router(path: str) -> None:
    assert routers_for(path) == []
