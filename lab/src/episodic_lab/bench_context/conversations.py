"""The conversations the bench measures, written through the API: per user, past episodes
closed and digested (what recall finds), and open episodes whose log has a chosen length
or is filled until the rendered context nears the budget without being compacted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from episodic_client.v1 import context_pb2, episode_pb2
from episodic_lab.bench_context.client import BATCH_MESSAGES, BUDGET_TOKENS, Client
from episodic_lab.bench_recall.chat import turns

PAST_EPISODES = 10
PAST_EPISODE_MESSAGES = 6  # ten digests of six turns fit the recall half of the budget
FILL_SHARE = 0.97  # the filled context stops just under the budget: nothing is summarized
FILL_ROUNDS = 10
FIRST_GUESS_TOKENS = 40  # per message, before the server has counted any (turns are ~35)


def user_id(worker: int) -> str:
    return f"bench-user-{worker}"


def chat(count: int, seed: int) -> list[episode_pb2.MessageInput]:
    """`count` turns of ~150 characters, user and assistant alternately."""
    roles = (episode_pb2.ROLE_USER, episode_pb2.ROLE_ASSISTANT)
    texts = turns(np.random.default_rng(seed), count)
    return [episode_pb2.MessageInput(role=roles[i % 2], content=text) for i, text in enumerate(texts)]


@dataclass(frozen=True, slots=True)
class Writer:
    client: Client

    async def past_episodes(self, user: str) -> None:
        """Closed together, so that the digester takes them in one batch."""
        episodes = [
            await self.conversation(user, PAST_EPISODE_MESSAGES, seed) for seed in range(PAST_EPISODES)
        ]
        await asyncio.gather(*(self.client.close_digested(episode_id) for episode_id in episodes))

    async def conversation(self, user: str, messages: int, seed: int = 0) -> str:
        episode_id = await self.client.open(user)
        await self.client.add(episode_id, chat(messages, seed))
        return episode_id

    async def filled(self, user: str) -> str:
        """An open episode whose rendered context is about FILL_SHARE of the budget; each
        round appends what the last report says is missing, at the measured cost per turn."""
        episode_id, written = await self.client.open(user), 0
        for _ in range(FILL_ROUNDS):
            report = await self.client.build(episode_id)
            missing = int((BUDGET_TOKENS * FILL_SHARE - report.total_tokens) / _per_message(report))
            if missing <= 0:
                break
            await self.client.add(episode_id, chat(written + missing, seed=0)[written:])
            written += missing
        return episode_id

    async def grow(self, episode_id: str, written: int, target: int) -> AsyncIterator[int]:
        """Appends up to `target` messages a batch at a time; yields the count after each."""
        messages = chat(target, seed=1)
        for start in range(written, target, BATCH_MESSAGES):
            end = min(start + BATCH_MESSAGES, target)
            await self.client.add(episode_id, messages[start:end])
            yield end


def _per_message(report: context_pb2.ContextReport) -> float:
    rendered = report.history_to_seq - report.history_from_seq + 1 if report.history_to_seq else 0
    return report.section_tokens.history / rendered if rendered else FIRST_GUESS_TOKENS
