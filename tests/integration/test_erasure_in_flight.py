"""An erasure wins over a write of the same user in flight (issue 43 finding 3), on SQLite
and PostgreSQL: a write whose work began before the erasure committed and that would
commit after it is refused (CreateMemories, an import's memories: ABORTED, USER_ERASED) or
is ordered before it and erased with the rest (a memory tied to an episode: the digester's
promotion, live extraction). The races are ordered by hooks, never by timing: the erasure
runs inside the write's embedding (the last step before its transaction), or, on
PostgreSQL, while the write's transaction is open and has not committed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, func, select, text

from episodic.domain.changes import NO_CHANGES, Declared
from episodic.domain.erasure import Audit, user_hash
from episodic.domain.memories import Memory, MemoryKind, MemoryOrigin, MemoryState, Source
from episodic.domain.memory_rules import CreateRequest, MemoryDraft, SessionUpdate, merged_session
from episodic.domain.model import Message, NewMessage, Role
from episodic.domain.ports.memories import MemoryWrite
from episodic.domain.recall import Digest, Vector
from episodic.errors import Aborted, NotFound
from episodic.service.memories import MemoryService
from episodic.service.transfer import Chunk
from episodic.store import schema as s
from episodic.store.episodes import SqlEpisodeStore
from episodic.store.erasure import SqlEraser
from episodic.store.memories import SqlMemoryStore
from episodic.store.session_data import SqlSessionDataStore
from episodic.store.writer import GroupCommitWriter
from tests.conftest import unique
from tests.integration.conftest import Stack


class ErasingEmbeddings:
    """The `TenantEmbeddings` port: the first bulk call runs `erase` (the erasure lands
    while the write is embedding, after every check made before its transaction), then
    embeds as the server does."""

    def __init__(self, memories: MemoryService, erase: Callable[[], Any]) -> None:
        self._served = memories.embeddings
        self._erase = erase
        self.erased = False

    async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        return await self._served.query(tenant_id, texts)

    async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]:
        if not self.erased:
            self.erased = True
            await self._erase()
        return await self._served.bulk(tenant_id, texts)


async def memories_of(stack: Stack, user: str) -> int:
    m = s.memories
    stmt = select(func.count()).where(m.c.tenant_id == stack.caller.tenant_id, m.c.user_id == user)
    return int(await stack.database.read(lambda conn: conn.execute(stmt).scalar_one()))


def fact(text: str) -> MemoryDraft:
    return MemoryDraft(text=text, kind=MemoryKind.FACT)


async def test_create_memories_in_flight_when_the_user_is_erased_is_refused(stack: Stack) -> None:
    agent, user = await stack.new_agent(), unique("mary")
    memories = stack.services.memories
    hook = ErasingEmbeddings(memories, lambda: stack.services.erasure.erase_user(stack.caller, user))
    memories.embeddings = hook
    with pytest.raises(Aborted) as refused:
        await memories.create(stack.caller, CreateRequest([fact("Mary lives in Porto")], agent, user))
    assert refused.value.reason == "USER_ERASED" and hook.erased
    assert await memories_of(stack, user) == 0, "a memory of the erased user survived its receipt"
    # begun after the erasure: a new memory of the user, written as any other
    await memories.create(stack.caller, CreateRequest([fact("Mary moved to Braga")], agent, user))
    assert await memories_of(stack, user) == 1


async def test_an_import_erased_before_its_memories_part_is_written_writes_none_of_it(stack: Stack) -> None:
    transfer = stack.services.transfer
    assert transfer is not None
    agent, user = await stack.new_agent(), unique("mary")
    facts = [fact(f"Mary's note {n}: the ferry leaves at {n}:00") for n in range(3)]
    await stack.services.memories.create(stack.caller, CreateRequest(facts, agent, user, keep_separate=True))
    exported = [c async for c in transfer.export_user(stack.caller, user)]
    manifest = exported[-1].manifest
    assert manifest is not None
    await stack.services.erasure.erase_user(stack.caller, user)
    assert await memories_of(stack, user) == 0

    async def chunks() -> AsyncIterator[Chunk]:
        for chunk in exported[:-1]:
            yield chunk

    hook = ErasingEmbeddings(transfer.memories, lambda: stack.services.erasure.erase_user(stack.caller, user))
    transfer.memories.embeddings = hook
    with pytest.raises(Aborted) as refused:
        await transfer.import_user(stack.caller, manifest, user, chunks())
    assert refused.value.reason == "USER_ERASED" and hook.erased
    assert await memories_of(stack, user) == 0, "the import's memories survived the erasure"


# --- PostgreSQL: a write's transaction open while the erasure runs ----------------------


PAUSE_KEY = 4343  # an advisory lock the test holds while a write's transaction is open


class PausingWriter:
    """A writer whose transactions stop after their statements, before COMMIT, waiting on an
    advisory lock the test holds: the erasure then runs (on another writer) against a write
    in flight."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._writer = writer

    async def run(self, op: Callable[[Connection], Any], declared: Declared[Any] | None = None) -> Any:
        def paused(conn: Connection) -> Any:
            result = op(conn)
            conn.execute(text("SELECT pg_advisory_xact_lock_shared(:key)"), {"key": PAUSE_KEY})
            return result

        return await self._writer.run(paused, declared)  # type: ignore[arg-type]

    async def run_bulk(self, bulk: Any, item: object, declared: Declared[Any] | None = None) -> Any:
        return await self._writer.run_bulk(PausedBulk(bulk), item, declared)  # type: ignore[arg-type]


class PausedBulk:
    """A bulk operation (appends) whose transaction waits, as PausingWriter's, before COMMIT."""

    def __init__(self, bulk: Any) -> None:
        self._bulk = bulk

    def run_all(self, conn: Connection, items: Sequence[Any]) -> list[Any]:
        outcomes: list[Any] = self._bulk.run_all(conn, items)
        conn.execute(text("SELECT pg_advisory_xact_lock_shared(:key)"), {"key": PAUSE_KEY})
        return outcomes


async def test_a_memory_of_an_episode_written_while_the_user_is_erased_does_not_survive(
    stack: Stack, database_url: str
) -> None:
    """The digester's promotion (and live extraction) writes memories tied to their episode:
    the episode's row lock alone let the erasure delete the user's memories first, then wait
    for the episode, while the write committed its memory after that delete."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: the write commits before the erasure begins, or after it")
    agent, user = await stack.new_agent(), unique("mary")
    tenant = stack.caller.tenant_id
    episode, _ = await stack.services.episodes.open_episode(stack.caller, agent_id=agent, user_id=user)
    at = episode.started_at
    memory = Memory(
        tenant, unique("mem"), agent, user, "Mary lives in Porto", MemoryKind.FACT,
        Source(MemoryOrigin.EXTRACTED, episode.episode_id), MemoryState.PROMOTED, at, at,
    )  # fmt: skip
    change = MemoryWrite(insert=[(memory, None)], episode=(tenant, episode.episode_id))
    audit = Audit(unique("er"), user_hash(tenant, user), "", at)
    other = GroupCommitWriter(stack.database, workers=1)
    other.start()
    try:
        store = SqlMemoryStore(stack.database, PausingWriter(other), embedding_model="hashing")  # type: ignore[arg-type]
        async with stack.database.engine.connect() as pause:
            await pause.execute(text("SELECT pg_advisory_lock(:key)"), {"key": PAUSE_KEY})
            await pause.commit()
            writing = asyncio.ensure_future(store.write(change, NO_CHANGES))
            await sessions_waiting(stack, 1)  # the write's statements ran; it waits to commit
            erasing = asyncio.ensure_future(
                SqlEraser(stack.database, stack.writer).erase(tenant, user, "", audit, NO_CHANGES)
            )
            await sessions_waiting(stack, 2)  # the erasure has begun and waits on the write
            await pause.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": PAUSE_KEY})
            await pause.commit()
            await writing
            await erasing
    finally:
        await other.stop()
    assert await memories_of(stack, user) == 0, "a memory written during the erasure survived it"


async def sessions_waiting(stack: Stack, count: int) -> None:
    """Until `count` sessions of this database wait on a lock."""
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    for _ in range(6000):
        if await stack.database.read(lambda conn: conn.execute(waiting).scalar_one()) >= count:
            return
        await asyncio.sleep(0.01)  # polled: the outcome never depends on how long this takes
    raise AssertionError(f"{count} sessions never waited on a lock")


async def test_a_write_watching_the_user_is_refused_once_an_erasure_committed_since(stack: Stack) -> None:
    """The store's one check, without the service: a watch taken before the erasure refuses
    the write; one taken after it writes."""
    agent, user = await stack.new_agent(), unique("mary")
    tenant = stack.caller.tenant_id
    store = SqlMemoryStore(stack.database, stack.writer, embedding_model="hashing")
    before = await store.erasure_watch(tenant, user)
    await stack.services.erasure.erase_user(stack.caller, user, agent)
    at = (await stack.services.agents.get_agent(stack.caller, agent)).created_at

    def one(memory_id: str) -> list[tuple[Memory, Vector | None]]:
        m = Memory(
            tenant, memory_id, agent, user, "Mary sails", MemoryKind.FACT,
            Source(MemoryOrigin.CLIENT), MemoryState.PROMOTED, at, at,
        )  # fmt: skip
        return [(m, None)]

    with pytest.raises(Aborted) as refused:
        await store.write(MemoryWrite(insert=one("m1"), watch=before), NO_CHANGES)
    assert refused.value.reason == "USER_ERASED"
    after = await store.erasure_watch(tenant, user)
    await store.write(MemoryWrite(insert=one("m2"), watch=after), NO_CHANGES)
    assert await memories_of(stack, user) == 1


# --- the digester: an episode erased while its digest is being made ------------------


async def feed_rows_naming(stack: Stack, user: str) -> int:
    c, tenant = s.changes, stack.caller.tenant_id
    stmt = select(func.count()).where(c.c.tenant_id == tenant, c.c.user_hash == user_hash(tenant, user))
    return int(await stack.database.read(lambda conn: conn.execute(stmt).scalar_one()))


async def test_a_digest_whose_episode_is_erased_while_it_is_made_leaves_no_feed_row_of_the_user(
    fresh_stack: Stack,
) -> None:
    """The erasure lands while the digester promotes the episode's memories: the promotion
    finds its episode gone (NOT_FOUND) and the attempt fails; recording that failure wrote a
    `scope_changed` feed row naming the user after the erasure had replaced the user's rows
    with its one marker. On a database of its own: the digester's one batch must hold this
    episode's digest, not other tests' (the queue serves every tenant)."""
    stack = fresh_stack
    agent, user = await stack.new_agent(), unique("mary")
    episodes = stack.services.episodes
    episode, _ = await episodes.open_episode(stack.caller, agent_id=agent, user_id=user)
    await episodes.add_message(stack.caller, episode.episode_id, NewMessage(Role.USER, "I moved to Porto"))
    await episodes.close_episode(stack.caller, episode.episode_id)
    digester = stack.app.workers.digester
    promote = digester.promote
    assert promote is not None

    async def erasing_first(digest: Digest, transcript: Sequence[Message]) -> int:
        if digest.episode_id == episode.episode_id:
            await stack.services.erasure.erase_user(stack.caller, user)
        return await promote(digest, transcript)

    digester.promote = erasing_first
    await digester.run_once()
    assert await feed_rows_naming(stack, user) == 0, "a feed row named the erased user"
    assert await memories_of(stack, user) == 0


async def test_an_update_of_a_memory_erased_while_it_is_embedded_is_not_found_and_indexes_nothing(
    stack: Stack,
) -> None:
    """UpdateMemory with new text embeds it, then replaces the row: the row was gone (the
    user erased meanwhile), yet the update answered the memory and its new vector went to
    the index and to a feed row naming the user."""
    agent, user = await stack.new_agent(), unique("mary")
    memories = stack.services.memories
    (made,) = await memories.create(stack.caller, CreateRequest([fact("Mary lives in Porto")], agent, user))
    memories.embeddings = ErasingEmbeddings(
        memories, lambda: stack.services.erasure.erase_user(stack.caller, user)
    )
    changed = MemoryDraft(memory_id=made.memory.memory_id, text="Mary lives in Braga", kind=MemoryKind.FACT)
    with pytest.raises(NotFound):
        await memories.update(stack.caller, changed, ["text"])
    assert await memories_of(stack, user) == 0
    assert await feed_rows_naming(stack, user) == 0, "a feed row named the erased user"


class ErasingIndex:
    """The memory service's `ScopeIndex`, erasing the user at the first `ensure`: after the
    create's plan read the stored memories by text (so a repeat is planned as a merge),
    before it commits."""

    def __init__(self, index: Any, erase: Callable[[], Any]) -> None:
        self._index = index
        self._erase = erase
        self.erased = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def ensure(self, scope: Any) -> None:
        if not self.erased:
            self.erased = True
            await self._erase()
        await self._index.ensure(scope)


async def test_create_memories_that_only_merges_is_refused_too_when_the_user_is_erased_meanwhile(
    stack: Stack,
) -> None:
    """A repeat of a stored memory is a merge (a replace of its row), not an insert: the row
    the erasure deleted stays gone, and the call says ABORTED rather than MERGED."""
    agent, user = await stack.new_agent(), unique("mary")
    memories = stack.services.memories
    await memories.create(stack.caller, CreateRequest([fact("Mary lives in Porto")], agent, user))
    hook = ErasingIndex(memories.index, lambda: stack.services.erasure.erase_user(stack.caller, user))
    memories.index = hook
    with pytest.raises(Aborted) as refused:
        await memories.create(stack.caller, CreateRequest([fact("Mary lives in Porto")], agent, user))
    assert refused.value.reason == "USER_ERASED" and hook.erased
    assert await memories_of(stack, user) == 0


# --- ExportUser: the export's snapshot holds what an erasure committing meanwhile removed ---


async def test_an_export_is_aborted_by_an_erasure_that_commits_after_it_began_whatever_its_time(
    stack: Stack,
) -> None:
    """The export compared the audit's time with its own start: an erasure stamped before
    the export began (its ledger write was slow, or its replica's clock is behind) but
    committed after the export's snapshot let the whole export, erased data and manifest,
    reach the client after the erasure's receipt."""
    transfer = stack.services.transfer
    assert transfer is not None
    agent, user = await stack.new_agent(), unique("mary")
    await stack.services.memories.create(
        stack.caller, CreateRequest([fact("Mary lives in Porto")], agent, user)
    )
    stamped = (await stack.services.agents.get_agent(stack.caller, agent)).created_at  # before the export
    audit = Audit(unique("er"), user_hash(stack.caller.tenant_id, user), "", stamped)
    exporting = transfer.export_user(stack.caller, user)
    first = await anext(exporting)  # the snapshot is taken: the memory is in it
    assert first.records
    await stack.services.erasure.apply(stack.caller.tenant_id, user, audit)
    with pytest.raises(Aborted) as refused:
        async for _ in exporting:
            pass
    assert refused.value.reason == "USER_ERASED"


class ErasingReads:
    """The memory service's `MemoryStore`, erasing the user once right after the read named
    by `after` returns: the write that follows finds the rows it read gone."""

    def __init__(self, store: Any, after: str, erase: Callable[[], Any]) -> None:
        self._store = store
        self._after = after
        self._erase = erase
        self.erased = False

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name != self._after:
            return found

        async def read_then_erase(*args: Any, **kwargs: Any) -> Any:
            result = await found(*args, **kwargs)
            if not self.erased:
                self.erased = True
                await self._erase()
            return result

        return read_then_erase


async def test_a_memory_delete_or_expiry_in_flight_when_the_user_is_erased_writes_no_feed_row(
    stack: Stack,
) -> None:
    """DeleteMemory and the expiry sweep read the memories, then remove them: erased in
    between, the delete found nothing, yet declared its removal, a memories_removed feed row
    naming the user after the erasure's marker."""
    agent, user = await stack.new_agent(), unique("mary")
    memories = stack.services.memories
    (made,) = await memories.create(stack.caller, CreateRequest([fact("Mary lives in Porto")], agent, user))
    store = memories.store
    erase = lambda: stack.services.erasure.erase_user(stack.caller, user)  # noqa: E731
    hook = ErasingReads(store, "get", erase)
    memories.store = hook
    await memories.delete(stack.caller, made.memory.memory_id)
    assert hook.erased
    assert await feed_rows_naming(stack, user) == 0, "DeleteMemory wrote a feed row naming the erased user"

    memories.store = store
    past = datetime.now(UTC) - timedelta(hours=1)  # expired: the next sweep takes it
    expired = Memory(
        stack.caller.tenant_id, unique("mem"), agent, user, "Mary is in Oslo", MemoryKind.FACT,
        Source(MemoryOrigin.CLIENT), MemoryState.PROMOTED, past, past, expires_at=past,
    )  # fmt: skip
    await store.write(MemoryWrite(insert=[(expired, None)]), NO_CHANGES)
    memories.store = ErasingReads(store, "expired", erase)
    await memories.remove_expired()
    assert await feed_rows_naming(stack, user) == 0, (
        "the expiry sweep wrote a feed row naming the erased user"
    )
    assert await memories_of(stack, user) == 0


@pytest.mark.parametrize("first_write", [True, False], ids=["first", "later"])
async def test_session_data_written_while_the_user_is_erased_does_not_survive(
    stack: Stack, database_url: str, first_write: bool
) -> None:
    """Checked, not changed: session data belongs to its episode (a foreign key that
    cascades), and its write locks the episode row (the first) or its own row (a later one),
    so the erasure, waiting on that lock, deletes what the write commits."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: the write commits before the erasure begins, or after it")
    agent, user = await stack.new_agent(), unique("mary")
    tenant = stack.caller.tenant_id
    episode, _ = await stack.services.episodes.open_episode(stack.caller, agent_id=agent, user_id=user)
    now = episode.started_at
    sessions = SqlSessionDataStore(stack.database, stack.writer, lambda: now)
    update = SessionUpdate(episode.episode_id, {"city": "Porto"})
    if not first_write:
        await sessions.update(
            tenant, episode.episode_id, lambda current: merged_session(current, update, now)
        )
    audit = Audit(unique("er"), user_hash(tenant, user), "", now)
    other = GroupCommitWriter(stack.database, workers=1)
    other.start()
    try:
        paused = SqlSessionDataStore(stack.database, PausingWriter(other), lambda: now)  # type: ignore[arg-type]
        async with stack.database.engine.connect() as pause:
            await pause.execute(text("SELECT pg_advisory_lock(:key)"), {"key": PAUSE_KEY})
            await pause.commit()
            writing = asyncio.ensure_future(
                paused.update(
                    tenant, episode.episode_id, lambda current: merged_session(current, update, now)
                )
            )
            await sessions_waiting(stack, 1)
            erasing = asyncio.ensure_future(
                SqlEraser(stack.database, stack.writer).erase(tenant, user, "", audit, NO_CHANGES)
            )
            await sessions_waiting(stack, 2)
            await pause.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": PAUSE_KEY})
            await pause.commit()
            await writing
            await erasing
    finally:
        await other.stop()
    sd = s.session_data
    stmt = select(func.count()).where(sd.c.tenant_id == tenant, sd.c.episode_id == episode.episode_id)
    assert await stack.database.read(lambda conn: conn.execute(stmt).scalar_one()) == 0


async def test_add_messages_in_flight_when_the_user_is_erased_leave_nothing(
    stack: Stack, database_url: str
) -> None:
    """Checked, not changed: an append locks its episode row, so the erasure, waiting on
    it, deletes the episode with the messages the append committed (they cascade)."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: the write commits before the erasure begins, or after it")
    agent, user = await stack.new_agent(), unique("mary")
    tenant = stack.caller.tenant_id
    episodes = stack.services.episodes
    episode, _ = await episodes.open_episode(stack.caller, agent_id=agent, user_id=user)
    audit = Audit(unique("er"), user_hash(tenant, user), "", episode.started_at)
    other = GroupCommitWriter(stack.database, workers=1)
    other.start()
    held = episodes.episodes
    try:
        episodes.episodes = SqlEpisodeStore(stack.database, PausingWriter(other), lambda: episode.started_at)  # type: ignore[arg-type]
        async with stack.database.engine.connect() as pause:
            await pause.execute(text("SELECT pg_advisory_lock(:key)"), {"key": PAUSE_KEY})
            await pause.commit()
            writing = asyncio.ensure_future(
                episodes.add_message(
                    stack.caller, episode.episode_id, NewMessage(Role.USER, "I live in Porto")
                )
            )
            await sessions_waiting(stack, 1)
            erasing = asyncio.ensure_future(
                SqlEraser(stack.database, stack.writer).erase(tenant, user, "", audit, NO_CHANGES)
            )
            await sessions_waiting(stack, 2)
            await pause.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": PAUSE_KEY})
            await pause.commit()
            await writing
            await erasing
    finally:
        episodes.episodes = held
        await other.stop()
    m = s.messages
    stmt = select(func.count()).where(m.c.tenant_id == tenant, m.c.episode_id == episode.episode_id)
    assert await stack.database.read(lambda conn: conn.execute(stmt).scalar_one()) == 0
