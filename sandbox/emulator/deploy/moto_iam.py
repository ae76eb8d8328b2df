"""What the deployer needs from moto's IAM beyond its API: AWS managed policies, and versionless policies.

moto ships AWS's managed policy documents (moto/iam/aws_managed_policies.py, imported from AWS
periodically) but loads them into its IAM only when configured to (``iam.load_aws_managed_policies``).
The sandbox needs them twice: the SAM transform maps a bare policy name in ``Policies`` to its ARN,
and a role's ManagedPolicyArns must be attached in moto's IAM, so that GetPolicy / GetPolicyVersion
show what a function's role really allows.

Seams (each checks moto's shape first, SeamDrift otherwise; tests/sandbox/test_deploy.py covers them):
- ``add_aws_managed_policies``: puts the AWS managed policies a role needs into moto's IAM backend
  (moto has no API that creates a policy under the ``aws`` account).
- ``versionless_policies_accepted``: IAM accepts a policy without ``Version`` (it means 2008-10-17,
  without policy variables) and SAM's policy templates (DynamoDBCrudPolicy…) have none; moto's
  validator demands 2012-10-17. While the seam is on, a versionless document without ``${`` passes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.iam import models as iam_models
from moto.iam.aws_managed_policies import aws_managed_policies_data
from moto.iam.policy_validation import BaseIAMPolicyValidator

from sandbox.emulator.patching import SeamDrift

from .stack import TemplateError


@functools.cache
def _documents() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(aws_managed_policies_data)
    return data


def arn_of(name: str, partition: str) -> str:
    return f"arn:{partition}:iam::aws:policy{_documents()[name].get('Path', '/')}{name}"


def policy_map(partition: str) -> dict[str, str]:
    """Policy name -> ARN, what SAM's ManagedPolicyLoader reads from IAM ListPolicies(Scope=AWS)."""
    return {name: arn_of(name, partition) for name in _documents()}


def add_aws_managed_policies(account_id: str, partition: str, arns: list[str]) -> None:
    """Seam: the AWS managed policies among ``arns`` exist in moto's IAM (the others are left alone)."""
    backend = iam_models.iam_backends[account_id][partition]
    policies = getattr(backend, "managed_policies", None)
    if not isinstance(policies, dict) or not hasattr(iam_models.AWSManagedPolicy, "from_data"):
        raise SeamDrift("add_aws_managed_policies: IAMBackend.managed_policies / AWSManagedPolicy moved")
    for arn in arns:
        if arn in policies or ":iam::aws:policy/" not in arn:
            continue
        name = arn.rpartition("/")[2]
        if name not in _documents() or arn != arn_of(name, partition):
            raise TemplateError(f"ManagedPolicyArns: {arn} is not an AWS managed policy")
        policy = iam_models.AWSManagedPolicy.from_data(
            name, account_id, backend.region_name, _documents()[name]
        )
        if policy.arn != arn:
            raise SeamDrift(f"add_aws_managed_policies: moto names {name} {policy.arn}, expected {arn}")
        policies[arn] = policy


@contextmanager
def versionless_policies_accepted() -> Iterator[None]:
    """Seam: while on, moto's IAM accepts a policy document without Version, as IAM does."""
    original = BaseIAMPolicyValidator.__dict__.get("_validate_version")
    if not callable(original) or "_policy_json" not in BaseIAMPolicyValidator("{}").__dict__:
        raise SeamDrift("versionless_policies_accepted: BaseIAMPolicyValidator._validate_version moved")

    def validate_version(self: BaseIAMPolicyValidator) -> None:
        document = self._policy_json
        if "Version" in document or "${" in json.dumps(document):
            original(self)

    BaseIAMPolicyValidator._validate_version = validate_version  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseIAMPolicyValidator._validate_version = original  # type: ignore[method-assign]
