"""Who a caller is for ownership (logic/callers.py): a person where AWS vouches for one, else the role."""

from __future__ import annotations

import pytest
from autopilot.logic.authorize_delete import NotAllowedError, authorize_delete
from autopilot.logic.callers import acts_as, person

ACCOUNT = "123456789012"
SSO_ROLE = "AWSReservedSSO_MLResearcher_0123456789abcdef"


def sso(user: str, role: str = SSO_ROLE) -> str:
    """An IAM Identity Center session's ARN as API Gateway gives it (userArn): no role path."""
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{user}"


def session(name: str, role: str = "ResearcherRole") -> str:
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{name}"


def role(name: str, path: str = "/") -> str:
    return f"arn:aws:iam::{ACCOUNT}:role{path}{name}"


def test_identity_center_users_of_one_permission_set_are_different_people() -> None:
    assert person(sso("alice")) == sso("alice")
    assert not acts_as(sso("bob"), sso("alice"))
    assert acts_as(sso("alice"), sso("alice"))
    with pytest.raises(NotAllowedError, match="may not delete cluster 'c'"):
        authorize_delete("c", sso("bob"), sso("alice"), [])
    authorize_delete("c", sso("alice"), sso("alice"), [])


def test_a_plain_role_session_is_its_role_whatever_its_name() -> None:
    """sts:AssumeRole's caller picks the session name: it proves nothing, so the role is the owner."""
    assert person(session("alice")) == role("ResearcherRole")
    assert acts_as(session("anything-i-like"), session("alice"))
    authorize_delete("c", session("mallory-says-alice"), session("alice"), [])
    # another role is another owner
    assert not acts_as(session("alice", role="OtherRole"), session("alice"))


def test_owner_matching_session_holds_every_role_session_to_its_name() -> None:
    assert person(session("alice"), matching="session") == session("alice")
    assert not acts_as(session("bob"), session("alice"), matching="session")
    with pytest.raises(NotAllowedError):
        authorize_delete("c", session("bob"), session("alice"), [], matching="session")
    authorize_delete("c", session("alice"), session("alice"), [], matching="session")


def test_a_listed_role_names_every_session_of_it_a_listed_session_only_what_it_proves() -> None:
    admins = [role(SSO_ROLE, "/aws-reserved/sso.amazonaws.com/us-west-2/")]
    # the permission set's role as an admin: each of its users
    authorize_delete("c", sso("carol"), sso("alice"), admins)
    # one Identity Center user as an admin: that user only
    authorize_delete(
        "c", sso("carol", role="AWSReservedSSO_Admin_1"), None, [sso("carol", role="AWSReservedSSO_Admin_1")]
    )
    with pytest.raises(NotAllowedError):
        authorize_delete(
            "c",
            sso("dave", role="AWSReservedSSO_Admin_1"),
            None,
            [sso("carol", role="AWSReservedSSO_Admin_1")],
        )


def test_an_identity_center_name_on_another_role_gains_nothing() -> None:
    """A customer role that merely starts with AWSReservedSSO_ is held to its own sessions' names: no
    other role's session (the real permission set's) is ever matched through it."""
    fake = "AWSReservedSSO_MLResearcher_fake"
    assert not acts_as(sso("alice", role=fake), sso("alice"))
    assert not acts_as(sso("alice"), sso("alice", role=fake))


def test_users_and_unidentified_callers() -> None:
    alice = f"arn:aws:iam::{ACCOUNT}:user/alice"
    assert person(alice) == alice
    assert not acts_as(f"arn:aws:iam::{ACCOUNT}:user/bob", alice)
    with pytest.raises(NotAllowedError, match="an unidentified caller"):
        authorize_delete("c", None, alice, [alice])
