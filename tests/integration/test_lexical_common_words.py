"""SQLite full-text recall leaves out words nearly every digest holds: FTS5's bm25() would
walk each such word's whole posting list to weigh it, in every scope, on every query."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta

from episodic.domain.model import Caller, NewMessage, Role
from episodic.domain.recall import Scope
from episodic.embed import make_embedder
from episodic.store import lexical
from episodic.store.digests import SqlDigestStore
from tests.conftest import unique
from tests.integration.conftest import Stack, stack_on
from tests.integration.test_digester import digester_for


def word() -> str:
    return "".join(random.choices(string.ascii_lowercase, k=12))


async def closed(stack: Stack, agent_id: str, text: str) -> str:
    episodes = stack.services.episodes
    episode, _ = await episodes.open_episode(stack.caller, agent_id=agent_id, user_id="u1")
    await episodes.add_message(stack.caller, episode.episode_id, NewMessage(Role.USER, text))
    await episodes.close_episode(stack.caller, episode.episode_id)
    return episode.episode_id


async def test_words_in_more_texts_than_the_limit_are_left_out_of_the_query(sqlite_url: str) -> None:
    async with stack_on(sqlite_url, Caller(unique("tenant"))) as stack:
        agent_id = await stack.new_agent()
        everywhere, somewhere = word(), word()
        for _ in range(2):
            await closed(stack, agent_id, f"I saw the {everywhere} again")
        with_both = await closed(stack, agent_id, f"I saw the {everywhere} and the {somewhere}")
        now = datetime.now(UTC) + timedelta(seconds=1)
        assert await digester_for(stack, make_embedder("hashing"), now).run_once() == 3
        scope = Scope(stack.caller.tenant_id, agent_id, "u1")
        plain = SqlDigestStore(stack.database, stack.writer)
        strict = SqlDigestStore(stack.database, stack.writer, lexical.CommonWords(common_docs=2))

        assert len(await plain.lexical(scope, everywhere, 10)) == 3
        assert await strict.lexical(scope, everywhere, 10) == []  # in 3 texts: nothing to rank by
        found = await strict.lexical(scope, f"{everywhere} {somewhere}", 10)
        assert [hit.episode_id for hit in found] == [with_both]
