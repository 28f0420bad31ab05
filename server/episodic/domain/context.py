"""Values of context assembly: rendered messages, summaries (compaction records), the
report of one BuildContext call and the model call that audits it. Pure."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from episodic.domain.knowledge import RenderedKnowledge
from episodic.domain.model import Role, ToolCall
from episodic.domain.recall import Signal


class Section(enum.StrEnum):
    """Parts of a rendered context, in rendering order."""

    SYSTEM = "system"
    KNOWLEDGE = "knowledge"
    KNOWN_FACTS = "known_facts"
    PAST_CONVERSATIONS = "past_conversations"
    SUMMARY = "summary"
    EARLIER = "earlier"
    HISTORY = "history"
    USER_MESSAGE = "user_message"


class Compaction(enum.StrEnum):
    NONE = "none"
    SUMMARIZED = "summarized"
    SCHEDULED = "scheduled"
    SKIPPED_CLOSED = "skipped_closed"


@dataclass(frozen=True, slots=True)
class RenderedMessage:
    """One message as the model sees it. `tokens` includes the chat format's overhead."""

    role: Role
    content: str
    section: Section
    tokens: int
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    seq: int = 0
    stubbed: bool = False


@dataclass(frozen=True, slots=True)
class Summary:
    """A compaction record: a summary of log messages [from_seq, to_seq] of an episode.
    Summaries roll: each one covers its predecessor's span too, so the latest is enough."""

    tenant_id: str
    episode_id: str
    from_seq: int
    to_seq: int
    content: str
    token_count: int
    token_encoding: str
    summarizer: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RecalledEpisode:
    episode_id: str
    score: float
    ended_at: datetime | None
    rendered: bool
    signals: tuple[Signal, ...] = ()  # what found it


class PassageFate(enum.StrEnum):
    """What became of a passage recalled from this episode's compacted history."""

    WHOLE = "whole"
    CUT = "cut"  # rendered, a message of it clipped
    DROPPED = "dropped"  # no room left in the section's share


@dataclass(frozen=True, slots=True)
class RecalledPassage:
    """A passage of this episode's compacted history recalled for the turn."""

    seqs: tuple[int, ...]
    score: float
    fate: PassageFate
    signals: tuple[Signal, ...] = ()


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    memory_id: str
    score: float
    rendered: bool
    pending: bool  # in this episode's working memory, not yet promoted


@dataclass(frozen=True, slots=True)
class Span:
    """An inclusive range of log sequence numbers; (0, 0) is empty."""

    from_seq: int = 0
    to_seq: int = 0


@dataclass(frozen=True, slots=True)
class ContextReport:
    section_tokens: dict[Section, int]
    reply_priming: int
    budget: int
    ceiling: int
    over_budget: bool
    pruned: int
    stubbed: int
    summarized: int
    summary_span: Span
    history_span: Span
    compaction: Compaction
    recalled: tuple[RecalledEpisode, ...]
    pending_digests: int
    model: str
    token_encoding: str
    model_call_id: str = ""
    trace_id: str = ""
    user_message_seq: int = 0
    memories: tuple[RecalledMemory, ...] = ()
    session_keys: tuple[str, ...] = ()
    knowledge: tuple[RenderedKnowledge, ...] = ()
    earlier: tuple[RecalledPassage, ...] = ()

    @property
    def total_tokens(self) -> int:
        return sum(self.section_tokens.values()) + self.reply_priming


@dataclass(frozen=True, slots=True)
class ModelReply:
    input_tokens: int
    output_tokens: int
    latency: timedelta
    assistant_message_seq: int
    recorded_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """The audit row of one BuildContext call: exactly what was rendered, and why."""

    tenant_id: str
    model_call_id: str
    episode_id: str
    agent_id: str
    user_id: str
    created_at: datetime
    messages: tuple[RenderedMessage, ...]
    report: ContextReport
    request_id: str = ""
    reply: ModelReply | None = None
