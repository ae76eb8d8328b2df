"""Every template function imports as Lambda imports it, with only what the layer ships (its
requirements and their dependencies) and the standard library: a module the development venv holds
but the layer does not (the X-Ray SDK, awscrt) fails the import here as it would fail the function's
init in AWS. The same probe `make bench` times (sandbox/apps/bench/cold_start.py)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import autopilot
import autopilot_config
import pytest
from pydantic import BaseModel

from sandbox.apps.bench.cold_start import (
    BASELINE_NAME,
    FIRST_USE,
    FLOOR,
    FLOOR_OF,
    FLOORS,
    ColdStart,
    Target,
    floor_of,
    lambda_environment,
    layer_distributions,
    measure_once,
    not_in_layer,
    reference_targets,
    template_targets,
)

TARGETS = template_targets()


def run_probe(target: Target, probe: str, *args: str) -> str:
    """What ``probe`` prints, run in a Lambda-like interpreter for ``target`` (its environment, no site)."""
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe, *args],
        env=lambda_environment(target),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


def loaded_by_init(target: Target, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` the handler's import loads, in a Lambda-like interpreter."""
    probe = f"import sys, {target.module}; print(','.join(m for m in {modules!r} if m in sys.modules))"
    return [m for m in run_probe(target, probe).strip().split(",") if m]


def test_the_layer_ships_its_requirements_and_not_the_venvs_extras() -> None:
    shipped = layer_distributions()
    assert {"boto3", "botocore", "aws-lambda-powertools", "pydantic", "pydantic-core"} <= shipped
    assert {"aws-xray-sdk", "awscrt", "pyopenssl"}.isdisjoint(shipped)
    # What the venv has beyond the layer is kept out of the measured interpreter: the X-Ray SDK always
    # (dev.lock), awscrt and pyOpenSSL where something installed them (aws-sam-cli did, before .venv-sam).
    installed_extras = {m for m in ("aws_xray_sdk", "awscrt", "OpenSSL") if importlib.util.find_spec(m)}
    assert "aws_xray_sdk" in installed_extras
    assert installed_extras <= not_in_layer()
    assert {"autopilot", "autopilot_config"}.isdisjoint(not_in_layer())


def test_every_template_function_is_measured() -> None:
    init_rows = {t.name for t in TARGETS if not t.first_use}
    assert len(init_rows) == 13
    assert {"ApiFunction", "ClusterEventsFunction", "HealingSweepFunction"} <= init_rows
    first_use = {t.name for t in TARGETS if t.first_use}
    assert {"ApiFunction, first POST /clusters", "ApiFunction, first GET /clusters/{name}"} <= first_use


def test_each_row_is_measured_against_a_floor_of_its_stack() -> None:
    # ApiFunction routes with the REST resolver (its floor has it), its first-use rows too; the others
    # log, write metrics and validate (the common floor). A misspelt floor would fail the bench's run.
    assert {FLOOR, *FLOOR_OF.values()} <= set(FLOORS)
    assert set(FLOOR_OF) <= {t.name for t in TARGETS}
    assert floor_of("ApiFunction, first POST /clusters") == floor_of("ApiFunction") == FLOOR_OF["ApiFunction"]
    assert floor_of("ClusterEventsFunction") == FLOOR


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_the_handler_imports_with_only_the_layer(target: Target) -> None:
    assert measure_once(target) > 0


def test_the_baseline_and_the_floors_import_with_only_the_layer(tmp_path: Path) -> None:
    references = reference_targets(tmp_path)

    assert [t.name for t in references] == [BASELINE_NAME, *FLOORS]
    assert all(measure_once(t) > 0 for t in references)


def test_each_floor_handler_works_as_the_stack_it_stands_for(tmp_path: Path) -> None:
    # A floor that imported the stack but could not serve would time less than a function pays.
    probe = (
        "import json, sys\nfrom app import handler\nfor event in json.loads(sys.argv[1]):\n"
        "    try:\n        print(handler(event, None).get('statusCode', 'ok'))\n"
        "    except Exception as error:\n        print(type(error).__name__)"
    )
    good: dict[str, object] = {"name": "a", "count": 1}
    bad: dict[str, object] = {"name": "a"}

    def post(body: dict[str, object]) -> dict[str, object]:
        return {
            "httpMethod": "POST", "path": "/items", "resource": "/items",
            "headers": {"Content-Type": "application/json"}, "body": json.dumps(body),
            "requestContext": {"stage": "Prod", "httpMethod": "POST", "resourcePath": "/items"},
        }  # fmt: skip

    answers = {}
    for target in reference_targets(tmp_path)[1:]:
        events = (
            [good, bad]
            if target.name == "floor: Logger, Metrics, a pydantic model"
            else [post(good), post(bad)]
        )
        output = run_probe(target, probe, json.dumps(events))
        answers[target.name] = output.split()

    assert answers == {
        "floor: Logger, Metrics, a pydantic model": ["ok", "ValidationError"],
        "floor: REST resolver, no validation": ["200", "ValidationError"],
        "floor: REST resolver with validation": ["200", "422"],
    }


@pytest.mark.parametrize(
    "target", [t for t in TARGETS if t.name != "ApiFunction" and not t.first_use], ids=lambda t: t.name
)
def test_only_the_api_imports_the_apis_models(target: Target) -> None:
    # ~20 ms of pydantic classes: BudgetAlertsFunction imported them for a route's response model. The
    # API's models are autopilot.models.bodies (logic/ takes them without importing api/), its routers
    # and error table api.routes and api.errors; a small helper of api/ (api.unavailable: which AWS
    # errors are transient, AgentFunction's 503) costs nothing and may be shared.
    api = ("autopilot.models.bodies", "autopilot.api.routes", "autopilot.api.errors", "autopilot.api.wiring")
    assert loaded_by_init(target, api) == []


# What a function imports only on a rare path (``import`` inside the function), held out of its init.
RARE_PATHS = {
    # The diagnosis core and its catalog: only a failed scale-up or node launch is diagnosed.
    "ClusterEventsFunction": ("autopilot.logic.diagnose_failure", "autopilot.diagnosis"),
}


@pytest.mark.parametrize(("function", "modules"), RARE_PATHS.items(), ids=list(RARE_PATHS))
def test_a_rare_path_is_imported_on_first_use(function: str, modules: tuple[str, ...]) -> None:
    assert loaded_by_init(next(t for t in TARGETS if t.name == function), modules) == []


# What an init does not import (issue 22, Deliver 6). The API includes a resource's router on the first
# request for its paths and its routes import their use cases on their first request, so its init holds
# none of autopilot.logic but the error table's two errors (authorize_delete's, which needs callers).
# ClusterEventsFunction answers SQS's partial batch response itself, without Powertools' batch utility
# (asyncio and every event data class).
API_INIT_LOGIC = {"autopilot.logic", "autopilot.logic.authorize_delete", "autopilot.logic.callers"}
INIT_LOADS_NO = {
    # ~85 model classes (and the first full garbage collection they brought) of the routers' bodies,
    # the records, usage, agent and budget-alert models and the settings: only the error body is built
    # by the init; the rest comes with the first request for a router's paths.
    "ApiFunction": (
        "autopilot.api.clusters",
        "autopilot.api.healing",
        "autopilot.api.nodes",
        "autopilot.api.operations",
        "autopilot.api.spend",
        "autopilot.api.wiring",
        "autopilot.models.agent",
        "autopilot.models.bodies",
        "autopilot.models.budget_alerts",
        "autopilot.models.records",
        "autopilot.models.usage",
        "autopilot.settings",
    ),
    # Chargeback's intake (usage, list prices, spend, budget alerts) comes with the first report that
    # carries finished jobs: commands, status answers and reports without jobs never use it.
    "AgentFunction": (
        "autopilot.dal.spend",
        "autopilot.dal.usage",
        "autopilot.logic.account_budget_alerts",
        "autopilot.logic.spend_meter",
        "autopilot.logic.usage_ingest",
        "autopilot.logic.usage_pricing",
        "autopilot.models.usage",
        "autopilot.pricing",
    ),
    # The agent's trust finds a cluster's controller group for the login targets; the agent's models
    # (~5 ms) are for its reports, which this function never reads.
    "LoginTargetsFunction": ("autopilot.models.agent",),
    "ClusterEventsFunction": (
        "asyncio",
        "aws_lambda_powertools.utilities.batch",
        "aws_lambda_powertools.utilities.data_classes",
    ),
}


def test_the_api_init_imports_no_use_case() -> None:
    target = next(t for t in TARGETS if t.name == "ApiFunction")
    probe = f"import sys, {target.module}; print(','.join(sys.modules))"
    output = run_probe(target, probe)
    loaded = output.strip().split(",")
    assert {m for m in loaded if m == "autopilot.logic" or m.startswith("autopilot.logic.")} == API_INIT_LOGIC


@pytest.mark.parametrize(("function", "modules"), INIT_LOADS_NO.items(), ids=list(INIT_LOADS_NO))
def test_an_init_loads_none_of_these(function: str, modules: tuple[str, ...]) -> None:
    assert loaded_by_init(next(t for t in TARGETS if t.name == function), modules) == []


def test_the_clusters_router_imports_no_agent_usage_or_budget_alert_models() -> None:
    # A request for a cluster (its router, the bodies, the wiring) shows the agent's state and the
    # budget's enforcement and checks department budgets: those are autopilot.models.values, not the
    # ~25 model classes of the agent's reports, the usage report and the budget alerts.
    target = next(t for t in TARGETS if t.name == "ApiFunction")
    probe = (
        f"import sys, {target.module}, autopilot.api.clusters, autopilot.api.wiring; "
        "print(','.join(m for m in sys.modules if m.startswith('autopilot.models.')))"
    )
    output = run_probe(target, probe)
    loaded = set(output.strip().split(","))
    assert "autopilot.models.bodies" in loaded
    assert loaded.isdisjoint(
        {"autopilot.models.agent", "autopilot.models.usage", "autopilot.models.budget_alerts"}
    )


# What a first request does not import (issue 22, Deliver 6): a create stores its department budgets
# without the usage models (~25 ms, models/values.stored_budgets) and checks login target groups, and
# so imports the agent's trust and models, only when the request names some.
FIRST_USE_LOADS_NO = {
    "ApiFunction, first POST /clusters": (
        "autopilot.logic.agent.trust",
        "autopilot.logic.login_targets",
        "autopilot.models.agent",
        "autopilot.models.usage",
    ),
    "ApiFunction, first GET /clusters/{name}": ("autopilot.models.agent", "autopilot.models.usage"),
}


@pytest.mark.parametrize(("row", "modules"), FIRST_USE_LOADS_NO.items(), ids=list(FIRST_USE_LOADS_NO))
def test_a_first_request_loads_none_of_these(row: str, modules: tuple[str, ...]) -> None:
    target = next(t for t in TARGETS if t.name == row)
    probe = (
        f"import sys, {target.module}, {', '.join(target.first_use)}; "
        f"print(','.join(m for m in {modules!r} if m in sys.modules))"
    )
    assert run_probe(target, probe).strip() == ""


# The settings modules each init imports (autopilot.settings: one per function, the healing ones shared
# by the functions that start repairs): its own, not the thirteen classes of every function. ApiFunction
# reads its own and the healing ones on its first request (autopilot.api.wiring), DiagnoseFailureFunction
# none.
SETTINGS_OF = {
    "AgentFunction": {"agent"},
    "ApiFunction": set(),
    "BudgetAlertsFunction": {"budget_alerts"},
    "ClusterEventsFunction": {"cluster_events", "healing"},
    "CostTaggerFunction": {"cost_tagger"},
    "DiagnoseFailureFunction": set(),
    "HealingSweepFunction": {"healing", "healing_sweep"},
    "LoginTargetsFunction": {"login_targets"},
    "ReconcilerFunction": {"reconciler"},
    "RecordOutcomeFunction": {"record_outcome"},
    "SessionGuardFunction": {"session_guard"},
    "SpendMeterFunction": {"spend_meter"},
    "UsageExportFunction": {"usage_export"},
}


def submodules_loaded_at_init(target: Target, package: str) -> set[str]:
    """The modules of ``package`` the handler's import loaded (their names under the package)."""
    probe = (
        f"import sys, {target.module}; print(','.join(m for m in sys.modules if m.startswith('{package}.')))"
    )
    return {m.removeprefix(f"{package}.") for m in run_probe(target, probe).strip().split(",") if m}


@pytest.mark.parametrize("target", [t for t in TARGETS if not t.first_use], ids=lambda t: t.name)
def test_an_init_imports_only_its_own_settings(target: Target) -> None:
    assert submodules_loaded_at_init(target, "autopilot.settings") - {"base"} == SETTINGS_OF[target.name]


# The record modules each init imports (autopilot.models.records: one per item, each model's module
# imported when the model is first read): those of the items it reads at init, not the thirteen classes
# (~0.03-0.06x of the baseline in a function that reads clusters only). ``base`` (the base model, times,
# enums) comes with any of them.
RECORDS_OF = {
    "AgentFunction": set(),
    "ApiFunction": set(),
    "BudgetAlertsFunction": {"cluster", "diagnosis", "operation", "repair"},
    "ClusterEventsFunction": {"cluster", "diagnosis", "healing", "operation", "repair"},
    "CostTaggerFunction": {"cluster", "diagnosis"},
    "DiagnoseFailureFunction": {"diagnosis"},
    "HealingSweepFunction": {"cluster", "diagnosis", "healing", "operation", "repair"},
    "LoginTargetsFunction": set(),
    "ReconcilerFunction": {"diagnosis", "operation", "repair"},
    "RecordOutcomeFunction": {"diagnosis", "operation", "repair"},
    "SessionGuardFunction": {"diagnosis"},
    "SpendMeterFunction": {"cluster"},
    "UsageExportFunction": {"cluster"},
}


@pytest.mark.parametrize("target", [t for t in TARGETS if not t.first_use], ids=lambda t: t.name)
def test_an_init_creates_only_the_records_it_reads(target: Target) -> None:
    assert submodules_loaded_at_init(target, "autopilot.models.records") - {"base"} == RECORDS_OF[target.name]


_FIRST_REQUESTS = """
import json, sys, app
routers = [f"autopilot.api.{r}" for r in sys.modules["autopilot.api.routes"].ROUTER_PATHS]
for method, path, body in json.loads(sys.argv[1]):
    event = {"httpMethod": method, "path": path, "resource": path, "headers": {}, "body": body,
             "requestContext": {"stage": "Prod", "httpMethod": method, "resourcePath": path}}
    status = app.app.resolve(event, None)["statusCode"]
    print("answered", status, ",".join(r for r in routers if r in sys.modules))
"""


def test_the_api_includes_a_router_on_the_first_request_for_its_paths() -> None:
    # A path of no router is answered 404 with none included; a request for /validate includes the
    # clusters router alone (its body refused before any AWS call), and the others stay unimported.
    target = next(t for t in TARGETS if t.name == "ApiFunction")
    requests = [("GET", "/nowhere", None), ("POST", "/validate", "{not json"), ("GET", "/nowhere", None)]
    output = run_probe(target, _FIRST_REQUESTS, json.dumps(requests))
    answers = [line.split(" ", 1)[1] for line in output.splitlines() if line.startswith("answered ")]
    assert answers == ["404 ", "400 autopilot.api.clusters", "404 autopilot.api.clusters"]


@pytest.mark.parametrize("target", [t for t in TARGETS if not t.first_use], ids=lambda t: t.name)
def test_every_init_imports_boto3_before_pydantic(target: Target) -> None:
    # As a bare handler and the floors do (autopilot/__init__.py): boto3 imported after the layer's
    # models costs the same init 20-30 ms more of kernel time (minor page faults).
    probe = (
        f"import sys, {target.module}; n = list(sys.modules); print(n.index('boto3'), n.index('pydantic'))"
    )
    output = run_probe(target, probe)
    boto3, pydantic = map(int, output.split())
    assert boto3 < pydantic


_BUILT_MODELS = """
import sys, {module}
from pydantic import BaseModel
def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)
print(",".join(sorted({{f"{{c.__module__}}.{{c.__qualname__}}" for c in subclasses(BaseModel)
                       if c.__module__.startswith(("autopilot", "app")) and c.__pydantic_complete__}})))
"""


@pytest.mark.parametrize("target", [t for t in TARGETS if not t.first_use], ids=lambda t: t.name)
def test_no_init_builds_a_model_of_the_layer(target: Target) -> None:
    # Every model of the layer and of the handler (module ``app``: the cost tagger's requests) is
    # ``defer_build``: its validator is built on its first validation, not by the import (a model built
    # at import, or an instance made at module level, costs ~1 ms of init each; ~100 of them were
    # ~0.1-0.2x of the baseline in every function).
    output = run_probe(target, _BUILT_MODELS.format(module=target.module))
    assert output.strip() == ""


def test_every_deferred_model_of_the_layer_builds() -> None:
    # A deferred model is built on its first validation: an annotation that cannot be resolved (a name
    # imported only for type checking) must fail here, not in a function's first invocation.
    for package in (autopilot, autopilot_config):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)

    def subclasses(cls: type[BaseModel]) -> list[type[BaseModel]]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    models = {
        c
        for c in subclasses(BaseModel)
        if c.__module__.startswith(("autopilot.", "autopilot_config."))
        and not c.__pydantic_generic_metadata__["parameters"]
    }
    assert len(models) > 100
    for model in models:
        model.model_rebuild(force=True, raise_errors=True)
        assert model.__pydantic_complete__, model


def test_a_module_outside_the_layer_fails_the_import(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import aws_xray_sdk\n\n\ndef handler(event, context):\n    return 1\n")
    target = Target("XRayFunction", tmp_path, "app", "handler", {})

    with pytest.raises(RuntimeError, match="aws_xray_sdk"):
        measure_once(target)


@pytest.mark.parametrize(
    ("function", "modules"),
    [(f, m) for f, paths in FIRST_USE.items() for m in paths.values()],
    ids=[f"{f}, {p}" for f, paths in FIRST_USE.items() for p in paths],
)
def test_a_first_use_row_times_modules_the_init_does_not_import(
    function: str, modules: tuple[str, ...]
) -> None:
    # Else its row would time nothing beyond the init (the deferral gone, or a module renamed).
    target = next(t for t in TARGETS if t.name == function)
    assert loaded_by_init(target, modules) == []
    assert (
        measure_once(
            Target(function, target.code_dir, target.module, target.function, target.environment, modules)
        )
        > 0
    )


def test_the_table_judges_an_init_by_the_aim_and_shows_a_first_use_row_without_a_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The aim (issue 22) is an init's distance above its floor: a first-use row keeps its figure but is
    # never called "ok" or "over the aim" (it times a first request's imports too).
    from sandbox.apps.bench.__main__ import print_cold_start  # noqa: PLC0415

    api, post = "ApiFunction", "ApiFunction, first POST /clusters"
    print_cold_start(
        [
            ColdStart(BASELINE_NAME, 100.0, [100.0], None),
            ColdStart(FLOOR_OF[api], 175.0, [175.0], 1.75, floor=True),
            ColdStart(api, 185.0, [185.0], 1.85, above_floor=0.10),
            ColdStart("ClusterEventsFunction", 190.0, [190.0], 1.90, above_floor=0.40),
            ColdStart(post, 260.0, [260.0], 2.60, above_floor=0.85, first_use=True),
        ]
    )
    rows = {line[:40].strip(): line for line in capsys.readouterr().out.splitlines()}

    assert "ok (" in rows[api]
    assert "over the aim" in rows["ClusterEventsFunction"]
    assert "+0.85x" in rows[post]
    assert "first use, not an init: the aim does not measure it" in rows[post]
    assert "ok (" not in rows[post]
    assert "over the aim" not in rows[post]
