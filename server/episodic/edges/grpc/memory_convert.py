"""Proto <-> domain for memories and session data: one table per enum."""

from __future__ import annotations

from episodic.domain.memories import (
    Memory,
    MemoryHit,
    MemoryKind,
    MemoryOrigin,
    MemoryState,
    Outcome,
    Placement,
    SessionData,
)
from episodic.domain.memory_rules import CreateRequest, MemoryDraft, SessionUpdate
from episodic.domain.ports.memories import MemoryFilter
from episodic.edges.grpc.convert import (
    SEARCH_MODES,
    SIGNAL_NUMBERS,
    duration_in,
    enum_in,
    optional_time_in,
    struct_in,
    struct_out,
    time_out,
)
from episodic.service.memories import Created
from episodic.service.memory_search import MemoryQuery
from episodic.v1 import memory_pb2 as m_pb
from episodic.v1 import memory_service_pb2 as pb

KINDS: dict[m_pb.MemoryKind.ValueType, MemoryKind] = {
    m_pb.MEMORY_KIND_FACT: MemoryKind.FACT,
    m_pb.MEMORY_KIND_PREFERENCE: MemoryKind.PREFERENCE,
    m_pb.MEMORY_KIND_EVENT: MemoryKind.EVENT,
}
MEMORY_STATES: dict[m_pb.MemoryState.ValueType, MemoryState] = {
    m_pb.MEMORY_STATE_PENDING: MemoryState.PENDING,
    m_pb.MEMORY_STATE_PROMOTED: MemoryState.PROMOTED,
}
ORIGINS: dict[m_pb.MemoryOrigin.ValueType, MemoryOrigin] = {
    m_pb.MEMORY_ORIGIN_CLIENT: MemoryOrigin.CLIENT,
    m_pb.MEMORY_ORIGIN_EXTRACTED: MemoryOrigin.EXTRACTED,
}
PLACEMENTS: dict[pb.MemoryPlacement.ValueType, Placement] = {
    pb.MEMORY_PLACEMENT_LAZY: Placement.LAZY,
    pb.MEMORY_PLACEMENT_EAGER: Placement.EAGER,
}
OUTCOMES: dict[pb.MemoryOutcome.ValueType, Outcome] = {
    pb.MEMORY_OUTCOME_CREATED: Outcome.CREATED,
    pb.MEMORY_OUTCOME_UNCHANGED: Outcome.UNCHANGED,
    pb.MEMORY_OUTCOME_MERGED: Outcome.MERGED,
    pb.MEMORY_OUTCOME_SUPERSEDED_OLDER: Outcome.SUPERSEDED_OLDER,
}
KIND_NUMBERS = {v: k for k, v in KINDS.items()}
MEMORY_STATE_NUMBERS = {v: k for k, v in MEMORY_STATES.items()}
ORIGIN_NUMBERS = {v: k for k, v in ORIGINS.items()}
OUTCOME_NUMBERS = {v: k for k, v in OUTCOMES.items()}


def draft_in(m: pb.MemoryInput, field: str) -> MemoryDraft:
    return MemoryDraft(
        text=m.text,
        kind=KINDS.get(m.kind),  # unknown or unset: the domain names the field
        memory_id=m.memory_id,
        topics=tuple(m.topics),
        entities=tuple(m.entities),
        event_time=optional_time_in(m, "event_time", f"{field}.event_time"),
        expires_at=optional_time_in(m, "expire_time", f"{field}.expire_time"),
        from_seq=m.from_seq,
        to_seq=m.to_seq,
        metadata=struct_in(m.metadata, f"{field}.metadata"),
    )


def create_in(r: pb.CreateMemoriesRequest) -> CreateRequest:
    return CreateRequest(
        drafts=[draft_in(m, f"memories[{i}]") for i, m in enumerate(r.memories)],
        agent_id=r.agent_id,
        user_id=r.user_id,
        episode_id=r.episode_id,
        placement=enum_in(PLACEMENTS, r.placement, "placement", required=False),
        keep_separate=r.keep_separate,
    )


def update_in(m: m_pb.Memory) -> MemoryDraft:
    return MemoryDraft(
        text=m.text,
        kind=KINDS.get(m.kind),
        memory_id=m.memory_id,
        topics=tuple(m.topics),
        entities=tuple(m.entities),
        event_time=optional_time_in(m, "event_time", "memory.event_time"),
        expires_at=optional_time_in(m, "expire_time", "memory.expire_time"),
        metadata=struct_in(m.metadata, "memory.metadata"),
    )


def memory_out(m: Memory) -> m_pb.Memory:
    out = m_pb.Memory(
        memory_id=m.memory_id,
        agent_id=m.agent_id,
        user_id=m.user_id,
        text=m.text,
        kind=KIND_NUMBERS[m.kind],
        topics=m.topics,
        entities=m.entities,
        source=m_pb.MemorySource(
            origin=ORIGIN_NUMBERS[m.source.origin],
            episode_id=m.source.episode_id,
            from_seq=m.source.from_seq,
            to_seq=m.source.to_seq,
        ),
        state=MEMORY_STATE_NUMBERS[m.state],
        create_time=time_out(m.created_at),
        update_time=time_out(m.updated_at),
        superseded_by=m.superseded_by,
        episode_id=m.episode_id,
        merge_count=m.merge_count,
        metadata=struct_out(m.metadata),
    )
    for name, value in (("event_time", m.event_time), ("last_recall_time", m.last_recalled_at)):
        if value is not None:
            getattr(out, name).CopyFrom(time_out(value))
    if m.expires_at is not None:
        out.expire_time.CopyFrom(time_out(m.expires_at))
    return out


def result_out(c: Created) -> pb.MemoryResult:
    return pb.MemoryResult(
        memory=memory_out(c.memory), outcome=OUTCOME_NUMBERS[c.outcome], superseded=c.superseded
    )


def list_filter_in(r: pb.ListMemoriesRequest) -> MemoryFilter:
    return MemoryFilter(
        include_superseded=r.include_superseded,
        state=enum_in(MEMORY_STATES, r.state, "state", required=False),
        episode_id=r.episode_id,
        topics=frozenset(r.topics),
    )


def query_in(r: pb.SearchMemoriesRequest) -> MemoryQuery:
    where = MemoryFilter(
        kinds=frozenset(_kind_in(k, f"kinds[{i}]") for i, k in enumerate(r.kinds)),
        topics=frozenset(r.topics),
        entities=frozenset(r.entities),
        after=optional_time_in(r, "after", "after"),
        before=optional_time_in(r, "before", "before"),
        include_superseded=r.include_superseded,
        episode_id=r.episode_id,
    )
    return MemoryQuery(
        agent_id=r.agent_id,
        user_id=r.user_id,
        mode=enum_in(SEARCH_MODES, r.mode, "mode", required=False),
        query=r.query,
        top_k=r.top_k,
        min_score=r.min_score if r.HasField("min_score") else None,
        where=where,
    )


def _kind_in(number: int, field: str) -> MemoryKind:
    kind = enum_in(KINDS, number, field, required=True)
    assert kind is not None
    return kind


def hit_out(h: MemoryHit) -> pb.MemoryHit:
    return pb.MemoryHit(
        memory=memory_out(h.memory), score=h.score, signals=[SIGNAL_NUMBERS[s] for s in h.signals]
    )


def session_update_in(r: pb.UpdateSessionDataRequest) -> SessionUpdate:
    return SessionUpdate(
        episode_id=r.episode_id,
        patch=struct_in(r.data, "data"),
        etag=r.etag,
        ttl=duration_in(r.ttl, "ttl") if r.HasField("ttl") else None,
    )


def session_out(s: SessionData) -> m_pb.SessionData:
    out = m_pb.SessionData(episode_id=s.episode_id, data=struct_out(s.data), etag=s.etag)
    if s.updated_at is not None:
        out.update_time.CopyFrom(time_out(s.updated_at))
    if s.expires_at is not None:
        out.expire_time.CopyFrom(time_out(s.expires_at))
    return out
