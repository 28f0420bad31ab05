"""Values of the domain: agents, episodes, messages and tool calls. All frozen."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, NoReturn, TypeVar

from episodic.domain.recall import Digest

JsonValue = None | bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]
JsonObject = Mapping[str, JsonValue]
T = TypeVar("T")


class Role(enum.StrEnum):
    SYSTEM = "system"
    CONTEXT = "context"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class EpisodeState(enum.StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class CloseReason(enum.StrEnum):
    USER_ENDED = "user_ended"
    AGENT_DECISION = "agent_decision"
    IDLE_TIMEOUT = "idle_timeout"


class PiiPolicy(enum.StrEnum):
    INHERIT = "inherit"  # the tenant's (server configuration)
    OFF = "off"
    REDACT = "redact"


class RecallMode(enum.StrEnum):
    NONE = "none"
    RECENCY = "recency"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """Budgets and recall behaviour of an agent; defaults are the documented ones."""

    max_working_memory_tokens: int = 8000
    context_window_tokens: int = 128_000
    context_ceiling_percent: int = 70
    recall_mode: RecallMode = RecallMode.HYBRID
    recall_top_k: int = 3
    recall_min_score: float = 0.0
    tool_results_kept_verbatim: int = 3
    idle_timeout: timedelta = timedelta(minutes=30)
    retention_days: int = 90  # closed episodes are soft-deleted this long after they end; 0 = never
    pii_policy: PiiPolicy = PiiPolicy.INHERIT
    known_facts: bool = True  # the "[Known Facts]" section of long-term memories
    memory_top_k: int = 5
    memory_min_score: float = 0.3  # cosine similarity of a memory to the recall query
    session_data_keys: tuple[str, ...] = ()  # rendered in "[Known Facts]", in this order
    memory_extraction_prompt: str = ""  # an LLM extractor's instructions; empty: its default
    extract_memories: bool = True  # memories are extracted from episodes when they close
    knowledge: bool = True  # each turn searches the agent's documents for "[Knowledge]"
    knowledge_top_k: int = 5  # the seeds' SemanticTopK
    knowledge_min_score: float = 0.3  # floor of the cosine of chunks found by meaning (not the fused score)
    # the most of the budget each optional section may take (percent); see domain/assembly.py
    knowledge_budget_percent: int = 25
    known_facts_budget_percent: int = 25
    recall_budget_percent: int = 50
    earlier_budget_percent: int = 50  # "[Earlier in this conversation]"; 0: off

    @property
    def ceiling_tokens(self) -> int:
        return self.context_window_tokens * self.context_ceiling_percent // 100

    def within(self, max_tokens: int) -> MemoryConfig:
        """This configuration with a context of at most `max_tokens` (the server's limit,
        which no agent's configuration lifts: it bounds what one response can hold)."""
        if self.ceiling_tokens <= max_tokens:
            return self
        return dataclasses.replace(
            self,
            context_window_tokens=max_tokens * 100 // self.context_ceiling_percent,
            max_working_memory_tokens=min(self.max_working_memory_tokens, max_tokens),
        )


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent definition. `encoding_pinned` says token_encoding was set explicitly rather
    than derived from the model, so a model change does not re-derive it."""

    tenant_id: str
    agent_id: str
    display_name: str
    system_prompt: str
    model: str
    token_encoding: str
    encoding_pinned: bool
    memory: MemoryConfig
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool-call directive carried by an assistant message."""

    tool_call_id: str
    tool_name: str
    input: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The structured result carried by a tool message."""

    tool_call_id: str
    output: JsonValue = None
    succeeded: bool = False
    error: str = ""
    called_at: datetime | None = None
    duration: timedelta | None = None


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A directive joined with its result, as the log keeps it."""

    tool_call_id: str
    tool_name: str
    input: JsonObject
    call_seq: int
    result: ToolResult | None = None
    result_seq: int = 0


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message as a client asks to append it, already validated."""

    role: Role
    content: str
    client_message_id: str | None = None
    created_at: datetime | None = None
    metadata: JsonObject = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_result: ToolResult | None = None


class _NoMetadata(dict[str, JsonValue]):
    """The one empty metadata every message without any shares (a dict, so JSON and protobuf
    take it as any other): a working set holds ~160 messages, and a new empty dict each was
    64 bytes of every one. Shared, so it refuses changes."""

    __slots__ = ()

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("the shared empty metadata cannot change")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _refuse


NO_METADATA: JsonObject = _NoMetadata()


def _no_metadata() -> JsonObject:
    return NO_METADATA


@dataclass(frozen=True, slots=True)
class Message:
    """One stored entry of an episode's log. Lean: what it holds in RAM is its text and a few
    small fields (usage, latency and audit are in `model_calls`, on disk); a working set holds
    its tail as columns (`domain.tail`), not as these."""

    episode_id: str
    seq: int
    role: Role
    content: str
    token_count: int
    token_encoding: str
    created_at: datetime
    client_message_id: str | None = None
    metadata: JsonObject = field(default_factory=_no_metadata)
    tool_calls: tuple[ToolCall, ...] = ()
    tool_result: ToolResult | None = None
    retracted_at: datetime | None = None  # RetractMessage: in the log, in no projection


@dataclass(frozen=True, slots=True)
class Episode:
    tenant_id: str
    episode_id: str
    agent_id: str
    user_id: str
    state: EpisodeState
    token_encoding: str
    started_at: datetime
    last_activity_at: datetime
    metadata: JsonObject = field(default_factory=dict)
    ended_at: datetime | None = None
    close_reason: CloseReason | None = None
    close_note: str = ""
    message_count: int = 0
    token_count: int = 0
    digest: Digest | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; `next_token` is empty on the last page."""

    items: list[T]
    next_token: str = ""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the tenant comes from the credential, never from a request field.
    `agents` is the set of agents the key may use; None means every agent of the tenant."""

    tenant_id: str
    agents: frozenset[str] | None = None
    # May create, update and delete its agents' documents (KnowledgeService). A caller made
    # in process (dev mode, tools) may; a configured key only when its entry says
    # `;knowledge=write` (keys.py).
    writes_knowledge: bool = True
