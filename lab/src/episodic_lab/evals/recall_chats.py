"""`episodic-lab eval-recall --chats FILE`: recall on a second kind of text, a hand-written set
of support chats, assistant chats and casual group chats (tests/data/recall_chats.jsonl), asked
through the public gRPC API like LoCoMo, next to a plain BM25 over each episode's raw messages.

The file is JSON Lines of three kinds of row: one `now` (the day its times are written against),
`episode` rows (user, id, start, messages of role and content; a group chat's content carries
its speaker's "Name: ") and `question` rows (user, id, category, question, gold episode ids).
Every time is shifted by whole days so that the file's `now` is the run's today ("2 days ago"
stays true whatever day it runs), and a question's `{in_month:ID}` / `{month_year:ID}` become
"in <month>" / "in <month> <year>" of episode ID after that shift."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from episodic_client import AsyncEpisodicClient, message_input
from episodic_lab.evals.bm25 import Bm25
from episodic_lab.evals.locomo_data import Question
from episodic_lab.evals.metrics import Report

TURN_SPACING = timedelta(seconds=30)
_TEMPLATE = re.compile(r"\{(in_month|month_year):([\w-]+)\}")


@dataclass(frozen=True, slots=True)
class ChatEpisode:
    user: str
    episode_id: str
    started: datetime
    messages: tuple[tuple[str, str], ...]  # (role, content)

    @property
    def ended(self) -> datetime:
        return self.started + TURN_SPACING * len(self.messages)


def load_chats(path: Path, today: datetime | None = None) -> tuple[list[ChatEpisode], list[Question]]:
    """Episodes and questions, shifted to `today` (by default the real one, UTC). A question's
    evidence is its gold ids without the "<user>-" prefix, as `_ask` ranks them."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    (now,) = [datetime.fromisoformat(r["now"]) for r in rows if r["kind"] == "now"]
    today = today or datetime.now(UTC)
    shift = timedelta(days=(today.date() - now.date()).days)
    episodes = [
        ChatEpisode(
            r["user"],
            r["id"],
            datetime.fromisoformat(r["start"]) + shift,
            tuple((m["role"], m["content"]) for m in r["messages"]),
        )
        for r in rows
        if r["kind"] == "episode"
    ]
    ended = {e.episode_id: e.ended for e in episodes}
    questions = [
        Question(
            r["user"],
            r["id"],
            _filled(r["question"], ended),
            r["category"],
            frozenset(g.removeprefix(f"{r['user']}-") for g in r["gold"]),
        )
        for r in rows
        if r["kind"] == "question"
    ]
    return episodes, questions


def _filled(text: str, ended: dict[str, datetime]) -> str:
    def month(m: re.Match[str]) -> str:
        when = ended[m.group(2)]
        name = when.strftime("%B")
        return f"in {name}" if m.group(1) == "in_month" else f"in {name} {when.year}"

    return _TEMPLATE.sub(month, text)


async def load_into(client: AsyncEpisodicClient, agent: str, episodes: Sequence[ChatEpisode]) -> None:
    """Each episode opened at its start, its messages 30 s apart, closed after the last."""
    await client.create_agent(agent, model="gpt-4o")
    for e in episodes:
        await client.open_episode(agent, e.user, episode_id=e.episode_id, start_time=e.started)
        await client.add_messages(
            e.episode_id,
            [
                message_input(role, content, create_time=e.started + TURN_SPACING * i)
                for i, (role, content) in enumerate(e.messages)
            ],
        )
        await client.close_episode(e.episode_id, end_time=e.ended)


def chats_bm25(report: Report, episodes: Sequence[ChatEpisode], questions: Sequence[Question]) -> None:
    """BM25 over each episode's raw messages, ranked within its user's episodes."""
    by_user: dict[str, list[ChatEpisode]] = {}
    for e in episodes:
        by_user.setdefault(e.user, []).append(e)
    indexes = {u: Bm25(["\n".join(c for _, c in e.messages) for e in v]) for u, v in by_user.items()}
    for q in questions:
        scores = indexes[q.sample_id].scores(q.text)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        ranked = [by_user[q.sample_id][i].episode_id.removeprefix(f"{q.sample_id}-") for i in order]
        report.add("bm25", q.category, ranked, q.evidence)
