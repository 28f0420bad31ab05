"""The inspector's use cases: read-only views of a tenant's agents, users, episodes, logs
and stored model calls, and the two questions only the stored calls can answer: where did
a phrase go, and what changed from one call to the next. Every read goes through the same
services (and so the same visibility rules) as the gRPC API; the work of one request is
bounded however long the episode."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from episodic.domain.access import require_agent
from episodic.domain.context import ModelCall
from episodic.domain.inspection import (
    MAX_PHRASE_CHARS,
    CallDiff,
    FateRun,
    PhraseTrace,
    UserSummary,
    contains,
    diff_calls,
    fates,
    trace_phrase,
)
from episodic.domain.model import Agent, Caller, Episode, Message, Page
from episodic.domain.paging import decode_token, page_of, read_id
from episodic.domain.ports import ContextStore, EpisodeFilter, EpisodeStore, UserDirectory
from episodic.domain.validation import Violations, check_id
from episodic.errors import InvalidArgument, ResourceExhausted
from episodic.service.agents import AgentService
from episodic.service.context import ContextService
from episodic.service.episodes import EpisodeService

PAGE_SIZE = 50
SCAN_PAGE = 500
MAX_SCANNED_MESSAGES = 10_000  # a phrase is looked for in the newest this many messages
MAX_MATCHES = 50  # the earliest matching messages are traced
MAX_TRACED_CALLS = 300  # through the newest this many model calls
# "Where did it go?" reads up to thousands of rows: so few run at once that one tenant's
# searches never hold the database from the others (more answer RESOURCE_EXHAUSTED).
MAX_SEARCHES_PER_TENANT = 2
MAX_SEARCHES = 4


@dataclass(frozen=True, slots=True)
class Traced:
    trace: PhraseTrace
    truncated: bool  # the log or the calls were longer than one request reads


@dataclass(frozen=True, slots=True)
class InspectedCall:
    call: ModelCall
    fates: list[FateRun]  # every log seq up to the call, as runs of one fate


@dataclass(frozen=True, slots=True)
class Diffed:
    call: ModelCall
    previous: ModelCall | None
    diff: CallDiff


@dataclass
class InspectionService:
    agents: AgentService
    episodes: EpisodeService
    context: ContextService
    users: UserDirectory
    log: EpisodeStore
    calls: ContextStore
    _searching: Counter[str] = field(default_factory=Counter, init=False)

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
        return await self.context.list_model_calls(caller, episode_id, PAGE_SIZE, page_token)

    async def get_model_call(self, caller: Caller, model_call_id: str) -> InspectedCall:
        call = await self.context.get_model_call(caller, model_call_id)
        return InspectedCall(call, fates(call))

    async def diff(self, caller: Caller, model_call_id: str) -> Diffed:
        """The call against the one before it in its episode (None for the first)."""
        call = await self.context.get_model_call(caller, model_call_id)
        before = (call.created_at, call.model_call_id)
        older = await self.calls.list_calls(caller.tenant_id, call.episode_id, before, 1)
        previous = older[0] if older else None
        return Diffed(call, previous, diff_calls(previous, call))

    async def where(self, caller: Caller, episode_id: str, phrase: str) -> Traced:
        folded = _checked_phrase(phrase).casefold()
        await self.episodes.ensure_visible(caller, episode_id)
        with self._search_slot(caller.tenant_id):
            matches, all_read = await self._matches(caller.tenant_id, episode_id, folded)
            calls, all_calls = await self._calls(caller.tenant_id, episode_id)
        return Traced(trace_phrase(matches, calls), not (all_read and all_calls))

    @contextmanager
    def _search_slot(self, tenant_id: str) -> Iterator[None]:
        busy = self._searching
        if busy[tenant_id] >= MAX_SEARCHES_PER_TENANT or busy.total() >= MAX_SEARCHES:
            raise ResourceExhausted("too many phrase searches at once; retry in a few seconds", reason="BUSY")
        busy[tenant_id] += 1
        try:
            yield
        finally:
            busy[tenant_id] -= 1
            if not busy[tenant_id]:
                del busy[tenant_id]

    async def _matches(self, tenant_id: str, episode_id: str, folded: str) -> tuple[list[Message], bool]:
        """The earliest matches among the newest MAX_SCANNED_MESSAGES, and whether that was
        the whole log."""
        found: list[Message] = []
        before: int | None = None
        scanned = 0
        while scanned < MAX_SCANNED_MESSAGES:
            page = await self.log.list_messages(tenant_id, episode_id, before, SCAN_PAGE)
            found.extend(m for m in page if contains(m, folded))
            scanned += len(page)
            if len(page) < SCAN_PAGE:
                return sorted(found, key=lambda m: m.seq)[:MAX_MATCHES], len(found) <= MAX_MATCHES
            before = page[-1].seq
        return sorted(found, key=lambda m: m.seq)[:MAX_MATCHES], False

    async def _calls(self, tenant_id: str, episode_id: str) -> tuple[list[ModelCall], bool]:
        """The newest MAX_TRACED_CALLS calls, oldest first, and whether that was all of them."""
        newest = await self.calls.list_calls(tenant_id, episode_id, None, MAX_TRACED_CALLS + 1)
        return newest[:MAX_TRACED_CALLS][::-1], len(newest) <= MAX_TRACED_CALLS


def _checked_phrase(phrase: str) -> str:
    text = phrase.strip()
    if not text:
        raise InvalidArgument.of("phrase", "is required: the words to look for")
    if len(text) > MAX_PHRASE_CHARS:
        raise InvalidArgument.of("phrase", f"is {len(text)} characters; at most {MAX_PHRASE_CHARS}")
    return text
