"""Recall's per-scope digest reads are remembered between turns until the scope changes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from episodic.domain.changes import ScopeChanged
from episodic.domain.ports.episodes import ReadBatch
from episodic.domain.recall import Digest, DigestState, Hit, Scope
from episodic.state import digest_memo
from episodic.state.digest_memo import RememberedDigestReads
from episodic.state.recall_memo import ScopeVersions

SCOPE = Scope("t", "a", "u")
OTHER = Scope("t", "a", "someone-else")
NOW = datetime(2026, 5, 1, tzinfo=UTC)


def ready(episode_id: str, scope: Scope = SCOPE) -> Digest:
    return Digest(
        scope.tenant_id, episode_id, scope.agent_id, scope.user_id, DigestState.READY, NOW, NOW, NOW, NOW
    )


class CountingReads:
    def __init__(self) -> None:
        self.digests = {"e1": ready("e1"), "e2": ready("e2")}
        self.pending = 3
        self.reads: list[str] = []
        self.during_read: asyncio.Event | None = None  # set: the next read waits for it

    async def recent(
        self,
        scope: Scope,
        limit: int,
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> list[Digest]:
        return []

    async def lexical(
        self, scope: Scope, query: str, limit: int, batch: ReadBatch | None = None
    ) -> list[Hit]:
        return []

    async def pending_count(self, scope: Scope, batch: ReadBatch | None = None) -> int:
        self.reads.append("pending")
        answer = self.pending  # what the database saw when the read ran
        await self._maybe_wait()
        return answer

    async def ready_among(
        self,
        scope: Scope,
        episode_ids: Sequence[str],
        after: datetime | None,
        before: datetime | None,
        batch: ReadBatch | None = None,
    ) -> dict[str, Digest]:
        self.reads.append("ready:" + ",".join(episode_ids))
        await self._maybe_wait()
        return {e: self.digests[e] for e in episode_ids if e in self.digests}

    async def _maybe_wait(self) -> None:
        if self.during_read is not None:
            waiting, self.during_read = self.during_read, None
            await waiting.wait()


async def test_a_scopes_answers_are_read_once_until_it_changes() -> None:
    store, versions = CountingReads(), ScopeVersions()
    memo = RememberedDigestReads(store, versions)
    for _ in range(3):
        assert await memo.pending_count(SCOPE) == 3
        assert set(await memo.ready_among(SCOPE, ["e1", "e2", "gone"], None, None)) == {"e1", "e2"}
    assert store.reads == ["pending", "ready:e1,e2,gone"]
    store.pending = 4
    versions.changed(ScopeChanged(SCOPE))
    assert await memo.pending_count(SCOPE) == 4
    assert store.reads[-1] == "pending"


async def test_only_the_candidates_not_yet_known_are_read() -> None:
    store = CountingReads()
    memo = RememberedDigestReads(store, ScopeVersions())
    await memo.ready_among(SCOPE, ["e1"], None, None)
    assert set(await memo.ready_among(SCOPE, ["e1", "e2"], None, None)) == {"e1", "e2"}
    assert store.reads == ["ready:e1", "ready:e2"]


async def test_a_change_during_a_read_is_not_hidden_by_its_answer() -> None:
    store, versions = CountingReads(), ScopeVersions()
    memo = RememberedDigestReads(store, versions)
    release = store.during_read = asyncio.Event()
    reading = asyncio.create_task(memo.pending_count(SCOPE))
    await asyncio.sleep(0)  # the read has started and waits
    store.pending = 9
    versions.changed(ScopeChanged(SCOPE))  # a close commits while the count is read
    release.set()
    assert await reading == 3  # read before the change: fine for this turn, not to remember
    assert await memo.pending_count(SCOPE) == 9
    assert store.reads == ["pending", "pending"]


async def test_other_scopes_and_period_bounded_reads_go_to_the_store() -> None:
    store = CountingReads()
    memo = RememberedDigestReads(store, ScopeVersions())
    await memo.pending_count(SCOPE)
    await memo.pending_count(OTHER)
    await memo.ready_among(SCOPE, ["e1"], NOW, None)
    await memo.ready_among(SCOPE, ["e1"], NOW, None)
    assert store.reads == ["pending", "pending", "ready:e1", "ready:e1"]


async def test_an_answer_older_than_the_safety_net_is_read_again() -> None:
    store, now = CountingReads(), [0.0]
    memo = RememberedDigestReads(store, ScopeVersions(), clock=lambda: now[0])
    await memo.pending_count(SCOPE)
    now[0] = 31.0
    await memo.pending_count(SCOPE)
    assert store.reads == ["pending", "pending"]


async def test_a_full_scope_entry_starts_over_without_losing_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(digest_memo, "MAX_DIGESTS_PER_SCOPE", 2)
    store = CountingReads()
    store.digests |= {"e3": ready("e3")}
    memo = RememberedDigestReads(store, ScopeVersions())
    await memo.ready_among(SCOPE, ["e1", "e2"], None, None)
    assert set(await memo.ready_among(SCOPE, ["e1", "e2", "e3"], None, None)) == {"e1", "e2", "e3"}
