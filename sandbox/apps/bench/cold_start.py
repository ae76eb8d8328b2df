"""Cold init of each template function, as a ratio to a bare ``import boto3`` handler.

Cold init here is what Lambda's INIT phase pays for Python code: a fresh interpreter imports the
handler module (layer on the path, the function's environment from the template, the variables
Lambda itself sets, so Powertools sees a deployed function). Only what a deployed function can import
is importable: the layer's requirements (layers/autopilot/requirements.txt) and what they depend on,
the standard library and the code itself. The development venv holds more (aws-sam-cli brings awscrt
and pyOpenSSL, which botocore imports when they are there; the X-Ray SDK), and measuring with them
would time imports that never happen in Lambda, or hide one that fails there. Interpreter start-up
itself is the same for every function and the baseline, so it is left out of both. The baseline and
the functions are measured interleaved, round by round, in the same run, so a noisy machine slows all
of them alike and the ratio stays meaningful.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from sandbox.emulator.deploy import load_template

ROOT = Path(__file__).resolve().parents[3]
LAYER_DIR = ROOT / "layers" / "autopilot"
BASELINE_NAME = "bare import boto3"

# Imports the handler module in a fresh interpreter and prints the CPU time that took, in seconds (an
# import is CPU work on files the OS has cached: on an idle machine its wall time is the same, and on
# a shared one wall time mostly measures the other processes). The top-level names in argv[3]
# (comma-separated) are not in the layer: importing one fails, as in Lambda; the modules in argv[4]
# are what the measured path imports on first use, timed with the init.
_PROBE = """
import importlib, sys, time
class NotInLayer:
    names = frozenset(sys.argv[3].split(","))
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the layer)", name=name)
        return None
sys.meta_path.insert(0, NotInLayer())
start = time.process_time()
module = importlib.import_module(sys.argv[1])
handler = getattr(module, sys.argv[2])
for name in filter(None, sys.argv[4].split(",")):
    importlib.import_module(name)
print(time.process_time() - start)
"""

_BASELINE_APP = """import boto3


def handler(event, context):
    return {"boto3": boto3.__version__}
"""


# What the stack costs before any of Autopilot's code: reference handlers, measured like the
# baseline in the same rounds. Every function logs and writes metrics with Powertools and validates
# with pydantic; ApiFunction also routes with Powertools' REST resolver, which validates requests with
# pydantic (``enable_validation``: the 422 naming the field, the OpenAPI document); without it, the
# route would validate its body itself. A function cannot start faster than its floor, so the aim is a
# distance above it (ABOVE_FLOOR_AIM; docs/operations.md "Cold start").
_STACK = """import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from pydantic import BaseModel

logger = Logger()
metrics = Metrics(namespace="Floor")


class Item(BaseModel):
    name: str
    count: int
"""
# Importing the event handler package costs ~0.3x by itself: only the resolver floors import it.
_NO_RESOLVER = ("from aws_lambda_powertools.event_handler import APIGatewayRestResolver\n", "")
_RESOLVE = """

def handler(event, context):
    return app.resolve(event, context)
"""
FLOORS: Final[dict[str, str]] = {
    "floor: Logger, Metrics, a pydantic model": _STACK.replace(*_NO_RESOLVER)
    + """

def handler(event, context):
    return Item.model_validate(event).model_dump()
""",
    "floor: REST resolver, no validation": _STACK
    + """

app = APIGatewayRestResolver()


@app.post("/items")
def create():
    return Item.model_validate(app.current_event.json_body).model_dump()
"""
    + _RESOLVE,
    "floor: REST resolver with validation": _STACK
    + """

app = APIGatewayRestResolver(enable_validation=True)


@app.post("/items")
def create(item: Item) -> Item:
    return item
"""
    + _RESOLVE,
}


@dataclass(frozen=True)
class Target:
    name: str
    code_dir: Path
    module: str
    function: str
    environment: dict[str, str]
    first_use: tuple[str, ...] = ()


# What a function imports on the first invocation of a path, not at init (``import`` inside a
# function), timed with its init in a row of its own so that deferring work stays visible.
# tests/unit/test_cold_start.py holds these out of the init. Deferred and not measured: the OpenAPI
# document's models (GET /openapi.json only), boto3 clients (created on first use: a client is the
# same cost in the baseline's handler, which has none).
FIRST_USE: Final[dict[str, dict[str, tuple[str, ...]]]] = {
    "ApiFunction": {
        # The first request for a resource includes its router (its module and models, and the use
        # cases' dependencies: autopilot.api.routes), and each route imports its use case on its first
        # request. A create: the clusters router, its use case, the validation engine and the
        # CreateCluster model; Powertools idempotency (Idempotency-Key).
        "first POST /clusters": (
            "autopilot.api.clusters",
            "autopilot.api.wiring",
            "autopilot.logic.create_cluster",
            "autopilot_config.validation",
            "aws_lambda_powertools.utilities.idempotency",
            "aws_lambda_powertools.utilities.idempotency.serialization.pydantic",
        ),
        # The most common request, a read: GET /clusters/{name} (its use case reads the registry,
        # SageMaker's status and the recent operations).
        "first GET /clusters/{name}": (
            "autopilot.api.clusters",
            "autopilot.api.wiring",
            "autopilot.logic.read_clusters",
        ),
    },
}


# The aim (issue 22): each function within this much of its floor, in ratios to the baseline of the
# same run. What the code adds above its floor is ours; the floor itself is the stack's.
ABOVE_FLOOR_AIM: Final = 0.25
FLOOR: Final = "floor: Logger, Metrics, a pydantic model"
# A function whose stack is more than the common floor: ApiFunction routes with Powertools' REST
# resolver, validating requests (``enable_validation``).
FLOOR_OF: Final[dict[str, str]] = {"ApiFunction": "floor: REST resolver with validation"}


def floor_of(name: str) -> str:
    """The floor a row is measured against (a first-use row: its function's)."""
    return FLOOR_OF.get(name.partition(",")[0], FLOOR)


@dataclass(frozen=True)
class ColdStart:
    name: str
    median_ms: float
    samples_ms: list[float]
    ratio: float | None  # to the baseline; None for the baseline itself
    floor: bool = False  # a reference handler (FLOORS), not a template function
    # ratio minus its floor's ratio (same run); None for the baseline and the floors
    above_floor: float | None = None
    # a first-use row (FIRST_USE): an init and what a first request imports, not the init the aim measures
    first_use: bool = False


def _plain_environment(variables: Mapping[str, Any], parameters: Mapping[str, Any]) -> dict[str, str]:
    """A Ref to a parameter takes its default; other intrinsics (a table's name...) a placeholder."""

    def plain(key: str, value: Any) -> str:
        if isinstance(value, str | int | float):
            return str(value)
        ref = value.get("Ref") if isinstance(value, dict) else None
        if isinstance(ref, str) and "Default" in parameters.get(ref, {}):
            return str(parameters[ref]["Default"])
        return f"bench-{key.lower().replace('_', '-')}"

    return {key: plain(key, value) for key, value in variables.items()}


def template_targets(template_path: Path = ROOT / "template.yaml") -> list[Target]:
    template = load_template(template_path)
    global_fn = template.get("Globals", {}).get("Function", {})
    global_env = global_fn.get("Environment", {}).get("Variables", {})
    targets: list[Target] = []
    for logical_id, resource in sorted(template["Resources"].items()):
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties", {})
        module, _, function = props.get("Handler", global_fn.get("Handler", "")).rpartition(".")
        env = _plain_environment(
            {**global_env, **props.get("Environment", {}).get("Variables", {})},
            template.get("Parameters", {}),
        )
        code_dir = (template_path.parent / props["CodeUri"]).resolve()
        targets.append(Target(logical_id, code_dir, module, function, env))
        for path, modules in FIRST_USE.get(logical_id, {}).items():
            targets.append(Target(f"{logical_id}, {path}", code_dir, module, function, env, modules))
    return targets


def _distribution(requirement: str) -> str:
    """The normalized distribution name a requirement line names (``boto3==1.44.5`` -> ``boto3``)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0]).lower()


def layer_distributions(requirements: Path = LAYER_DIR / "requirements.txt") -> frozenset[str]:
    """The layer's requirements and everything they require (extras left out, as pip does)."""
    wanted = [
        _distribution(line) for line in requirements.read_text().splitlines() if line.split("#")[0].strip()
    ]
    found: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        found.add(name)
        wanted.extend(_distribution(r) for r in metadata.requires(name) or [] if "extra ==" not in r)
    return frozenset(found)


@cache
def not_in_layer() -> frozenset[str]:
    """Top-level modules installed here that a deployed function cannot import (``autopilot`` is
    installed here too, from the layer's own directory)."""
    layer = layer_distributions()
    return frozenset(
        module
        for module, distributions in metadata.packages_distributions().items()
        if module not in sys.stdlib_module_names
        and not (LAYER_DIR / module).exists()
        and not any(_distribution(d) in layer for d in distributions)
    )


def _site_packages() -> list[str]:
    return list(dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]))


def lambda_environment(target: Target) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "AWS_"))}
    env.update(target.environment)
    env.update(
        {
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_LAMBDA_FUNCTION_NAME": target.name.split(",")[0],
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            # What the Lambda runtime sets: Powertools (Tracer) decides from these that it is deployed.
            "LAMBDA_TASK_ROOT": str(target.code_dir),
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
            # Lambda puts the function code first, then the layer (/opt/python); the layer's
            # requirements are the ones installed here (the probe runs without ``site``: this venv's
            # .pth files put editable installs' import hooks in front of every import).
            "PYTHONPATH": os.pathsep.join([str(target.code_dir), str(LAYER_DIR), *_site_packages()]),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


def measure_once(target: Target) -> float:
    result = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            _PROBE,
            target.module,
            target.function,
            ",".join(sorted(not_in_layer())),
            ",".join(target.first_use),
        ],
        env=lambda_environment(target),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{target.name}: handler import failed:\n{result.stderr[-2000:]}")
    return float(result.stdout.strip().splitlines()[-1]) * 1000


def reference_targets(directory: Path) -> list[Target]:
    """The baseline, then the floors: each handler written to its own folder under ``directory``."""
    targets = []
    for index, (name, code) in enumerate({BASELINE_NAME: _BASELINE_APP, **FLOORS}.items()):
        (directory / str(index)).mkdir()
        (directory / str(index) / "app.py").write_text(code)
        targets.append(Target(name, directory / str(index), "app", "handler", {}))
    return targets


def measure(rounds: int = 7, template_path: Path = ROOT / "template.yaml") -> list[ColdStart]:
    targets = template_targets(template_path)
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as tmp:
        references = reference_targets(Path(tmp))
        baseline, floors = references[0], references[1:]
        everyone = [baseline, *targets, *floors]
        samples: dict[str, list[float]] = {t.name: [] for t in everyone}
        first_use = {t.name for t in targets if t.first_use}
        measure_once(baseline)  # warm the OS file cache so round 1 is not an outlier
        for _ in range(rounds):
            for target in everyone:
                samples[target.name].append(measure_once(target))
    base = statistics.median(samples[BASELINE_NAME])

    def ratio(name: str) -> float:
        return statistics.median(samples[name]) / base

    return [
        ColdStart(
            name=name,
            median_ms=statistics.median(values),
            samples_ms=[round(v, 2) for v in values],
            ratio=None if name == BASELINE_NAME else ratio(name),
            floor=name in FLOORS,
            above_floor=None
            if name == BASELINE_NAME or name in FLOORS
            else ratio(name) - ratio(floor_of(name)),
            first_use=name in first_use,
        )
        for name, values in samples.items()
    ]


if __name__ == "__main__":
    print(json.dumps([c.__dict__ for c in measure(rounds=3)], indent=2))
