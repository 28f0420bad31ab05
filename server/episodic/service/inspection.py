"""The inspector's use cases: read-only views of a tenant's agents, users, episodes, logs
and stored model calls, and the two questions only the stored calls can answer: where did
a phrase go, and what changed from one call to the next. Every read goes through the same
services (and so the same visibility rules) as the gRPC API; the work of one request is
bounded however long the episode and however large its messages."""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from episodic.domain.access import require_agent
from episodic.domain.context import ModelCall
from episodic.domain.inspection import (
    MAX_PHRASE_CHARS,
    CallDiff,
    CallFates,
    FateRun,
    PhraseTrace,
    UserSummary,
    as_match,
    call_fates,
    call_size,
    diff_calls,
    fates,
    searchable,
    trace_of,
    utf8_size,
)
from episodic.domain.knowledge import Document, DocumentChunk
from episodic.domain.model import Agent, Caller, Episode, Message, Page
from episodic.domain.paging import decode_token, page_of, read_id
from episodic.domain.ports.episodes import ContextStore, EpisodeFilter, EpisodeStore, UserDirectory
from episodic.domain.shares import OverShare, Share, TokenBucket
from episodic.domain.validation import Violations, check_id
from episodic.domain.why_recalled import Candidacy, RecallExplanation, candidacy, explain_recall
from episodic.errors import AtCapacity, InvalidArgument
from episodic.service.agents import AgentService
from episodic.service.episodes import EpisodeService
from episodic.service.knowledge import KnowledgeService
from episodic.service.model_calls import ModelCallService

PAGE_SIZE = 50
MAX_SCANNED_MESSAGES = 10_000  # a phrase is looked for in the newest this many messages
MAX_MATCHES = 50  # the earliest matching messages are traced
MAX_TRACED_CALLS = 300  # through the newest this many model calls
# A search reads at most SEARCH_BYTES of text (message text, then what the calls rendered;
# the log gets half at most), so its cost does not grow with the size of messages: past
# it, the result is cut short (truncated). It reads in pages of about PAGE_BYTES, sized by
# the heaviest row seen so far, and holds one page at a time.
SEARCH_BYTES = 64 * 1024 * 1024
PAGE_BYTES = 1024 * 1024  # also what one page scans without yielding the event loop
FIRST_PAGE = 8  # rows, before any says how heavy they are
MAX_MESSAGES_PAGE = 500
MAX_CALLS_PAGE = 50
# "Where did it go?" reads up to thousands of rows: a tenant runs at most
# MAX_SEARCHES_PER_TENANT at once (more answer RESOURCE_EXHAUSTED, BUSY), so one tenant
# never holds the database from the others. MAX_SEARCHES is only a memory safety net, far
# more than two tenants can fill: at worst MAX_SEARCHES × SEARCH_BYTES = 1 GiB of text
# read at once across the server (held at once: about a page per search).
# Seconds of searching each tenant may spend per second of time, on average (a burst of
# SEARCH_SECONDS_BURST first): what one tenant's searches can take from everyone's loop.
SEARCH_SECONDS_PER_SECOND = 0.1
SEARCH_SECONDS_BURST = 2.0
MAX_SEARCHES_PER_TENANT = 2
MAX_SEARCHES = 16


@dataclass(frozen=True, slots=True)
class Traced:
    trace: PhraseTrace
    truncated: bool  # the log or the calls were longer than one request reads


@dataclass(frozen=True, slots=True)
class InspectedCall:
    call: ModelCall
    fates: list[FateRun]  # every log seq up to the call, as runs of one fate
    why_recalled: RecallExplanation | None = None  # why each recalled episode ranked


@dataclass(frozen=True, slots=True)
class Diffed:
    call: ModelCall
    previous: ModelCall | None
    diff: CallDiff


@dataclass
class InspectionService:
    agents: AgentService
    episodes: EpisodeService
    model_calls: ModelCallService
    knowledge: KnowledgeService
    users: UserDirectory
    log: EpisodeStore
    calls: ContextStore
    search_bytes: int = SEARCH_BYTES
    timer: Callable[[], float] = time.monotonic
    _searching: Counter[str] = field(default_factory=Counter, init=False)
    _search_time: dict[str, TokenBucket] = field(default_factory=dict, init=False)

    async def get_document(
        self, caller: Caller, agent_id: str, document_id: str
    ) -> tuple[Document, list[DocumentChunk]]:
        """A document a rendered chunk came from, with its chunks (the page links to it)."""
        return await self.knowledge.get(caller, agent_id, document_id, with_chunks=True)

    async def list_agents(self, caller: Caller, page_token: str) -> Page[Agent]:
        return await self.agents.list_agents(caller, PAGE_SIZE, page_token)

    async def list_users(self, caller: Caller, agent_id: str, page_token: str) -> Page[UserSummary]:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        v.raise_if_any()
        require_agent(caller, agent_id)
        query = {"agent_id": agent_id, "listing": "users"}
        position = decode_token(page_token, query)
        after = read_id(position, "user_id") if position else None
        found = await self.users.list_users(caller.tenant_id, agent_id, after, PAGE_SIZE + 1)
        return page_of(found, PAGE_SIZE, lambda u: {"user_id": u.user_id}, query)

    async def list_episodes(
        self, caller: Caller, agent_id: str, user_id: str, page_token: str
    ) -> Page[Episode]:
        v = Violations()
        check_id(v, "agent_id", agent_id)
        check_id(v, "user_id", user_id)
        v.raise_if_any()
        require_agent(caller, agent_id)
        where = EpisodeFilter(agent_id=agent_id, user_id=user_id)
        return await self.episodes.list_episodes(caller, where, PAGE_SIZE, page_token)

    async def get_episode(self, caller: Caller, episode_id: str) -> Episode:
        return await self.episodes.get_episode(caller, episode_id)

    async def list_messages(self, caller: Caller, episode_id: str, page_token: str) -> Page[Message]:
        """Newest first: the scrollback, paged backwards."""
        return await self.episodes.list_messages(caller, episode_id, PAGE_SIZE, page_token)

    async def list_model_calls(self, caller: Caller, episode_id: str, page_token: str) -> Page[ModelCall]:
        """Newest first."""
        return await self.model_calls.list_model_calls(caller, episode_id, PAGE_SIZE, page_token)

    async def get_model_call(self, caller: Caller, model_call_id: str) -> InspectedCall:
        call = await self.model_calls.get_model_call(caller, model_call_id)
        return InspectedCall(call, fates(call), explain_recall(call))

    async def candidacy(self, caller: Caller, model_call_id: str, about: str) -> tuple[ModelCall, Candidacy]:
        """Why not recalled: whether an episode id or a phrase was among what the call's
        recall found (and rendered)."""
        v = Violations()
        if not 1 <= len(about.strip()) <= MAX_PHRASE_CHARS:
            v.add("about", f"must be 1 to {MAX_PHRASE_CHARS} characters: an episode id or a phrase")
        v.raise_if_any()
        call = await self.model_calls.get_model_call(caller, model_call_id)
        return call, candidacy(call, about)

    async def diff(self, caller: Caller, model_call_id: str) -> Diffed:
        """The call against the one before it in its episode (None for the first)."""
        call = await self.model_calls.get_model_call(caller, model_call_id)
        before = (call.created_at, call.model_call_id)
        older = await self.calls.list_calls(caller.tenant_id, call.episode_id, before, 1)
        previous = older[0] if older else None
        return Diffed(call, previous, diff_calls(previous, call))

    async def where(self, caller: Caller, episode_id: str, phrase: str) -> Traced:
        folded = _checked_phrase(phrase).casefold()
        await self.episodes.ensure_visible(caller, episode_id)
        tenant_id = caller.tenant_id
        with self._search_slot(tenant_id), self._timed(tenant_id):
            log_text = _Reading(self.search_bytes // 2)
            matches, all_read = await self._matches(tenant_id, episode_id, folded, log_text)
            seqs = [m.seq for m in matches]
            call_text = _Reading(self.search_bytes - self.search_bytes // 2 + log_text.left)
            rows, all_calls = await self._call_fates(tenant_id, episode_id, seqs, folded, call_text)
        return Traced(trace_of(matches, rows), not (all_read and all_calls))

    @contextmanager
    def _timed(self, tenant_id: str) -> Iterator[None]:
        """A search scans text on the event loop that serves everyone: each tenant's searches
        may take SEARCH_SECONDS_PER_SECOND of it on average. A search is charged what it
        took; a tenant in debt is refused until it is paid."""
        now = self.timer()
        bucket = self._search_time.get(tenant_id)
        if bucket is None:
            bucket = self._search_time[tenant_id] = TokenBucket.full(
                SEARCH_SECONDS_PER_SECOND, SEARCH_SECONDS_BURST, now
            )
        owed = bucket.reserve(0.0, now, 0.0)  # 0 while the tenant is not in debt
        if owed > 0:
            raise OverShare(Share.SEARCH_TIME, SEARCH_SECONDS_PER_SECOND, owed)
        try:
            yield
        finally:
            ended = self.timer()
            bucket.reserve(ended - now, ended, math.inf)  # charged whatever it took

    @contextmanager
    def _search_slot(self, tenant_id: str) -> Iterator[None]:
        busy = self._searching
        if busy[tenant_id] >= MAX_SEARCHES_PER_TENANT:
            raise AtCapacity(
                f"this tenant already runs {MAX_SEARCHES_PER_TENANT} phrase searches; retry in a few seconds",
                reason="BUSY",
            )
        if busy.total() >= MAX_SEARCHES:
            raise AtCapacity("too many phrase searches at once; retry in a few seconds", reason="BUSY")
        busy[tenant_id] += 1
        try:
            yield
        finally:
            busy[tenant_id] -= 1
            if not busy[tenant_id]:
                del busy[tenant_id]

    async def _matches(
        self, tenant_id: str, episode_id: str, folded: str, reading: _Reading
    ) -> tuple[list[Message], bool]:
        """The earliest MAX_MATCHES matches (as_match) among the newest MAX_SCANNED_MESSAGES,
        or fewer when `reading` runs out, and whether that was the whole log."""
        earliest: deque[Message] = deque(maxlen=MAX_MATCHES)  # newest first: the last kept
        found = scanned = 0
        before: int | None = None
        while scanned < MAX_SCANNED_MESSAGES:
            limit = reading.page(min(MAX_MESSAGES_PAGE, MAX_SCANNED_MESSAGES - scanned))
            page = await self.log.list_messages(tenant_id, episode_id, before, limit)
            matched, within = _keep_matches(page, folded, reading, earliest)
            found += matched
            if not within:
                return _oldest_first(earliest), False
            scanned += len(page)
            if len(page) < limit:
                return _oldest_first(earliest), found <= MAX_MATCHES
            before = page[-1].seq
            del page  # before the next page is read: one page held at a time
        return _oldest_first(earliest), False

    async def _call_fates(
        self, tenant_id: str, episode_id: str, seqs: list[int], folded: str, reading: _Reading
    ) -> tuple[list[CallFates], bool]:
        """The fates of `seqs` in the newest MAX_TRACED_CALLS calls, or fewer when `reading`
        runs out, oldest first, and whether that was every call."""
        rows: list[CallFates] = []
        before: tuple[datetime, str] | None = None
        while True:
            # one more than is traced, to know whether there are more
            limit = reading.page(min(MAX_CALLS_PAGE, MAX_TRACED_CALLS + 1 - len(rows)))
            page = await self.calls.list_calls(tenant_id, episode_id, before, limit)
            if not _keep_fates(page, seqs, folded, reading, rows):
                return rows[::-1], False
            if len(page) < limit:
                return rows[::-1], True
            before = (page[-1].created_at, page[-1].model_call_id)
            del page  # before the next page is read: one page held at a time


@dataclass
class _Reading:
    """The text one scan may still read, and how many rows its next page asks for: about
    PAGE_BYTES (never more than is left) by the heaviest row seen so far."""

    left: int
    heaviest: int = 0

    def page(self, most: int) -> int:
        if not self.heaviest:
            return min(most, FIRST_PAGE)
        return max(1, min(most, min(PAGE_BYTES, self.left) // self.heaviest))

    def take(self, size: int) -> bool:
        """Counts one row read; False (counting nothing) when it is more than is left."""
        self.heaviest = max(self.heaviest, size, 1)
        if size > self.left:
            return False
        self.left -= size
        return True


def _keep_matches(
    page: list[Message], folded: str, reading: _Reading, earliest: deque[Message]
) -> tuple[int, bool]:
    """Keeps the page's matches in `earliest`: how many there were, and False when `reading`
    ran out first."""
    found = 0
    for m in page:
        text = searchable(m)
        if not reading.take(utf8_size(text)):
            return found, False
        if folded in text:
            earliest.append(as_match(m))
            found += 1
    return found, True


def _keep_fates(
    page: list[ModelCall], seqs: list[int], folded: str, reading: _Reading, rows: list[CallFates]
) -> bool:
    """Adds each call's fates of `seqs` to `rows`; False when a call is left over, past
    MAX_TRACED_CALLS or what `reading` allows."""
    for call in page:
        if len(rows) == MAX_TRACED_CALLS or not reading.take(call_size(call)):
            return False
        rows.append(call_fates(call, seqs, folded))
    return True


def _oldest_first(newest_first: Iterable[Message]) -> list[Message]:
    return list(newest_first)[::-1]


def _checked_phrase(phrase: str) -> str:
    text = phrase.strip()
    if not text:
        raise InvalidArgument.of("phrase", "is required: the words to look for")
    if len(text) > MAX_PHRASE_CHARS:
        raise InvalidArgument.of("phrase", f"is {len(text)} characters; at most {MAX_PHRASE_CHARS}")
    return text
