"""With real Slurm, the sandbox deploys the AgentPollSeconds its agents really keep in simulated time.

The agents poll every half wall second; at x1200 that is 600 simulated seconds, past the template's
MaxValue (300), whose connected window (3 polls) and agent-step limits (300 s + 3 polls) would be about
a wall second: a busy machine would turn them into a silent agent and timed-out drains.
"""

from __future__ import annotations

import pytest

from sandbox.emulator.deploy.template import TemplateError, load_template, parameter_values
from sandbox.harness.core import DEFAULT_TEMPLATE, Sandbox


def test_a_slurm_sandbox_on_a_fast_clock_deploys_two_wall_seconds_of_polls() -> None:
    assert Sandbox(slurm=True, speed=1200)._deploy_parameters() == {
        "parameters": {"AgentPollSeconds": 2400},
        "max_values": {"AgentPollSeconds": 3600},
    }
    assert Sandbox(slurm=True, speed=600, parameters={"LogLevel": "INFO"})._deploy_parameters() == {
        "parameters": {"LogLevel": "INFO", "AgentPollSeconds": 1200},
        "max_values": {"AgentPollSeconds": 3600},
    }


def test_the_caller_a_frozen_clock_and_no_slurm_keep_the_templates_value() -> None:
    pinned = {"AgentPollSeconds": 30}
    assert Sandbox(slurm=True, speed=1200, parameters=pinned)._deploy_parameters() == {"parameters": pinned}
    assert Sandbox(slurm=True, speed=0)._deploy_parameters() == {"parameters": {}}
    assert Sandbox(slurm=False, speed=1200)._deploy_parameters() == {"parameters": {}}


def test_only_the_sandbox_lifts_the_maxvalue_cloudformation_checks() -> None:
    template = load_template(DEFAULT_TEMPLATE)
    with pytest.raises(TemplateError, match="AgentPollSeconds: '2400' is greater than MaxValue 300"):
        parameter_values(template, {"AgentPollSeconds": 2400})
    lifted = parameter_values(template, {"AgentPollSeconds": 2400}, max_values={"AgentPollSeconds": 3600})
    assert lifted["AgentPollSeconds"] == "2400"
