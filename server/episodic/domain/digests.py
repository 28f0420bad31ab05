"""Rules of digests: when one is due, how failures back off, and which texts of an
episode are embedded and indexed for lexical search."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from episodic.domain.model import Episode, Message, Role
from episodic.domain.recall import Digest, DigestState, DigestText

FAILED_AFTER_ATTEMPTS = 3
MAX_BACKOFF = timedelta(minutes=10)
CHUNK_CHARS = 450  # ~100 tokens; chosen by episodic eval-recall over 150-1200 (see docs/api.md)
SPOKEN = (Role.USER, Role.ASSISTANT)
# What the index holds besides the model's vectors: which texts are embedded (embedded_texts,
# chunks) and the full text searched (lexical_body). Bump it when they change: every READY
# digest made with an earlier recipe is then re-embedded and its full text rewritten in the
# background, as after a model change, so an upgrade never leaves old episodes unrecallable.
INDEX_RECIPE = 1


def indexed_with(model_id: str) -> str:
    """What a digest records as its `embedding_model`, and what staleness is judged by. Recipe
    1 is the bare model id: what versions before recipes wrote."""
    return model_id if INDEX_RECIPE == 1 else f"{model_id}+index.{INDEX_RECIPE}"


def pending_digest(episode: Episode, now: datetime) -> Digest:
    assert episode.ended_at is not None
    return Digest(
        tenant_id=episode.tenant_id,
        episode_id=episode.episode_id,
        agent_id=episode.agent_id,
        user_id=episode.user_id,
        state=DigestState.PENDING,
        started_at=episode.started_at,
        ended_at=episode.ended_at,
        updated_at=now,
        next_attempt_at=now,
    )


def ready(digest: Digest, text: DigestText, embedding_model: str, now: datetime) -> Digest:
    return dataclasses.replace(
        digest,
        state=DigestState.READY,
        summary=text.summary,
        key_facts=text.key_facts,
        embedding_model=embedding_model,
        attempts=digest.attempts + 1,
        last_error="",
        updated_at=now,
    )


def failed(digest: Digest, error: str, now: datetime) -> Digest:
    """Failures are retried with exponential back-off, forever; after a few attempts the
    state says FAILED so operators and clients see it. A READY digest whose re-embedding
    failed stays READY (still recallable) and only records the error."""
    attempts = digest.attempts + 1
    state = DigestState.FAILED if attempts >= FAILED_AFTER_ATTEMPTS else DigestState.PENDING
    if digest.state is DigestState.READY:
        state = DigestState.READY
    backoff = min(timedelta(seconds=2**attempts), MAX_BACKOFF)
    return dataclasses.replace(
        digest,
        state=state,
        attempts=attempts,
        last_error=error[:2000],
        updated_at=now,
        next_attempt_at=now + backoff,
    )


def transcript_lines(messages: Sequence[Message]) -> list[str]:
    """What was said: user and assistant turns, plus tool names used."""
    lines = [m.content for m in messages if m.role in SPOKEN and m.content]
    tools = sorted({c.tool_name for m in messages for c in m.tool_calls})
    if tools:
        lines.append("Tools used: " + ", ".join(tools))
    return lines


def chunks(lines: Sequence[str], max_chars: int = CHUNK_CHARS) -> list[str]:
    """Consecutive lines packed into windows of at most max_chars (a longer line alone);
    each window after the first starts with the previous window's last line, so a reply
    keeps the turn it answers."""
    packed: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        if current and size + len(line) > max_chars:
            packed.append("\n".join(current))
            current = current[-1:]
            size = len(current[0]) + 1
        current.append(line)
        size += len(line) + 1
    if current:
        packed.append("\n".join(current))
    return packed


def digest_line(text: DigestText) -> str:
    return " ".join([text.summary, *text.key_facts]).strip()


def embedded_texts(text: DigestText, messages: Sequence[Message]) -> list[str]:
    """Chunk 0 is the digest itself; the rest cover the transcript, so a question about
    a detail the summary left out can still find its episode (max score per episode)."""
    return [digest_line(text) or "(empty conversation)", *chunks(transcript_lines(messages))]


def lexical_body(text: DigestText, messages: Sequence[Message]) -> str:
    return "\n".join([digest_line(text), *transcript_lines(messages)])
