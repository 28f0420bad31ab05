"""Deleting an agent: what it holds (and so whether it may go without erasing), the refusal
that says so, what the store removed with the agent row, and the receipt. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from episodic.domain.erasure import KINDS
from episodic.domain.model import Agent
from episodic.errors import FailedPrecondition

# What a deletion receipt counts: an erasure's kinds, then the agent's documents.
DELETION_KINDS = (*KINDS, "documents")


@dataclass(frozen=True, slots=True)
class AgentHoldings:
    """What an agent holds: users (of its episodes or memories), episodes (those retention
    soft-deleted too, until purged), long-term memories and documents (expired ones too)."""

    users: int
    episodes: int
    memories: int
    documents: int

    @property
    def empty(self) -> bool:
        return not (self.users or self.episodes or self.memories or self.documents)

    def described(self) -> str:
        return (
            f"{self.users} user(s) ({self.episodes} episode(s), {self.memories} long-term "
            f"memory(ies)) and {self.documents} document(s)"
        )


def holds_data(agent_id: str, holdings: AgentHoldings, *, meanwhile: bool = False) -> FailedPrecondition:
    """The refusal of deleting an agent that holds data: what it holds and how to proceed."""
    if meanwhile:
        return FailedPrecondition(
            f"agent {agent_id!r} was given data while it was being deleted (it now holds "
            f"{holdings.described()}); call DeleteAgent again with erase_data=true",
            reason="AGENT_HOLDS_DATA",
        )
    return FailedPrecondition(
        f"agent {agent_id!r} holds {holdings.described()}; call DeleteAgent with "
        "erase_data=true to erase all of it (each user's data as EraseUser with this agent_id "
        "erases it, audited) and delete the agent",
        reason="AGENT_HOLDS_DATA",
    )


@dataclass(frozen=True, slots=True)
class AgentRemoved:
    """What the store deleted with the agent row: the agent and its documents' ids."""

    agent: Agent
    documents: list[str]


@dataclass(frozen=True, slots=True)
class AgentDeleted:
    """The receipt of DeleteAgent: the erasures of its users (one per user) and what they
    and the agent's own deletion removed, per kind (DELETION_KINDS)."""

    agent_id: str
    deleted_at: datetime
    erasure_ids: list[str]
    counts: dict[str, int]
    index_vectors: int
    storage_scrubbed: bool

    @property
    def users(self) -> int:
        return len(self.erasure_ids)


def summed(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Receipts' counts added up, every kind of DELETION_KINDS present."""
    total = dict.fromkeys(DELETION_KINDS, 0)
    for one in counts:
        for kind, n in one.items():
            total[kind] = total.get(kind, 0) + n
    return total
