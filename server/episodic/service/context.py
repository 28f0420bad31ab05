"""BuildContext and the model-call audit: what the model sees this turn, and what it saw.

One call: (optionally) append the user message -> bring the working set up to date ->
recall past episodes -> assemble under the budget (reducers; compaction when the tail
does not fit) -> store the model call (with any new summary) in one transaction. What is
streamed is the call stored, so stored == streamed by construction.

The turn waits for no fsync it need not: the append returns once its statements ran and
commits while the searches run; the call's record is written while the call streams
(`start`). The report goes once the user message is durable, saying whether the record
still commits (`record_pending`); the stream ends once it is. A call with a request_id is
stored before anything streams: the record decides which call the id names.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

from episodic.domain.access import require_visible
from episodic.domain.agents import MemoryDraft, check_memory, fill_memory
from episodic.domain.assembly import Assembly, AssemblyInput, Budget, Shares, assemble, mandatory_sections
from episodic.domain.context import Compaction, ContextReport, ModelCall, Summary
from episodic.domain.knowledge import KnowledgeItem, check_items
from episodic.domain.knowledge_block import Trim
from episodic.domain.log import PreparedMessage, countable_text
from episodic.domain.memories import Memory
from episodic.domain.model import (
    Caller,
    EpisodeState,
    MemoryConfig,
    Message,
    NewMessage,
    PiiPolicy,
    Role,
)
from episodic.domain.ports.episodes import ContextStore
from episodic.domain.ports.models import TokenCounter
from episodic.domain.recall import Snippet
from episodic.domain.reducers import REPLY_PRIMING, least_tokens
from episodic.domain.validation import Limits, Violations, check_id, check_text
from episodic.domain.working_set import WorkingSet
from episodic.errors import CONFIGURATION, FailedPrecondition
from episodic.service.compaction import TailCompaction
from episodic.service.model_calls import ModelCallRecorder
from episodic.service.privacy import redact_text
from episodic.service.turn_searches import Found, TurnQuery, TurnSearches
from episodic.state.token_cache import CachedCounts
from episodic.state.working_set import Key, WorkingSetCache
from episodic.telemetry.tracing import (
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_USAGE_INPUT_TOKENS,
    Tracing,
    no_tracing,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ContextRequest:
    episode_id: str
    user_message: str = ""
    append_user_message: bool = False
    client_message_id: str = ""
    system_prompt: str | None = None
    memory: MemoryDraft = dataclasses.field(default_factory=MemoryDraft)
    model: str = ""
    recall_query: str = ""
    request_id: str = ""
    knowledge: tuple[KnowledgeItem, ...] = ()  # the caller's, rendered in "[Knowledge]"


@dataclass(frozen=True, slots=True)
class Turn:
    """Everything one assembly needs, gathered under the conversation's lock."""

    working_set: WorkingSet
    config: MemoryConfig
    model: str
    user_seq: int
    request: ContextRequest
    found: Found  # what the turn's searches found beside the working set
    appended: asyncio.Future[None] | None  # the user message's commit (None: nothing appended)


@dataclass(frozen=True, slots=True)
class StartedCall:
    """A turn's model call, rendered, and its record: `stored` completes with the stored call
    (and whether it is new) once it and the turn's user message are durable; `appended`, once
    the user message is (None: nothing to wait for). `call`'s messages may be sent at once,
    its report once `appended` is done (the report acknowledges the message)."""

    call: ModelCall
    stored: asyncio.Future[tuple[ModelCall, bool]]
    appended: asyncio.Future[None] | None = None


class TurnAppends(Protocol):
    """The turn's user message into the log (service/episodes.py)."""

    async def append_turn(
        self, tenant_id: str, episode_id: str, message: PreparedMessage, with_pending: bool
    ) -> tuple[Message, list[Memory], asyncio.Future[None]]:
        """Appends a message already checked, authorized, redacted and counted; returns it
        with the episode's PENDING memories read in the append's transaction, and its
        commit, still running."""
        ...


class RedactionPolicy(Protocol):
    """Whether a tenant's agent redacts personal data (service/privacy.py)."""

    def redacts(self, tenant_id: str, agent_policy: PiiPolicy) -> bool: ...


@dataclass(slots=True, kw_only=True)
class ContextService:
    store: ContextStore  # the working set's reads, and a request_id's stored call
    turns: TurnAppends
    tokens: TokenCounter
    limits: Limits
    cache: WorkingSetCache
    pii: RedactionPolicy
    searches: TurnSearches  # what each turn looks up beside its working set: the one fan-out
    compaction: TailCompaction
    calls: ModelCallRecorder
    tracing: Tracing = dataclasses.field(default_factory=no_tracing)
    counts: CachedCounts = dataclasses.field(init=False)
    _storing: set[asyncio.Future[tuple[ModelCall, bool]]] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.counts = CachedCounts(self.tokens)
        self._storing = set()

    async def build(self, caller: Caller, request: ContextRequest) -> tuple[ModelCall, bool]:
        """Returns the stored model call and whether it is new (False: a request_id replay)."""
        started = await self.start(caller, request)
        return await asyncio.shield(started.stored)

    async def start(self, caller: Caller, request: ContextRequest) -> StartedCall:
        """The turn up to its rendered call; its record is being stored (see StartedCall).
        The conversation stays locked until the record is stored: the next turn sees it."""
        _check(request, self.limits)
        if request.request_id:
            stored = await self.store.call_for_request(
                caller.tenant_id, request.episode_id, request.request_id
            )
            if stored is not None:
                require_visible(caller, stored.agent_id, "episode", request.episode_id)
                return StartedCall(stored, _settled((stored, False)))
        key = (caller.tenant_id, request.episode_id)
        lock = AsyncExitStack()
        await lock.enter_async_context(self.cache.hold(key))
        try:
            turn = await self._gather(caller, key, request)
        except BaseException:
            await lock.aclose()
            raise
        try:
            call, summary = await self._assemble(caller, key, turn.request, turn)
        except BaseException:
            _abandoned(turn.appended)
            await lock.aclose()
            raise
        storing = asyncio.ensure_future(self._store(key, turn, call, summary, lock))
        self._storing.add(storing)  # held until done: a client gone mid-stream does not stop it
        storing.add_done_callback(self._stored)
        self.calls.storing(call, storing)
        if request.request_id:  # the record decides which call the id names: stored first
            named, _ = await asyncio.shield(storing)
            return StartedCall(named, storing)
        return StartedCall(call, storing, turn.appended)

    def _stored(self, storing: asyncio.Future[tuple[ModelCall, bool]]) -> None:
        self._storing.discard(storing)
        if not storing.cancelled():
            storing.exception()  # retrieved: a call whose client left logs nothing here

    async def _append_user_message(
        self, key: Key, working_set: WorkingSet, r: ContextRequest, allowance: int, config: MemoryConfig
    ) -> tuple[WorkingSet, int, list[Memory] | None, asyncio.Future[None] | None]:
        """Appends the (checked, authorized, redacted) user message and takes it into the
        working set held under the lock; the log is read again only when another writer
        appended in between. The append's transaction also reads the episode's PENDING
        memories when known facts want them (None: not appended, not read)."""
        if not r.append_user_message:
            return working_set, 0, None, None
        encoding = working_set.episode.token_encoding
        message = NewMessage(Role.USER, r.user_message, client_message_id=r.client_message_id or None)
        prepared = PreparedMessage(message, self.counts.count(countable_text(message), encoding), encoding)
        stored, pending, appended = await self.turns.append_turn(key[0], key[1], prepared, config.known_facts)
        # the message is in the held set before its commit: a failed commit drops the set
        appended.add_done_callback(partial(self._uncommitted, key))
        if working_set.appended(stored):
            self.cache.put(key, working_set)
        else:
            try:
                working_set = await self._working_set(key, allowance)
            except BaseException:
                _abandoned(appended)
                raise
        return working_set, stored.seq, pending, appended

    async def warm(self, key: Key) -> bool:
        """Reads the conversation's working set (one read) and starts loading its user's
        indexes, unless it is held already (a turn came first): False then."""
        async with self.cache.hold(key):
            if self.cache.get(key) is not None:
                return False
            working_set = await self._working_set(key, 0)
        self.searches.preload(working_set)
        return True

    def _uncommitted(self, key: Key, appended: asyncio.Future[None]) -> None:
        if appended.cancelled() or appended.exception() is not None:
            self.cache.discard(key)

    async def _gather(self, caller: Caller, key: Key, r: ContextRequest) -> Turn:
        """Everything is checked before the user message is appended: a refused call
        writes nothing. Each step runs once: at most one read of what is new (none when
        the held set is current and the turn appends: the append finds what it missed),
        the PII policy and the agent's memory configuration applied once, the append taken
        into the held set."""
        with self.tracing.span("load_working_set", {GEN_AI_CONVERSATION_ID: r.episode_id}) as span:
            allowance = r.memory.max_working_memory_tokens or 0
            working_set = self._current(key, allowance) if r.append_user_message else None
            if working_set is None:
                working_set = await self._working_set(key, allowance)
            require_visible(caller, working_set.episode.agent_id, "episode", r.episode_id)
            r = self._without_pii(caller, working_set, r)
            config = _effective_memory(working_set, r.memory).within(self.limits.max_context_tokens)
            model = self._model(working_set, r.model)
            self._check_ceiling(r, working_set, config)
            query = TurnQuery.of(r.recall_query, r.user_message)
            self.searches.prefetch(working_set, config, query)
            working_set, user_seq, pending, appended = await self._append_user_message(
                key, working_set, r, allowance, config
            )
            span.set_attribute("episodic.working_set.messages", len(working_set.tail))
        try:
            found = await self.searches.run(caller, working_set, config, query, pending)
        except BaseException:
            _abandoned(appended)
            raise
        return Turn(working_set, config, model, user_seq, r, found, appended)

    def _current(self, key: Key, allowance: int) -> WorkingSet | None:
        held = self.cache.current(key)
        return None if held is None or _holds_too_little(held, allowance) else held

    def _without_pii(self, caller: Caller, working_set: WorkingSet, r: ContextRequest) -> ContextRequest:
        """Under a redact policy the user message is rendered, appended and embedded (as
        the recall query) with placeholders only."""
        if not self.pii.redacts(caller.tenant_id, working_set.agent.memory.pii_policy):
            return r
        return dataclasses.replace(
            r, user_message=redact_text(r.user_message), recall_query=redact_text(r.recall_query)
        )

    def _check_ceiling(self, r: ContextRequest, working_set: WorkingSet, config: MemoryConfig) -> None:
        probe = _inputs(r, working_set, config)
        mandatory_sections(probe, partial(self.counts.count, encoding=working_set.episode.token_encoding))

    async def _working_set(self, key: Key, allowance: int) -> WorkingSet:
        """Brings the cached working set up to date with one read of what is new (other
        replicas and plain AddMessage calls write the log too); builds it on a miss. Reads
        hold at most about `allowance` tokens (or the agent's budget) of new messages."""
        cached = self.cache.get(key)
        if cached is not None and _holds_too_little(cached, allowance):
            cached = None  # a larger budget than the tail was read for: read it again
        known_summary, after = (cached.summary_to, cached.last_seq) if cached else (0, None)
        found = await self.store.sources(*key, known_summary, after, allowance)
        if cached is None:
            cached = WorkingSet.of(found)
        else:
            cached.absorb(found)
        self.cache.put(key, cached)
        return cached

    def _model(self, working_set: WorkingSet, requested: str) -> str:
        """A model tiktoken knows must count with the episode's encoding (stored counts use
        it); unknown model names are taken as labels."""
        model = requested or working_set.agent.model
        encoding = self.tokens.known_model_encoding(model) if requested else None
        episode_encoding = working_set.episode.token_encoding
        if encoding is not None and encoding != episode_encoding:
            raise FailedPrecondition(
                f"model {model!r} counts tokens with {encoding}, but this episode's stored counts use "
                f"{episode_encoding}; build the context for a model of the same encoding",
                reason="ENCODING_MISMATCH",
            )
        return model

    async def _assemble(
        self, caller: Caller, key: Key, r: ContextRequest, turn: Turn
    ) -> tuple[ModelCall, Summary | None]:
        encoding = turn.working_set.episode.token_encoding
        count = partial(self.counts.count, encoding=encoding)
        with self.tracing.span("reduce", {GEN_AI_CONVERSATION_ID: r.episode_id}):
            found = turn.found
            inputs = _inputs(r, turn.working_set, turn.config, found.snippets, turn.user_seq)
            knowledge = (*r.knowledge, *found.knowledge)
            # the earlier section's lines and text do not recur: not for the cache of recurring texts
            once = partial(self.tokens.count, encoding=encoding)
            earlier = found.earlier and dataclasses.replace(found.earlier, count_once=once)
            inputs = dataclasses.replace(
                inputs, facts=found.facts, session=found.session, knowledge=knowledge, earlier=earlier
            )
            assembly = assemble(inputs, count, self._trim(turn))
        assembly, summary, compaction = await self._compact(key, turn, inputs, assembly, count)
        return self._model_call(caller, r, turn, assembly, compaction), summary

    async def _store(
        self, key: Key, turn: Turn, call: ModelCall, summary: Summary | None, lock: AsyncExitStack
    ) -> tuple[ModelCall, bool]:
        """The call's record, after its user message is durable (never a record of a message
        the log does not hold); then the conversation's lock is released."""
        async with lock:
            if turn.appended is not None:
                await turn.appended
            with self.tracing.span("persist", {GEN_AI_CONVERSATION_ID: call.episode_id}):
                stored, fresh = await self.calls.save(call, summary)
            if summary is not None:
                listener = self.compaction.listener
                if listener is not None:
                    listener.compacted(turn.working_set.episode, _newly_covered(turn.working_set, summary))
                turn.working_set.compacted(summary)
                self.cache.put(key, turn.working_set)
            return stored, fresh

    async def _compact(
        self,
        key: Key,
        turn: Turn,
        inputs: AssemblyInput,
        assembly: Assembly,
        count: Callable[[str], int],
    ) -> tuple[Assembly, Summary | None, Compaction]:
        if turn.working_set.episode.state is not EpisodeState.OPEN:
            return assembly, None, Compaction.SKIPPED_CLOSED
        through = assembly.compact_through
        if not through:
            return assembly, None, Compaction.NONE
        background = self.compaction.background
        if background is not None:
            background.schedule(key, turn.working_set, through)
            return assembly, None, Compaction.SCHEDULED
        with self.tracing.span("summarize", {GEN_AI_CONVERSATION_ID: key[1]}) as span:
            summary = await self.compaction.inline.summary(key, turn.working_set, through)
            span.set_attribute("episodic.summary.to_seq", through)
        rest = [m for m in inputs.tail if m.seq > through]
        again = dataclasses.replace(inputs, summary=summary, tail=rest, can_compact=False)
        return assemble(again, count, self._trim(turn)), summary, Compaction.SUMMARIZED

    def _trim(self, turn: Turn) -> Trim:
        return partial(self.tokens.prefix, encoding=turn.working_set.episode.token_encoding)

    def _model_call(
        self, caller: Caller, r: ContextRequest, turn: Turn, assembly: Assembly, compaction: Compaction
    ) -> ModelCall:
        episode = turn.working_set.episode
        call_id, created_at = self.calls.name()
        with self.tracing.span("render", {GEN_AI_CONVERSATION_ID: episode.episode_id}) as span:
            report = _report(turn, assembly, compaction, call_id, self.tracing.trace_id())
            span.set_attribute(GEN_AI_REQUEST_MODEL, report.model)
            span.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, report.total_tokens)
            span.set_attribute("episodic.model_call.id", call_id)
            if self.tracing.capture_content:  # opt-in only: the rendered text is personal data
                span.set_attribute(GEN_AI_INPUT_MESSAGES, _input_messages(assembly))
        return ModelCall(
            caller.tenant_id, call_id, episode.episode_id, episode.agent_id, episode.user_id,
            created_at, assembly.messages, report, r.request_id,
        )  # fmt: skip


def _settled(value: T) -> asyncio.Future[T]:
    done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    done.set_result(value)
    return done


def _abandoned(appended: asyncio.Future[None] | None) -> None:
    """A turn that failed after its append: the commit goes on (the message was accepted);
    its outcome is retrieved here, so an outage is not logged again as unretrieved."""
    if appended is not None:
        appended.add_done_callback(lambda done: None if done.cancelled() else done.exception())


def _check(r: ContextRequest, limits: Limits) -> None:
    v = Violations()
    check_id(v, "episode_id", r.episode_id)
    check_text(v, "user_message", r.user_message, limits.max_content_bytes)
    check_text(v, "recall_query", r.recall_query, limits.max_content_bytes)
    check_text(v, "model", r.model, 256)
    check_id(v, "client_message_id", r.client_message_id, required=False)
    check_id(v, "request_id", r.request_id, required=False)
    if r.system_prompt is not None:
        check_text(v, "system_prompt", r.system_prompt, limits.max_content_bytes)
    if r.append_user_message and not r.user_message.strip():
        v.add("user_message", "is required when append_user_message is set")
    if r.client_message_id and not r.append_user_message:
        v.add("client_message_id", "applies only with append_user_message")
    check_items(v, r.knowledge)
    v.raise_if_any()


def _effective_memory(working_set: WorkingSet, draft: MemoryDraft) -> MemoryConfig:
    config = fill_memory(working_set.agent.memory, draft)
    v = Violations()
    check_memory(v, "memory_config", config)
    v.raise_if_any(CONFIGURATION)
    return config


def _inputs(
    r: ContextRequest,
    ws: WorkingSet,
    config: MemoryConfig,
    snippets: Sequence[Snippet] = (),
    user_seq: int = 0,
) -> AssemblyInput:
    """The user message appended by this call (`user_seq`) is rendered last, not in history;
    retracted messages are in no context."""
    tail = ws.tail.without(user_seq)
    return AssemblyInput(
        system_prompt=r.system_prompt if r.system_prompt is not None else ws.agent.system_prompt,
        user_message=r.user_message,
        snippets=snippets,
        summary=ws.shown_summary,
        tail=tail,
        keep_tool_results=config.tool_results_kept_verbatim,
        budget=Budget(config.max_working_memory_tokens, config.ceiling_tokens),
        can_compact=True,
        system_prompt_overridden=r.system_prompt is not None,
        held_after=ws.held_after,
        knowledge=r.knowledge,
        shares=Shares(
            config.knowledge_budget_percent,
            config.known_facts_budget_percent,
            config.recall_budget_percent,
            config.earlier_budget_percent,
        ),
    )


def _holds_too_little(ws: WorkingSet, allowance: int) -> bool:
    """A tail with unheld messages before it shows as many turns as a whole one only up
    to the allowance it was read for."""
    return ws.unheld > 0 and sum(least_tokens(m) for m in ws.tail) <= allowance


def _report(
    turn: Turn, assembly: Assembly, compaction: Compaction, call_id: str, trace_id: str
) -> ContextReport:
    return ContextReport(
        section_tokens=assembly.section_tokens,
        reply_priming=REPLY_PRIMING,
        budget=turn.config.max_working_memory_tokens,
        ceiling=turn.config.ceiling_tokens,
        over_budget=assembly.over_budget,
        pruned=assembly.pruned,
        stubbed=assembly.stubbed,
        summarized=_covered(assembly),
        summary_span=assembly.summary_span,
        history_span=assembly.history_span,
        compaction=compaction,
        recalled=assembly.recalled,
        memories=assembly.memories,
        session_keys=assembly.session_keys,
        knowledge=assembly.knowledge,
        earlier=assembly.earlier,
        pending_digests=turn.found.pending_digests,
        model=turn.model,
        token_encoding=turn.working_set.episode.token_encoding,
        model_call_id=call_id,
        trace_id=trace_id,
        user_message_seq=turn.user_seq,
    )


def _input_messages(assembly: Assembly) -> str:
    """The rendered messages in the GenAI input-messages shape, as one JSON string."""
    parts = [
        {"role": m.role.value, "parts": [{"type": "text", "content": m.content}]} for m in assembly.messages
    ]
    return json.dumps(parts, ensure_ascii=False)


def _newly_covered(ws: WorkingSet, summary: Summary) -> list[Message]:
    """The tail messages a new summary folds in, before the working set drops them."""
    return [m for m in ws.tail if m.seq <= summary.to_seq and m.retracted_at is None]


def _covered(assembly: Assembly) -> int:
    span = assembly.summary_span
    return span.to_seq - span.from_seq + 1 if span.to_seq else 0
