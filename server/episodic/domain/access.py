"""Which agents a caller may use. A key restricted to some agents is refused
(PERMISSION_DENIED) an agent it names outright, checked before existence as AIP-193 asks;
an episode or model call of another agent is NOT_FOUND, exactly as if it did not exist, so a
restricted key cannot learn which ids other agents hold."""

from __future__ import annotations

from episodic.domain.model import Caller
from episodic.errors import NotFound, PermissionDenied


def may_use(caller: Caller, agent_id: str) -> bool:
    return caller.agents is None or agent_id in caller.agents


def require_agent(caller: Caller, agent_id: str) -> None:
    """For requests that name the agent themselves."""
    if not may_use(caller, agent_id):
        raise PermissionDenied(f"this API key may not use agent {agent_id!r}", reason="AGENT_NOT_ALLOWED")


def require_visible(caller: Caller, agent_id: str, kind: str, resource_id: str) -> None:
    """For resources found by their own id: `agent_id` is the agent that owns them."""
    if not may_use(caller, agent_id):
        raise NotFound(kind, resource_id)


def require_every_agent(caller: Caller, action: str) -> None:
    """For tenant-wide operations, which a key restricted to some agents may not run."""
    if caller.agents is not None:
        raise PermissionDenied(
            f"{action} spans every agent of the tenant; this API key is restricted to some agents",
            reason="API_KEY_RESTRICTED_TO_AGENTS",
        )
