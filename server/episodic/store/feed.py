"""The change feed in SQL: the `ChangeFeed` port.

A write that changes what recall or BuildContext can see is a unit of work: its SQL
operation and the changes it declares (`domain.changes.Declared`). The group-commit writer
runs both as one piece, on every path (one operation, or an item of a bulk operation):
`record` computes the changes from the operation's result and inserts them into `changes`
IN THE SAME TRANSACTION (or savepoint) as the operation. Every replica tails the table by
`seq` (see workers/feed.py).

Order: on PostgreSQL a transaction-scoped advisory lock is taken before the insert and held
to COMMIT, so sequence numbers are handed out in commit order and a reader that has seen
row n has seen every row before it (no gap can fill in later). SQLite has one writer.

Privacy: rows name scopes, episodes and memories, never content. An erasure deletes the
user's earlier rows and writes one `user_erased` row with the user's hash instead of what
it removed, so no row names the user afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, delete, func, select, text

from episodic.domain.changes import (
    AgentChanged,
    Change,
    Declared,
    DocumentsRemoved,
    EpisodesRemoved,
    EpisodeVectors,
    KnowledgeVectors,
    MemoriesRemoved,
    MemoryVectors,
    MessageRetracted,
    Recorded,
    ScopeChanged,
    UserErased,
)
from episodic.domain.erasure import user_hash
from episodic.domain.ports.changes import FeedEntry, FeedPage, Signals
from episodic.domain.recall import Scope
from episodic.store import schema as s
from episodic.store.database import Database

if TYPE_CHECKING:  # the writer imports this module for `record`
    from episodic.store.writer import GroupCommitWriter

C, MARKS = s.changes, s.feed_marks
FEED_VERSION = 1  # the body format this code writes; it refuses rows of a newer one
CHANNEL = "episodic_feed"
FEED_LOCK_KEY = 0x45_70_69_73_6F_64_69_63  # "Episodic": the advisory lock that orders seqs
PRUNED = "pruned"
T = TypeVar("T")


class FeedTooNew(Exception):
    """A feed row this code cannot read (written by a newer release): applying the rest
    would leave this replica silently stale, so it stops and says so."""


@dataclass(frozen=True, slots=True)
class FeedRow:
    seq: int
    version: int
    kind: str
    tenant_id: str
    body: str
    origin: str


def record(conn: Connection, result: T, declared: Declared[T]) -> Recorded[T]:
    """The writer's second half of a unit of work, on the operation's connection, right after
    it ran: the changes it declared, computed from its result and inserted as feed rows."""
    changes = list(declared.of(result))
    return Recorded(result, changes, append(conn, changes, declared.origin))


class SqlChangeFeed:
    """Names this process's rows and wakes the other replicas after they commit (the writer
    inserts them: `record`), reads for the tail, prunes for the singleton pruner."""

    def __init__(self, db: Database, writer: GroupCommitWriter, *, origin: str, signals: Signals) -> None:
        self._db = db
        self._writer = writer
        self.origin = origin  # this process: the tail skips what it already applied itself
        self._signals = signals

    def published(self) -> None:
        """After a write that inserted feed rows committed."""
        # a wake-up naming who wrote (the rows say what changed): this process's own tail
        # has nothing to read in it
        self._signals.notify(CHANNEL, self.origin)

    async def head(self) -> int:
        return await self._db.read(lambda conn: int(conn.scalar(select(func.max(C.c.seq))) or 0))

    async def after(self, seq: int, limit: int) -> FeedPage:
        """The pruned-through mark and up to `limit` rows after `seq`, in one read."""
        rows = select(C).where(C.c.seq > seq).order_by(C.c.seq).limit(limit)
        mark = select(MARKS.c.seq).where(MARKS.c.name == PRUNED)

        def read(conn: Connection) -> FeedPage:
            pruned = int(conn.scalar(mark) or 0)
            return FeedPage(pruned, [_entry(_row(r)) for r in conn.execute(rows).mappings()])

        return await self._db.read(read)

    async def prune(self, through: int) -> int:
        """Deletes rows up to `through` and raises the mark; returns how many went."""

        def op(conn: Connection) -> int:
            gone = conn.execute(delete(C).where(C.c.seq <= through)).rowcount
            current = conn.scalar(select(MARKS.c.seq).where(MARKS.c.name == PRUNED))
            if current is None:
                conn.execute(MARKS.insert().values(name=PRUNED, seq=through))
            elif through > current:
                conn.execute(MARKS.update().where(MARKS.c.name == PRUNED).values(seq=through))
            return int(gone or 0)

        return int(await self._writer.run(op))


def append(conn: Connection, changes: Iterable[Change], origin: str) -> bool:
    """Inserts the feed rows of `changes`; True when there were any."""
    rows, erased = encode(changes)
    if not rows:
        return False
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": FEED_LOCK_KEY})
    for tenant_id, hashed in erased:
        conn.execute(delete(C).where(C.c.tenant_id == tenant_id, C.c.user_hash == hashed))
    conn.execute(C.insert(), [{**row, "version": FEED_VERSION, "origin": origin} for row in rows])
    return True


def encode(changes: Iterable[Change]) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    """Feed rows of `changes` (one scope per row), and the (tenant, user hash) of erased
    users: their rows, these included, give way to one `user_erased` row each."""
    rows: list[dict[str, Any]] = []
    erased: set[tuple[str, str]] = set()
    for change in changes:
        if isinstance(change, UserErased):
            erased.add((change.tenant_id, change.user_hash))
        else:
            rows.extend(_rows_of(change))
    kept = [r for r in rows if (r["tenant_id"], r["user_hash"]) not in erased]
    markers = [_marker(tenant_id, hashed) for tenant_id, hashed in sorted(erased)]
    return kept + markers, erased


def decode(row: FeedRow) -> Change:
    """The change a row describes, as the other replicas apply it: vectors are not carried
    (they are read from SQL, which is what the row's transaction left there)."""
    if row.version > FEED_VERSION:
        raise FeedTooNew(
            f"change feed row {row.seq} has format {row.version}; this release reads {FEED_VERSION}"
        )
    body = json.loads(row.body)
    reader = _READERS.get(row.kind)
    if reader is None:
        raise FeedTooNew(f"change feed row {row.seq} is of an unknown kind {row.kind!r}")
    return reader(row.tenant_id, body)


def _rows_of(change: Change) -> list[dict[str, Any]]:
    if isinstance(change, EpisodeVectors):
        return [_scoped("episode_vectors", change.scope, episode=change.episode_id)]
    if isinstance(change, ScopeChanged):
        return [_scoped("scope_changed", change.scope)]
    if isinstance(change, MessageRetracted):
        return [_scoped("message_retracted", change.scope, episode=change.episode_id)]
    if isinstance(change, MemoryVectors):
        return [_scoped("memory_vectors", change.scope, memories=list(change.keys))]
    if isinstance(change, EpisodesRemoved):
        return [_scoped("episodes_removed", sc, episodes=ids) for sc, ids in _by_scope(change.episodes)]
    if isinstance(change, MemoriesRemoved):
        return [_scoped("memories_removed", sc, memories=ids) for sc, ids in _by_scope(change.memories)]
    if isinstance(change, AgentChanged):
        return [_row_values("agent_changed", change.tenant_id, "", {"agent": change.agent_id})]
    if isinstance(change, KnowledgeVectors):
        return [_scoped("knowledge_vectors", change.scope, document=change.document_id)]
    if isinstance(change, DocumentsRemoved):
        return [_scoped("documents_removed", sc, documents=ids) for sc, ids in _by_scope(change.documents)]
    return []  # CachesStale is this process's own conclusion, never written


def _by_scope(pairs: Iterable[tuple[Scope, str]]) -> list[tuple[Scope, list[str]]]:
    grouped: dict[Scope, list[str]] = {}
    for scope, item in pairs:
        grouped.setdefault(scope, []).append(item)
    return list(grouped.items())


def _scoped(kind: str, scope: Scope, **more: Any) -> dict[str, Any]:
    body = {"agent": scope.agent_id, "user": scope.user_id, **more}
    return _row_values(kind, scope.tenant_id, user_hash(scope.tenant_id, scope.user_id), body)


def _marker(tenant_id: str, hashed: str) -> dict[str, Any]:
    return _row_values("user_erased", tenant_id, "", {"user_hash": hashed})


def _row_values(kind: str, tenant_id: str, hashed: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "tenant_id": tenant_id, "user_hash": hashed, "body": json.dumps(body)}


def _scope(tenant_id: str, body: dict[str, Any]) -> Scope:
    return Scope(tenant_id, body["agent"], body["user"])


_READERS: dict[str, Callable[[str, dict[str, Any]], Change]] = {
    "episode_vectors": lambda t, b: EpisodeVectors(_scope(t, b), b["episode"], [], []),
    "scope_changed": lambda t, b: ScopeChanged(_scope(t, b)),
    "message_retracted": lambda t, b: MessageRetracted(_scope(t, b), b["episode"]),
    "memory_vectors": lambda t, b: MemoryVectors(_scope(t, b), list(b["memories"]), []),
    "episodes_removed": lambda t, b: EpisodesRemoved([(_scope(t, b), e) for e in b["episodes"]]),
    "memories_removed": lambda t, b: MemoriesRemoved([(_scope(t, b), m) for m in b["memories"]]),
    "agent_changed": lambda t, b: AgentChanged(t, b["agent"]),
    "knowledge_vectors": lambda t, b: KnowledgeVectors(_scope(t, b), b["document"], [], []),
    "documents_removed": lambda t, b: DocumentsRemoved([(_scope(t, b), d) for d in b["documents"]]),
    "user_erased": lambda t, b: UserErased(t, b["user_hash"]),
}


def _entry(row: FeedRow) -> FeedEntry:
    try:
        return FeedEntry(row.seq, row.origin, decode(row))
    except FeedTooNew as exc:
        return FeedEntry(row.seq, row.origin, None, str(exc))
    except (ValueError, KeyError, TypeError) as exc:  # a damaged body: never skipped silently
        why = f"change feed row {row.seq} is unreadable ({type(exc).__name__})"
        return FeedEntry(row.seq, row.origin, None, why)


def _row(r: Any) -> FeedRow:
    return FeedRow(r["seq"], r["version"], r["kind"], r["tenant_id"], r["body"], r["origin"])
