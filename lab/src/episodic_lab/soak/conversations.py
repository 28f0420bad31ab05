"""The soak's conversations, written through the API before the load: per conversation its
own user with a few closed, digested episodes (what RECENCY recall renders), and an open
episode whose log the appenders soon grow past the budget. Each is rendered once before
the load: the server's one-off first-call costs (token encodings, the working set) are
paid in the setup, not in the soak's warm-up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from episodic_lab.bench_context.client import Client
from episodic_lab.bench_context.conversations import Writer, user_id

PAST_EPISODES = 3
PAST_EPISODE_MESSAGES = 6
# ~3.2k tokens: with the three recalled digests the context is just under the 4k budget, so
# about a dozen appends to a conversation make it compact, then about every fifty more.
OPENING_MESSAGES = 90
WRITERS = 16  # conversations written at a time
T = TypeVar("T")


async def open_conversations(client: Client, count: int) -> list[str]:
    """The open episodes, one per user; their users' past episodes are closed and digested."""
    writer = Writer(client)

    async def prepare(number: int) -> str:
        await _past_episodes(writer, user_id(number))
        episode_id = await writer.conversation(user_id(number), OPENING_MESSAGES, seed=number)
        await client.build(episode_id)
        return episode_id

    return await _each(count, prepare)


async def _past_episodes(writer: Writer, user: str) -> None:
    """Closed together, so that the digester takes them in one batch."""
    episodes = [await writer.conversation(user, PAST_EPISODE_MESSAGES, seed) for seed in range(PAST_EPISODES)]
    await asyncio.gather(*(writer.client.close_digested(episode_id) for episode_id in episodes))


async def _each(count: int, make: Callable[[int], Awaitable[T]]) -> list[T]:
    """make(0) .. make(count - 1), WRITERS at a time; the results in order."""
    gate = asyncio.Semaphore(WRITERS)

    async def one(number: int) -> T:
        async with gate:
            return await make(number)

    return list(await asyncio.gather(*(one(number) for number in range(count))))
