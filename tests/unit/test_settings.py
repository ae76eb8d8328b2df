"""Settings parse the template's text once into typed fields (issue 22, "settings parsed once"): a use case
reads a tuple, a CostTagKeys or a bool, and a malformed value fails the settings naming its variable."""

from __future__ import annotations

import pytest
from autopilot.models.cost_allocation import CostTagKeys
from autopilot.settings import ApiSettings, CostTaggerSettings, SessionGuardSettings, SettingsError

from tests.samples import API_ENVIRONMENT

API = API_ENVIRONMENT | {
    # the template's defaults
    "EXECUTION_ROLE_NAME_PATTERNS": "*HyperPod*,*hyperpod*",
    "AUTOPILOT_STACK_NAME": "hyperpod-autopilot",
}
ADMIN = "arn:aws:iam::123456789012:role/platform-admin"
ALICE = "arn:aws:iam::123456789012:user/alice"


def test_comma_separated_parameters_are_tuples_of_their_entries() -> None:
    settings = ApiSettings.from_environ(
        API
        | {
            "ADMIN_PRINCIPAL_ARNS": f" {ADMIN}, ,{ALICE},",
            "ALLOWED_INSTANCE_TYPES": "ml.p5.48xlarge, ml.g5.*",
            "EKS_CLUSTER_NAMES": "ml-eks",
        }
    )

    assert settings.admin_principal_arns == (ADMIN, ALICE)
    assert settings.execution_role_name_patterns == ("*HyperPod*", "*hyperpod*")
    assert settings.allowed_instance_types == ("ml.p5.48xlarge", "ml.g5.*")
    assert settings.eks_cluster_names == ("ml-eks",)


def test_empty_lists_and_the_templates_defaults() -> None:
    settings = ApiSettings.from_environ(API)

    assert (settings.admin_principal_arns, settings.allowed_instance_types, settings.eks_cluster_names) == (
        (),
        (),
        (),
    )
    assert settings.cost_tag_keys == CostTagKeys()
    assert (settings.preflight_checks, settings.caller_resource_checks) == (False, False)


def test_execution_role_name_patterns_of_only_commas_and_blanks_fail_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="EXECUTION_ROLE_NAME_PATTERNS"):
        ApiSettings.from_environ(API | {"EXECUTION_ROLE_NAME_PATTERNS": " , "})


def test_cost_tag_keys_are_parsed_once_into_the_keys() -> None:
    api = ApiSettings.from_environ(API | {"COST_TAG_KEYS": "owner=Owner, cost-center=CostCenter"})
    tagger = CostTaggerSettings.from_environ({"STATE_TABLE_NAME": "state", "COST_TAG_KEYS": "project=Team"})

    assert api.cost_tag_keys == CostTagKeys(owner="Owner", cost_center="CostCenter")
    assert tagger.cost_tag_keys == CostTagKeys(project="Team")


@pytest.mark.parametrize("text", ["team=Team", "owner=aws:owner", "owner=ClusterName"])
def test_malformed_cost_tag_keys_fail_the_settings_naming_the_variable(text: str) -> None:
    with pytest.raises(SettingsError, match="COST_TAG_KEYS: Value error, CostTagKeys"):
        ApiSettings.from_environ(API | {"COST_TAG_KEYS": text})
    with pytest.raises(SettingsError, match="COST_TAG_KEYS"):
        CostTaggerSettings.from_environ({"STATE_TABLE_NAME": "state", "COST_TAG_KEYS": text})


def test_enabled_and_disabled_switches_are_bools() -> None:
    settings = ApiSettings.from_environ(
        API | {"PREFLIGHT_CHECKS": "Enabled", "CALLER_RESOURCE_CHECKS": "Disabled"}
    )

    assert (settings.preflight_checks, settings.caller_resource_checks) == (True, False)


@pytest.mark.parametrize("value", ["enabled", "true", "", "Yes"])
def test_a_switch_is_only_enabled_or_disabled(value: str) -> None:
    with pytest.raises(
        SettingsError, match="CALLER_RESOURCE_CHECKS: Value error, must be Enabled or Disabled"
    ):
        ApiSettings.from_environ(API | {"CALLER_RESOURCE_CHECKS": value})


def test_forbidden_run_as_users_are_a_set() -> None:
    environment = {
        "STATE_TABLE_NAME": "state",
        "ALERTS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:alerts",
        "MAX_SESSIONS_PER_USER": "2",
    }

    forbidding = SessionGuardSettings.from_environ(
        environment | {"FORBIDDEN_RUN_AS_USERS": "root, ssm-user,"}
    )
    forbidding_none = SessionGuardSettings.from_environ(environment | {"FORBIDDEN_RUN_AS_USERS": ""})

    assert forbidding.forbidden_run_as == frozenset({"root", "ssm-user"})
    assert forbidding_none.forbidden_run_as == frozenset()


def test_the_account_is_read_off_an_arn_that_names_one() -> None:
    settings = ApiSettings.from_environ(API)

    assert settings.account == "123456789012"
    with pytest.raises(SettingsError, match="CREATE_CLUSTER_STATE_MACHINE_ARN: String should match pattern"):
        ApiSettings.from_environ(API | {"CREATE_CLUSTER_STATE_MACHINE_ARN": "create-cluster"})
