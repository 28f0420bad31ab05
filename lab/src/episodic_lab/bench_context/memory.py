"""The server's resident memory (VmRSS): per active conversation (RSS after the first
BuildContext of N conversations, written beforehand, minus RSS before, over N), and as
one conversation's log grows (BuildContext after every appended batch)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from episodic_lab.bench_context import progress
from episodic_lab.bench_context.client import Client
from episodic_lab.bench_context.conversations import Writer, user_id
from episodic_lab.bench_context.server import rss_mib

CONVERSATION_MESSAGES = 200  # ~7k tokens: each has outgrown the 4k budget once
WRITERS = 16  # conversations written or warmed at a time
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PerConversation:
    conversations: int
    messages_each: int
    before_mib: float
    after_mib: float

    @property
    def kib_each(self) -> float:
        grown = (self.after_mib - self.before_mib) * 1024
        return grown / self.conversations if self.conversations else math.nan


@dataclass(frozen=True, slots=True)
class Growth:
    points: tuple[tuple[int, float], ...]  # (messages in the log, RSS MiB after BuildContext)

    @property
    def change_mib(self) -> float:
        return self.points[-1][1] - self.points[0][1] if self.points else math.nan


async def per_conversation(client: Client, server_pid: int, conversations: int) -> PerConversation:
    (_, before), (_, after) = await rss_by_conversations(client, server_pid, (conversations,))
    progress(f"  {conversations} conversations warmed: RSS {before:.1f} -> {after:.1f} MiB")
    return PerConversation(conversations, CONVERSATION_MESSAGES, before, after)


async def rss_by_conversations(
    client: Client, server_pid: int, counts: Sequence[int]
) -> tuple[tuple[int, float], ...]:
    """(conversations warmed, RSS MiB): at 0, then after the first BuildContext of each count's
    conversations. All are written before the first is warmed, so writing costs no RSS here."""
    writer = Writer(client)
    episodes = await _each(max(counts), lambda _: writer.conversation(user_id(0), CONVERSATION_MESSAGES))
    points, warmed = [(0, rss_mib(server_pid))], 0
    for count in sorted(counts):
        await _first_builds(client, episodes[warmed:count])
        warmed = count
        points.append((count, rss_mib(server_pid)))
    return tuple(points)


async def _first_builds(client: Client, episodes: Sequence[str]) -> None:
    await _each(len(episodes), lambda n: client.build(episodes[n]))


async def growth(client: Client, server_pid: int, checkpoints: tuple[int, ...]) -> Growth:
    """One conversation grown through the checkpoints (message counts), RSS at each."""
    writer, episode_id = Writer(client), await client.open(user_id(0))
    points, written = [], 0
    for checkpoint in checkpoints:
        async for _ in writer.grow(episode_id, written, checkpoint):
            await client.build(episode_id)
        written = checkpoint
        points.append((checkpoint, rss_mib(server_pid)))
        progress(f"  one conversation at {checkpoint:,} messages: RSS {points[-1][1]:.1f} MiB")
    return Growth(tuple(points))


async def _each(count: int, make: Callable[[int], Awaitable[T]]) -> list[T]:
    """make(0) .. make(count - 1), WRITERS at a time; the results in order."""
    gate = asyncio.Semaphore(WRITERS)

    async def one(number: int) -> T:
        async with gate:
            return await make(number)

    return list(await asyncio.gather(*(one(number) for number in range(count))))
