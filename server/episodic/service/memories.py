"""Long-term memories: create (LAZY into an open episode's working memory, EAGER into
long-term storage), read, list, update, delete, extraction from a live episode's compacted
turns (held PENDING in its working memory), and promotion when an episode closes.

Every write that changes what the memory index holds goes through the change owner
(`ChangeOwner.commit`): SQL first, then the index, so a crash between them is repaired
when the scope is next loaded from SQL (on its first search after the restart). Writes of
one scope are serialized here (duplicates and contradictions are decided against what the
scope holds)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.access import may_use, require_agent, require_visible
from episodic.domain.changes import MemoriesRemoved, MemoryVectors
from episodic.domain.episode_ids import agent_scoped_id
from episodic.domain.memories import (
    ExtractedMemory,
    Memory,
    MemoryOrigin,
    MemoryState,
    Outcome,
    Placement,
    extracted_id,
    text_key,
)
from episodic.domain.memory_merge import Candidate, contradicted, duplicate_of, frame_key
from episodic.domain.memory_rules import (
    MAX_PENDING_PER_EPISODE,
    CreateRequest,
    Holder,
    MemoryDraft,
    apply_mask,
    check_create,
    new_memory,
)
from episodic.domain.memory_search import cosine_hits
from episodic.domain.model import Caller, Episode, EpisodeState, Message, Page
from episodic.domain.paging import JsonScalar, decode_token, page_of, read_id, read_time
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock, IdFactory
from episodic.domain.ports.episodes import AgentStore, EpisodeStore
from episodic.domain.ports.indexes import ScopeIndex
from episodic.domain.ports.memories import MemoryFilter, MemoryStore, MemoryWrite
from episodic.domain.ports.models import MemoryExtractor, TenantEmbeddings
from episodic.domain.ports.shares import WriteQuota
from episodic.domain.recall import Digest, Hit, Scope, Vector
from episodic.domain.shares import Unmetered
from episodic.domain.transfer import ErasureWatch
from episodic.domain.validation import Limits, Violations, check_id, resolve_page_size
from episodic.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from episodic.service.privacy import PiiGuard, redact_text
from episodic.state.keyed_locks import KeyedLocks

NEIGHBOURS = 8  # nearest stored memories each new one is compared with (near duplicates)


@dataclass(frozen=True, slots=True)
class Created:
    memory: Memory
    outcome: Outcome
    superseded: tuple[str, ...] = ()


@dataclass(slots=True)
class _Plan:
    """One transaction of changes, and what each new memory came to."""

    insert: list[tuple[Memory, Vector | None]] = field(default_factory=list)
    replace: dict[str, tuple[Memory, Vector | None]] = field(default_factory=dict)
    results: list[Created] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # memory ids (of the plan's tenant)
    episode: str = ""  # the episode the write belongs to (pending memories, a promotion)

    def write(self, tenant_id: str) -> MemoryWrite:
        removed = [(tenant_id, memory_id) for memory_id in self.delete]
        episode = (tenant_id, self.episode) if self.episode else None
        return MemoryWrite(
            insert=self.insert, replace=list(self.replace.values()), delete=removed, episode=episode
        )

    def indexed(self) -> list[tuple[Memory, Vector]]:
        """Promoted memories whose vectors the index must hold after the write."""
        rows = [*self.insert, *self.replace.values()]
        return [(m, v) for m, v in rows if v is not None and m.state is MemoryState.PROMOTED]


@dataclass(kw_only=True)
class Extraction:
    """The memory extractor, run off the event loop: on `pool` (the summary pool, for an
    extractor that computes) or asyncio's default (None: an LLM waits on the network)."""

    extractor: MemoryExtractor
    pool: Executor | None = None

    async def extract(self, transcript: Sequence[Message], instructions: str) -> list[ExtractedMemory]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self.extractor.extract, transcript, instructions)


@dataclass(kw_only=True)
class MemoryService:
    store: MemoryStore
    episodes: EpisodeStore
    agents: AgentStore
    index: ScopeIndex  # promoted memories per scope (read here; written by the owner)
    changes: ChangeOwner
    pii: PiiGuard
    extraction: Extraction
    limits: Limits
    clock: Clock
    new_id: IdFactory
    quota: WriteQuota = field(default_factory=Unmetered)  # each written memory is embedded: metered
    embeddings: TenantEmbeddings  # what is written is embedded on the bulk thread, tenants in turn
    locks: KeyedLocks = field(default_factory=KeyedLocks, init=False)  # one scope's writes, one at a time

    # --- create ------------------------------------------------------------------------

    async def create(self, caller: Caller, r: CreateRequest) -> list[Created]:
        placement = check_create(r, self.clock())
        self.quota.write_memories(caller.tenant_id, len(r.drafts))
        holder = await self._holder(caller, r, placement)
        # before anything is embedded: an erasure of the user committing from here on refuses
        # the write (ABORTED), so no memory of this call lands after the erasure's receipt
        watch = await self.store.erasure_watch(holder.tenant_id, holder.user_id)
        drafts = await self._redacted(holder, await self._named_ids(caller, holder, r.drafts))
        async with self.locks.hold((holder.tenant_id, holder.agent_id, holder.user_id)):
            known = await self._known_ids(holder, drafts)
            fresh = [(i, d) for i, d in enumerate(drafts) if i not in known]
            memories = [
                new_memory(
                    d, d.memory_id or f"mem_{self.new_id()}", holder, MemoryOrigin.CLIENT, self.clock()
                )
                for _, d in fresh
            ]
            vectors = await self._embed(holder.tenant_id, [m.text for m in memories])
            if r.keep_separate:
                plan = _as_given(list(zip(memories, vectors, strict=True)))
            elif placement is Placement.LAZY:
                plan = await self._plan_pending(holder, list(zip(memories, vectors, strict=True)))
            else:
                plan = await self._plan_promoted(_scope(holder), list(zip(memories, vectors, strict=True)))
            await self._commit(plan, holder.tenant_id, watch=watch)
        made = iter(plan.results)
        return [known[i] if i in known else next(made) for i in range(len(drafts))]

    async def _holder(self, caller: Caller, r: CreateRequest, placement: Placement) -> Holder:
        if not r.episode_id:
            require_agent(caller, r.agent_id)
            await self.agents.get_agent(caller.tenant_id, r.agent_id)
            return Holder(caller.tenant_id, r.agent_id, r.user_id, "", placement)
        episode = await self.episodes.get_episode(caller.tenant_id, r.episode_id)
        require_visible(caller, episode.agent_id, "episode", r.episode_id)
        v = Violations()
        if r.agent_id and r.agent_id != episode.agent_id:
            v.add("agent_id", "is not the episode's agent (a memory belongs to the episode's agent and user)")
        if r.user_id and r.user_id != episode.user_id:
            v.add("user_id", "is not the episode's user (a memory belongs to the episode's agent and user)")
        v.raise_if_any()
        if placement is Placement.LAZY and episode.state is not EpisodeState.OPEN:
            raise FailedPrecondition(
                f"episode {r.episode_id!r} is closed: PENDING memories need an open episode; "
                "create them with MEMORY_PLACEMENT_EAGER",
                reason="EPISODE_CLOSED",
            )
        return Holder(caller.tenant_id, episode.agent_id, episode.user_id, episode.episode_id, placement)

    async def _named_ids(
        self, caller: Caller, holder: Holder, drafts: Sequence[MemoryDraft]
    ) -> Sequence[MemoryDraft]:
        """For a restricted key, a memory id it names is kept only when one of its agents
        holds it; any other (unused, or another agent's) is a name in the agent's own id
        space, as in OpenEpisode, so both get the same answer (docs/api.md)."""
        ids = [d.memory_id for d in drafts if d.memory_id]
        if caller.agents is None or not ids:
            return drafts
        stored = await self.store.get_many(holder.tenant_id, ids)
        own = {i for i, m in stored.items() if may_use(caller, m.agent_id)}
        return [
            d
            if not d.memory_id or d.memory_id in own
            else dataclasses.replace(d, memory_id=agent_scoped_id(holder.agent_id, d.memory_id, "mem_"))
            for d in drafts
        ]

    async def _redacted(self, holder: Holder, drafts: Sequence[MemoryDraft]) -> Sequence[MemoryDraft]:
        """Personal data out before anything is stored or embedded (the agent's PII policy)."""
        if not await self.pii.redacts_for(holder.tenant_id, holder.agent_id):
            return drafts
        return [
            dataclasses.replace(
                d,
                text=redact_text(d.text),
                topics=tuple(redact_text(t) for t in d.topics),
                entities=tuple(redact_text(e) for e in d.entities),
            )
            for d in drafts
        ]

    async def _known_ids(self, holder: Holder, drafts: Sequence[MemoryDraft]) -> dict[int, Created]:
        """Client ids seen before: the same content is a no-op, other content a conflict."""
        ids = [d.memory_id for d in drafts if d.memory_id]
        stored = await self.store.get_many(holder.tenant_id, ids) if ids else {}
        now = self.clock()
        gone = [m for m in stored.values() if _expired(m, now)]
        if gone:  # expired but not swept yet: reads say NOT_FOUND, so the id is free again
            await self._commit(_Plan(), holder.tenant_id, removed=[(m.scope, m.memory_id) for m in gone])
            stored = {k: m for k, m in stored.items() if not _expired(m, now)}
        known: dict[int, Created] = {}
        for i, draft in enumerate(drafts):
            found = stored.get(draft.memory_id)
            if found is None:
                continue
            probe = new_memory(draft, draft.memory_id, holder, MemoryOrigin.CLIENT, self.clock())
            if found.fingerprint != probe.fingerprint or found.scope != probe.scope:
                raise AlreadyExists(
                    f"memories[{i}].memory_id: memory {draft.memory_id!r} exists with other content",
                    reason="MEMORY_ID_CONFLICT",
                )
            known[i] = Created(found, Outcome.UNCHANGED)
        return known

    async def _embed(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        return await self.embeddings.bulk(tenant_id, texts)

    async def _plan_pending(self, holder: Holder, new: list[tuple[Memory, Vector]]) -> _Plan:
        """PENDING memories merge only exact repeats within the episode; the rest of the rules
        apply at promotion, against long-term storage."""
        held = await self.store.pending(holder.tenant_id, holder.episode_id)
        if len(held) + len(new) > MAX_PENDING_PER_EPISODE:
            raise InvalidArgument.of(
                "memories",
                f"the episode holds {len(held)} pending memories; at most {MAX_PENDING_PER_EPISODE}",
            )
        plan = _Plan(episode=holder.episode_id)
        pool = [Candidate(m) for m, _ in held]
        for memory, vector in new:
            self._merge_or_insert(plan, memory, vector, pool, supersede=False)
            pool.append(Candidate(memory))
            await _let_others_run()
        return plan

    async def _plan_promoted(self, scope: Scope, new: list[tuple[Memory, Vector]], held: int = 0) -> _Plan:
        """Each new memory, in order, against what the scope holds and the ones before it.
        The first `held` are an episode's working memory, promoted at close: the ones after
        them are compared with those by meaning too (a batch's others by text only), so a
        statement extracted while the episode was live and again at close from a wider
        window ("the same fact, slightly different text") is one memory."""
        plan = _Plan()
        stored = await self._stored_candidates(scope, new)
        nears = await asyncio.to_thread(_similar_to_held, new, held) if 0 < held < len(new) else {}
        for memory, vector in new:
            pool = stored.get(memory.memory_id, [])
            pool += [Candidate(m) for m, _ in plan.insert if m.memory_id != memory.memory_id]
            near = nears.get(memory.memory_id, {})
            pool = [
                Candidate(
                    plan.replace[c.memory.memory_id][0] if c.memory.memory_id in plan.replace else c.memory,
                    max(c.similarity, near.get(c.memory.memory_id, 0.0)),
                )
                for c in pool
            ]
            self._merge_or_insert(plan, memory, vector, pool, supersede=True)
            await _let_others_run()
        return plan

    async def _stored_candidates(
        self, scope: Scope, new: list[tuple[Memory, Vector]]
    ) -> dict[str, list[Candidate]]:
        """Per new memory: stored ones with the same text or frame, and its nearest neighbours."""
        texts = await self.store.same_text(scope, [text_key(m.text) for m, _ in new])
        frames = await self.store.same_frame(
            scope, [frame_key(m.kind.value, m.text, m.entities) for m, _ in new]
        )
        await self.index.ensure(scope)
        near = await asyncio.to_thread(self._nearest, scope, new)
        ids = {h.episode_id for hits in near.values() for h in hits}
        rows = await self.store.among(scope, list(ids), MemoryFilter(), self.clock()) if ids else {}
        shared = {m.memory_id: m for m in [*texts, *frames]}
        found: dict[str, list[Candidate]] = {}
        for memory, _ in new:
            pool = {k: Candidate(m) for k, m in shared.items()}
            for hit in near[memory.memory_id]:
                if hit.episode_id in rows:
                    pool[hit.episode_id] = Candidate(rows[hit.episode_id], hit.score)
            found[memory.memory_id] = list(pool.values())
        return found

    def _nearest(self, scope: Scope, new: list[tuple[Memory, Vector]]) -> dict[str, list[Hit]]:
        """Off the event loop: at 100k memories in a scope one search is ~9 ms."""
        return {m.memory_id: self.index.search(scope, v, NEIGHBOURS) for m, v in new}

    def _merge_or_insert(
        self, plan: _Plan, memory: Memory, vector: Vector, pool: list[Candidate], *, supersede: bool
    ) -> None:
        now = self.clock()
        repeated = duplicate_of(memory, pool)
        if repeated is not None:
            merged = dataclasses.replace(
                repeated,
                merge_count=repeated.merge_count + 1,
                updated_at=now,
                topics=tuple(dict.fromkeys([*repeated.topics, *memory.topics]))[:16],
            )
            plan.replace[merged.memory_id] = (merged, None)
            plan.results.append(Created(merged, Outcome.MERGED))
            return
        older = contradicted(memory, pool) if supersede else []
        for old in older:
            plan.replace[old.memory_id] = (
                dataclasses.replace(old, superseded_by=memory.memory_id, updated_at=now),
                None,
            )
        plan.insert.append((memory, vector))
        outcome = Outcome.SUPERSEDED_OLDER if older else Outcome.CREATED
        plan.results.append(Created(memory, outcome, tuple(o.memory_id for o in older)))

    async def _commit(
        self,
        plan: _Plan,
        tenant_id: str,
        removed: Sequence[tuple[Scope, str]] = (),
        watch: ErasureWatch | None = None,
    ) -> frozenset[str]:
        """The ids of rows the plan replaces or removes that were gone (erased meanwhile):
        they stay gone, and no change of theirs reaches the index or the change feed (a feed
        row names its user, and the erasure has replaced the user's rows with its marker)."""

        def changes(gone: frozenset[str]) -> list[MemoryVectors | MemoriesRemoved]:
            by_scope: dict[Scope, list[tuple[Memory, Vector]]] = {}
            for memory, vector in plan.indexed():
                if memory.memory_id not in gone:
                    by_scope.setdefault(memory.scope, []).append((memory, vector))
            found: list[MemoryVectors | MemoriesRemoved] = [
                MemoryVectors(scope, [m.memory_id for m, _ in rows], [v for _, v in rows])
                for scope, rows in by_scope.items()
            ]
            deleted = [(s, i) for s, i in removed if i not in gone]
            return [*found, MemoriesRemoved(deleted)] if deleted else found

        write = dataclasses.replace(plan.write(tenant_id), watch=watch)
        if removed:
            write = dataclasses.replace(
                write, delete=[*write.delete, *((s.tenant_id, i) for s, i in removed)]
            )
        committed = await self.changes.commit(lambda declared: self.store.write(write, declared), changes)
        return committed.result

    async def restore(
        self, tenant_id: str, memories: Sequence[Memory], watch: ErasureWatch
    ) -> tuple[int, int]:
        """Imported memories (ImportUser), stored as they were exported, superseded ones and
        provenance included, and embedded here (vectors are never read from a file). Ids
        already held are left as they are, so importing twice changes nothing. Returns
        (imported, unchanged). ABORTED (USER_ERASED) if the user was erased since `watch`
        (the import's start): checked in the write's transaction."""
        held = await self.store.get_many(tenant_id, [m.memory_id for m in memories])
        fresh = [m for m in memories if m.memory_id not in held]
        if fresh:
            self.quota.write_memories(tenant_id, len(fresh))
            vectors = await self._embed(tenant_id, [m.text for m in fresh])
            await self._commit(_Plan(insert=list(zip(fresh, vectors, strict=True))), tenant_id, watch=watch)
        return len(fresh), len(memories) - len(fresh)

    # --- promotion at close ------------------------------------------------------------

    async def promote_closed(self, digest: Digest, transcript: Sequence[Message]) -> int:
        """The episode's PENDING memories and those extracted from its messages, into
        long-term storage; returns how many memories were stored or merged. Idempotent:
        extracted ids derive from the episode and the text, and promoted memories are no
        longer pending, so a retry after a crash writes nothing twice."""
        agent = await self.agents.get_agent(digest.tenant_id, digest.agent_id)
        extracted: list[ExtractedMemory] = []
        if agent.memory.extract_memories:
            extracted = await self.extraction.extract(transcript, agent.memory.memory_extraction_prompt)
        scope = digest.scope
        async with self.locks.hold((scope.tenant_id, scope.agent_id, scope.user_id)):
            held = await self.store.pending(digest.tenant_id, digest.episode_id)
            new = await self._extracted_rows(digest, extracted)
            promoted = [
                (dataclasses.replace(m, state=MemoryState.PROMOTED, episode_id=""), v) for m, v in held
            ]
            missing = [m.text for m, v in promoted if v is None]
            filled = iter(await self._embed(scope.tenant_id, missing))
            rows = [(m, v if v is not None else next(filled)) for m, v in promoted] + new
            plan = await self._plan_promoted(scope, rows, held=len(promoted))
            held_ids = {m.memory_id for m, _ in held}
            _promote_in_place(plan, held_ids)
            plan.episode = digest.episode_id  # erased meanwhile: nothing is written
            await self._commit(plan, digest.tenant_id)
        return len(plan.results)

    async def _extracted_rows(
        self, digest: Digest, found: Sequence[ExtractedMemory]
    ) -> list[tuple[Memory, Vector]]:
        holder = Holder(digest.tenant_id, digest.agent_id, digest.user_id, digest.episode_id, Placement.EAGER)
        drafts = [(extracted_id(digest.episode_id, e.text), _draft_of(e)) for e in found]
        stored = await self.store.get_many(digest.tenant_id, [i for i, _ in drafts]) if drafts else {}
        now = self.clock()
        memories = [
            new_memory(d, memory_id, holder, MemoryOrigin.EXTRACTED, now)
            for memory_id, d in drafts
            if memory_id not in stored
        ]
        vectors = await self._embed(digest.tenant_id, [m.text for m in memories])
        return list(zip(memories, vectors, strict=True))

    # --- extraction while the episode is live -------------------------------------------

    async def extract_live(self, episode: Episode, messages: Sequence[Message]) -> int:
        """Memories extracted from turns of an open episode that a summary has just folded in,
        held as its PENDING memories (its working memory, rendered first in "[Known Facts]")
        until it closes; returns how many were stored or merged. With the agent's extraction
        settings, as promote_closed. Ids are the ones promote_closed gives the same statements
        (`extracted_id`), so a span extracted twice, or again at close, writes each memory
        once. At most MAX_PENDING_PER_EPISODE are held: what finds no room waits for the
        close. A closed episode gets nothing (promote_closed extracts its whole transcript);
        an erased one neither (NotFound: the write applies only while the episode exists)."""
        agent = await self.agents.get_agent(episode.tenant_id, episode.agent_id)
        if not agent.memory.extract_memories or not messages:
            return 0
        found = await self.extraction.extract(messages, agent.memory.memory_extraction_prompt)
        if not found:
            return 0
        holder = Holder(
            episode.tenant_id, episode.agent_id, episode.user_id, episode.episode_id, Placement.LAZY
        )
        drafts = await self._redacted(holder, [_draft_of(e) for e in found])
        async with self.locks.hold((holder.tenant_id, holder.agent_id, holder.user_id)):
            current = await self.episodes.get_episode(holder.tenant_id, holder.episode_id)
            if current.state is not EpisodeState.OPEN:  # closed meanwhile: promotion extracts it all
                return 0
            by_id = {extracted_id(holder.episode_id, d.text): d for d in drafts}
            stored = await self.store.get_many(holder.tenant_id, list(by_id))
            held = await self.store.pending(holder.tenant_id, holder.episode_id)
            room = max(MAX_PENDING_PER_EPISODE - len(held), 0)
            now = self.clock()
            memories = [
                new_memory(d, memory_id, holder, MemoryOrigin.EXTRACTED, now)
                for memory_id, d in by_id.items()
                if memory_id not in stored
            ][:room]
            if not memories:
                return 0
            vectors = await self._embed(holder.tenant_id, [m.text for m in memories])
            plan = await self._plan_pending(holder, list(zip(memories, vectors, strict=True)))
            plan.episode = holder.episode_id  # erased meanwhile: nothing is written
            await self._commit(plan, holder.tenant_id)
        return len(plan.results)

    # --- read, list, update, delete ------------------------------------------------------

    async def get(self, caller: Caller, memory_id: str) -> Memory:
        v = Violations()
        check_id(v, "memory_id", memory_id)
        v.raise_if_any()
        found = await self.store.get(caller.tenant_id, memory_id)
        if found is None or _expired(found, self.clock()):
            raise NotFound("memory", memory_id)
        require_visible(caller, found.agent_id, "memory", memory_id)
        return found

    async def list_memories(
        self, caller: Caller, scope_ids: tuple[str, str], where: MemoryFilter, page_size: int, page_token: str
    ) -> Page[Memory]:
        agent_id, user_id = scope_ids
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_id(v, "user_id", user_id)
        check_id(v, "episode_id", where.episode_id, required=False)
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        require_agent(caller, agent_id)
        await self.agents.get_agent(caller.tenant_id, agent_id)  # NOT_FOUND, as SearchMemories
        query: dict[str, JsonScalar] = {
            "agent_id": agent_id, "user_id": user_id, "episode_id": where.episode_id,
            "state": where.state.value if where.state else "", "superseded": where.include_superseded,
            "topics": "\n".join(sorted(where.topics)),
        }  # fmt: skip
        position = decode_token(page_token, query)
        after = (read_time(position, "created_at"), read_id(position, "memory_id")) if position else None
        scope = Scope(caller.tenant_id, agent_id, user_id)
        found = await self.store.page(scope, where, self.clock(), after, limit + 1)
        return page_of(found, limit, _position, query)

    async def update(self, caller: Caller, draft: MemoryDraft, mask: Sequence[str]) -> Memory:
        current = await self.get(caller, draft.memory_id)
        redacts = await self.pii.redacts_for(caller.tenant_id, current.agent_id)
        if redacts:
            draft = dataclasses.replace(draft, text=redact_text(draft.text))
        async with self.locks.hold((current.tenant_id, current.agent_id, current.user_id)):
            current = await self.get(caller, draft.memory_id)
            updated = apply_mask(current, draft, mask, self.clock())
            vector: Vector | None = None
            if updated.text != current.text:
                self.quota.write_memories(caller.tenant_id, 1)
                (vector,) = await self._embed(caller.tenant_id, [updated.text])
            plan = _Plan(replace={updated.memory_id: (updated, vector)})
            if await self._commit(plan, caller.tenant_id):  # erased while it was being embedded
                raise NotFound("memory", draft.memory_id)
        return updated

    async def delete(self, caller: Caller, memory_id: str) -> Memory:
        found = await self.get(caller, memory_id)
        await self._commit(_Plan(), caller.tenant_id, removed=[(found.scope, found.memory_id)])
        return found

    async def remove_expired(self, limit: int = 500) -> int:
        """Deletes memories past their expiry or their agent's retention; returns how many."""
        gone = await self.store.expired(self.clock(), limit)
        for tenant_id in {m.tenant_id for m in gone}:
            removed = [(m.scope, m.memory_id) for m in gone if m.tenant_id == tenant_id]
            await self._commit(_Plan(), tenant_id, removed=removed)
        return len(gone)


def _draft_of(e: ExtractedMemory) -> MemoryDraft:
    return MemoryDraft(
        text=e.text, kind=e.kind, topics=e.topics, entities=e.entities,
        event_time=e.event_time, from_seq=e.from_seq, to_seq=e.to_seq,
    )  # fmt: skip


def _similar_to_held(new: list[tuple[Memory, Vector]], held: int) -> dict[str, dict[str, float]]:
    """Off the event loop: per memory after the first `held`, its cosine to each of those."""
    working = {m.memory_id: v for m, v in new[:held]}
    return {m.memory_id: {h.episode_id: h.score for h in cosine_hits(v, working)} for m, v in new[held:]}


def _as_given(new: list[tuple[Memory, Vector]]) -> _Plan:
    """keep_separate: each memory is inserted under its id, whatever the scope holds."""
    plan = _Plan(insert=list(new))
    plan.results.extend(Created(memory, Outcome.CREATED) for memory, _ in new)
    return plan


def _promote_in_place(plan: _Plan, held_ids: set[str]) -> None:
    """Pending memories are rows already: their promotion is a replace, not an insert; one
    that merged into a stored memory goes."""
    kept = []
    for memory, vector in plan.insert:
        if memory.memory_id not in held_ids:
            kept.append((memory, vector))
            continue
        merged = plan.replace.get(memory.memory_id, (memory, vector))[0]  # a later repeat merged into it
        plan.replace[memory.memory_id] = (merged, vector)
    plan.insert = kept
    plan.delete = [i for i in held_ids if i not in plan.replace]


async def _let_others_run() -> None:
    """A batch's memories are compared one by one with the ones before them: between two,
    the event loop serves other calls, so a big batch never holds it for long."""
    await asyncio.sleep(0)


def _scope(holder: Holder) -> Scope:
    return Scope(holder.tenant_id, holder.agent_id, holder.user_id)


def _expired(memory: Memory, now: datetime) -> bool:
    return memory.expires_at is not None and memory.expires_at <= now


def _position(last: Memory) -> dict[str, JsonScalar]:
    return {"created_at": last.created_at.isoformat(), "memory_id": last.memory_id}
