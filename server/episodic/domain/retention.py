"""Values of retention. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SoftDeleted:
    """An episode retention has just soft-deleted, with the scope its vectors live in."""

    tenant_id: str
    agent_id: str
    user_id: str
    episode_id: str
