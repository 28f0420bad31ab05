"""Per-episode sequence numbers stay dense and unique under concurrent appends,
on SQLite and PostgreSQL, including two independent writers (two replicas)."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from episodic.domain.model import NewMessage, Role
from episodic.store import schema
from tests.integration.conftest import Stack, stack_on

APPENDS = 200


async def stored_seqs(stack: Stack, episode_id: str) -> list[int]:
    m = schema.messages
    stmt = select(m.c.seq).where(m.c.tenant_id == stack.caller.tenant_id, m.c.episode_id == episode_id)
    async with stack.database.engine.connect() as conn:
        return sorted(r[0] for r in await conn.execute(stmt))


async def append_many(stack: Stack, episode_id: str, count: int, tag: str) -> list[int]:
    async def one(i: int) -> int:
        message, _ = await stack.services.episodes.add_message(
            stack.caller, episode_id, NewMessage(Role.USER, f"{tag} {i}", client_message_id=f"{tag}-{i}")
        )
        return message.seq

    return list(await asyncio.gather(*(one(i) for i in range(count))))


async def test_concurrent_appends_to_one_episode_get_dense_unique_sequence_numbers(stack: Stack) -> None:
    episode_id = await stack.new_episode()
    acked = await append_many(stack, episode_id, APPENDS, "w")
    assert sorted(acked) == list(range(1, APPENDS + 1))
    assert await stored_seqs(stack, episode_id) == list(range(1, APPENDS + 1))
    episode = await stack.services.episodes.get_episode(stack.caller, episode_id)
    assert episode.message_count == APPENDS


async def test_two_independent_writers_on_one_episode_never_collide(stack: Stack, database_url: str) -> None:
    episode_id = await stack.new_episode()
    async with stack_on(database_url, stack.caller) as replica:
        first, second = await asyncio.gather(
            append_many(stack, episode_id, APPENDS // 2, "a"),
            append_many(replica, episode_id, APPENDS // 2, "b"),
        )
    assert sorted(first + second) == list(range(1, APPENDS + 1))
    assert await stored_seqs(stack, episode_id) == list(range(1, APPENDS + 1))


async def test_concurrent_retries_of_one_message_store_it_once(stack: Stack) -> None:
    episode_id = await stack.new_episode()
    msg = NewMessage(Role.USER, "hello", client_message_id="retry-me")
    results = await asyncio.gather(
        *(stack.services.episodes.add_message(stack.caller, episode_id, msg) for _ in range(20))
    )
    assert {m.seq for m, _ in results} == {1}
    assert sum(1 for _, replayed in results if not replayed) == 1
    m = schema.messages
    async with stack.database.engine.connect() as conn:
        count = await conn.scalar(select(func.count()).where(m.c.episode_id == episode_id))
    assert count == 1


async def test_concurrent_appends_across_many_episodes_keep_each_sequence_dense(stack: Stack) -> None:
    episode_ids = [await stack.new_episode() for _ in range(8)]
    await asyncio.gather(*(append_many(stack, e, 25, f"m{n}") for n, e in enumerate(episode_ids)))
    for episode_id in episode_ids:
        assert await stored_seqs(stack, episode_id) == list(range(1, 26))
