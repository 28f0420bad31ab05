"""The corpus's SQL rows, written fast: raw sqlite3 `executemany` in one transaction, rows
generated chunk by chunk. A fixture of the bench, not a way to write product data: it
bypasses the stores and the group-commit writer on purpose (a million digests through the
digester would take hours and measure nothing SearchEpisodes does).

Values are stored the way SQLAlchemy stores them, so the product reads them back: times as
naive UTC 'YYYY-MM-DD HH:MM:SS.ffffff' (checked against `UtcDateTime` at run time), JSON
as text. Every episode is closed and its digest READY, with its text and scope token in
`digest_texts` (whose triggers fill the FTS5 index `digest_fts`). No `digest_vectors`:
the index is built in memory instead."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.dialects.sqlite import aiosqlite

from episodic.domain.recall import Scope
from episodic.store import schema
from episodic.store.lexical import scope_token
from episodic_lab.bench_recall import BenchRecallError
from episodic_lab.bench_recall.layout import Layout
from episodic_lab.bench_recall.words import Lexicon

CHUNK_ROWS = 50_000
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
SPREAD_SECONDS = 365 * 24 * 3600  # episodes end over one year
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"
MESSAGES, TOKENS = 20, 600  # what the counters of a 20-message episode would say
PHRASES_PER_ROW = 8  # summary 2, key facts 2, transcript 4: ~32 words of lexical body

EPISODE_COLUMNS = (
    "tenant_id", "episode_id", "agent_id", "user_id", "state", "token_encoding", "started_at",
    "ended_at", "close_reason", "close_note", "metadata", "message_count", "token_count",
    "last_activity_at", "deleted_at",
)  # fmt: skip
DIGEST_COLUMNS = (
    "tenant_id", "episode_id", "agent_id", "user_id", "state", "summary", "key_facts",
    "embedding_model", "attempts", "last_error", "next_attempt_at", "started_at", "ended_at",
    "updated_at",
)  # fmt: skip
TEXT_COLUMNS = ("tenant_id", "episode_id", "agent_id", "user_id", "body", "scope")
TABLES = ("episodes", "digests", "digest_texts")
Row = tuple[str | int | None, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    layout: Layout
    token_encoding: str
    embedding_model: str
    lexicon: Lexicon
    seed: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """Column values of a run of consecutive episodes."""

    episode_ids: list[str]
    user_ids: list[str]
    started: list[str]
    ended: list[str]
    summaries: list[str]
    facts: list[str]  # JSON arrays
    bodies: list[str]


def check_time_format() -> None:
    """The bench writes times with strftime; SQLAlchemy must store them the same way."""
    probe = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    dialect = aiosqlite.dialect()
    bind = schema.UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    stored = bind(probe) if bind else probe
    if stored != probe.strftime(SQLITE_TIME):
        raise BenchRecallError(f"SQLAlchemy stores {probe!r} as {stored!r}, not as {SQLITE_TIME!r}")


def write_rows(path: Path, plan: Plan) -> dict[str, float]:
    """Inserts the corpus in one transaction; returns seconds spent per table (and in
    generating the values, and in the commit)."""
    spent = dict.fromkeys(("generate", *TABLES, "commit"), 0.0)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        _check_columns(conn)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-1048576", "temp_store=MEMORY"):
            conn.execute(f"PRAGMA {pragma}")
        conn.execute("BEGIN")
        rng = np.random.default_rng(plan.seed)
        for start in range(0, plan.layout.episodes, CHUNK_ROWS):
            _insert_chunk(conn, plan, rng, range(start, min(start + CHUNK_ROWS, plan.layout.episodes)), spent)
        began = time.perf_counter()
        conn.execute("COMMIT")
        spent["commit"] += time.perf_counter() - began
    finally:
        conn.close()
    return spent


def _insert_chunk(
    conn: sqlite3.Connection, plan: Plan, rng: np.random.Generator, episodes: range, spent: dict[str, float]
) -> None:
    began = time.perf_counter()
    chunk = _chunk(plan, rng, episodes)
    spent["generate"] += time.perf_counter() - began
    for table, columns, rows in (
        ("episodes", EPISODE_COLUMNS, _episode_rows(plan, chunk)),
        ("digests", DIGEST_COLUMNS, _digest_rows(plan, chunk)),
        ("digest_texts", TEXT_COLUMNS, _text_rows(plan, chunk)),
    ):
        began = time.perf_counter()
        marks = ", ".join("?" * len(columns))
        conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
        spent[table] += time.perf_counter() - began


def _chunk(plan: Plan, rng: np.random.Generator, episodes: range) -> Chunk:
    layout, phrases = plan.layout, plan.lexicon.phrases
    ends = rng.integers(0, SPREAD_SECONDS * 1_000_000, len(episodes))
    durations = rng.integers(60 * 1_000_000, 3600 * 1_000_000, len(episodes))  # 1-60 minutes
    picks = rng.integers(0, len(phrases), (len(episodes), PHRASES_PER_ROW)).tolist()
    summaries, facts, bodies = [], [], []
    for row in picks:
        p = [phrases[i] for i in row]
        summary = f"Talked about {p[0]}, then {p[1]}."
        summaries.append(summary)
        facts.append(f'["{p[2]}", "{p[3]}"]')  # made-up words need no JSON escaping
        bodies.append(f"{summary} {p[2]} {p[3]}\n{p[4]} {p[5]}\n{p[6]} {p[7]}")
    return Chunk(
        episode_ids=[layout.episode_id(i) for i in episodes],
        user_ids=[layout.user_id(layout.user_of(i)) for i in episodes],
        started=_times(ends - durations),
        ended=_times(ends),
        summaries=summaries,
        facts=facts,
        bodies=bodies,
    )


def _times(microseconds: NDArray[np.int64]) -> list[str]:
    """Microseconds after EPOCH as SQLAlchemy stores times on SQLite."""
    base = np.datetime64(EPOCH.replace(tzinfo=None), "us")
    moments = base + microseconds.astype("timedelta64[us]")
    return [text.replace("T", " ") for text in np.datetime_as_string(moments, unit="us").tolist()]


def _episode_rows(plan: Plan, c: Chunk) -> Iterator[Row]:
    t, a, enc = plan.layout.tenant_id, plan.layout.agent_id, plan.token_encoding
    for e, u, started, ended in zip(c.episode_ids, c.user_ids, c.started, c.ended, strict=True):
        closed = ("closed", enc, started, ended, "user_ended", "", "{}", MESSAGES, TOKENS, ended, None)
        yield (t, e, a, u, *closed)


def _digest_rows(plan: Plan, c: Chunk) -> Iterator[Row]:
    t, a, model = plan.layout.tenant_id, plan.layout.agent_id, plan.embedding_model
    columns = zip(c.episode_ids, c.user_ids, c.summaries, c.facts, c.started, c.ended, strict=True)
    for e, u, summary, facts, started, ended in columns:
        yield (t, e, a, u, "ready", summary, facts, model, 1, "", ended, started, ended, ended)


def _text_rows(plan: Plan, c: Chunk) -> Iterator[Row]:
    t, a = plan.layout.tenant_id, plan.layout.agent_id
    for e, u, body in zip(c.episode_ids, c.user_ids, c.bodies, strict=True):
        yield (t, e, a, u, body, scope_token(Scope(t, a, u)))


def _check_columns(conn: sqlite3.Connection) -> None:
    """Fails loudly when the schema has moved on from the columns written here."""
    expected = {
        "episodes": EPISODE_COLUMNS,
        "digests": DIGEST_COLUMNS,
        "digest_texts": TEXT_COLUMNS,
    }
    for table, columns in expected.items():
        found = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
        if found != set(columns):
            raise BenchRecallError(f"table {table} has columns {sorted(found)}, the bench writes {columns}")
    for name in ("episodes", "digests", "digest_texts"):
        if {c.name for c in schema.metadata.tables[name].columns} != set(expected[name]):
            raise BenchRecallError(f"schema.{name} differs from the columns the bench writes")
