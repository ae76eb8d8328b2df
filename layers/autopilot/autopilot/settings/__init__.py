"""Environment configuration as pydantic models, validated on first use: one module per function.

Each function reads only the settings it needs, and imports only their module (``api.py``: ApiFunction's,
``healing.py``: every function that starts or shows repairs...): a missing or malformed variable fails
loudly with the variable's name (no silent defaults). A value the template spells as text (a
comma-separated list, CostTagKeys, Enabled/Disabled) is parsed once, into the type its readers use
(``base.py``): a use case reads a tuple, a CostTagKeys or a bool, never the text again. Every model is
built on its first use (``defer_build``). Tests set the environment (from template.yaml) and call
``cache_clear()`` on the loader.

``from autopilot.settings import api_settings`` works for every name here: the name's module is imported
when the name is first read (``__getattr__``), so a function creates its own one or two settings
classes, not the thirteen (docs/operations.md, "Cold start").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from autopilot.settings.base import AGENT_POLL_LIMIT, SettingsError

if TYPE_CHECKING:
    from autopilot.settings.agent import AgentSettings as AgentSettings
    from autopilot.settings.agent import agent_settings as agent_settings
    from autopilot.settings.api import ApiSettings as ApiSettings
    from autopilot.settings.api import api_settings as api_settings
    from autopilot.settings.budget_alerts import BudgetAlertsSettings as BudgetAlertsSettings
    from autopilot.settings.budget_alerts import budget_alerts_settings as budget_alerts_settings
    from autopilot.settings.cluster_events import ClusterEventsSettings as ClusterEventsSettings
    from autopilot.settings.cluster_events import cluster_events_settings as cluster_events_settings
    from autopilot.settings.cost_tagger import CostTaggerSettings as CostTaggerSettings
    from autopilot.settings.cost_tagger import cost_tagger_settings as cost_tagger_settings
    from autopilot.settings.healing import HealingSettings as HealingSettings
    from autopilot.settings.healing import healing_settings as healing_settings
    from autopilot.settings.healing_sweep import HealingSweepSettings as HealingSweepSettings
    from autopilot.settings.healing_sweep import healing_sweep_settings as healing_sweep_settings
    from autopilot.settings.login_targets import LoginTargetsSettings as LoginTargetsSettings
    from autopilot.settings.login_targets import login_targets_settings as login_targets_settings
    from autopilot.settings.reconciler import ReconcilerSettings as ReconcilerSettings
    from autopilot.settings.reconciler import reconciler_settings as reconciler_settings
    from autopilot.settings.record_outcome import RecordOutcomeSettings as RecordOutcomeSettings
    from autopilot.settings.record_outcome import record_outcome_settings as record_outcome_settings
    from autopilot.settings.session_guard import SessionGuardSettings as SessionGuardSettings
    from autopilot.settings.session_guard import session_guard_settings as session_guard_settings
    from autopilot.settings.spend_meter import SpendMeterSettings as SpendMeterSettings
    from autopilot.settings.spend_meter import spend_meter_settings as spend_meter_settings
    from autopilot.settings.usage_export import UsageExportSettings as UsageExportSettings
    from autopilot.settings.usage_export import usage_export_settings as usage_export_settings

# Each function's settings class and loader -> the module of this package that defines them.
_MODULE_OF: Final = {
    "AgentSettings": "agent",
    "agent_settings": "agent",
    "ApiSettings": "api",
    "api_settings": "api",
    "BudgetAlertsSettings": "budget_alerts",
    "budget_alerts_settings": "budget_alerts",
    "ClusterEventsSettings": "cluster_events",
    "cluster_events_settings": "cluster_events",
    "CostTaggerSettings": "cost_tagger",
    "cost_tagger_settings": "cost_tagger",
    "HealingSettings": "healing",
    "healing_settings": "healing",
    "HealingSweepSettings": "healing_sweep",
    "healing_sweep_settings": "healing_sweep",
    "LoginTargetsSettings": "login_targets",
    "login_targets_settings": "login_targets",
    "ReconcilerSettings": "reconciler",
    "reconciler_settings": "reconciler",
    "RecordOutcomeSettings": "record_outcome",
    "record_outcome_settings": "record_outcome",
    "SessionGuardSettings": "session_guard",
    "session_guard_settings": "session_guard",
    "SpendMeterSettings": "spend_meter",
    "spend_meter_settings": "spend_meter",
    "UsageExportSettings": "usage_export",
    "usage_export_settings": "usage_export",
}

__all__ = [
    "AGENT_POLL_LIMIT",
    "AgentSettings",
    "ApiSettings",
    "BudgetAlertsSettings",
    "ClusterEventsSettings",
    "CostTaggerSettings",
    "HealingSettings",
    "HealingSweepSettings",
    "LoginTargetsSettings",
    "ReconcilerSettings",
    "RecordOutcomeSettings",
    "SessionGuardSettings",
    "SettingsError",
    "SpendMeterSettings",
    "UsageExportSettings",
    "agent_settings",
    "api_settings",
    "budget_alerts_settings",
    "cluster_events_settings",
    "cost_tagger_settings",
    "healing_settings",
    "healing_sweep_settings",
    "login_targets_settings",
    "reconciler_settings",
    "record_outcome_settings",
    "session_guard_settings",
    "spend_meter_settings",
    "usage_export_settings",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
