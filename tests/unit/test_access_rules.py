"""Which agents a caller may use: named agents are refused, other agents' resources hidden."""

from __future__ import annotations

import pytest

from episodic.domain.access import may_use, require_agent, require_every_agent, require_visible
from episodic.domain.model import Caller
from episodic.errors import NotFound, PermissionDenied

EVERY_AGENT = Caller("acme")
ONLY_SUPPORT = Caller("acme", frozenset({"support"}))


def test_a_key_of_the_whole_tenant_may_use_any_agent() -> None:
    assert may_use(EVERY_AGENT, "support") and may_use(EVERY_AGENT, "sales")
    require_agent(EVERY_AGENT, "sales")
    require_visible(EVERY_AGENT, "sales", "episode", "ep_1")
    require_every_agent(EVERY_AGENT, "EraseUser")


def test_a_restricted_key_may_use_its_agents() -> None:
    require_agent(ONLY_SUPPORT, "support")
    require_visible(ONLY_SUPPORT, "support", "episode", "ep_1")


def test_naming_an_agent_outside_the_key_is_permission_denied_naming_it() -> None:
    with pytest.raises(PermissionDenied, match="'sales'") as denied:
        require_agent(ONLY_SUPPORT, "sales")
    assert denied.value.reason == "AGENT_NOT_ALLOWED"


def test_another_agents_resource_is_reported_exactly_as_a_missing_one() -> None:
    with pytest.raises(NotFound) as hidden:
        require_visible(ONLY_SUPPORT, "sales", "model call", "mc_1")
    missing = NotFound("model call", "mc_1")
    assert (hidden.value.message, hidden.value.reason) == (missing.message, missing.reason)


def test_tenant_wide_operations_are_refused_to_a_restricted_key() -> None:
    with pytest.raises(PermissionDenied, match="EraseUser"):
        require_every_agent(ONLY_SUPPORT, "EraseUser")
