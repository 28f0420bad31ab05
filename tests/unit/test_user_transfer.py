"""ExportUser / ImportUser's use case over a fake store: parts and hashes as the manifest
says, an erasure during the export ends it ABORTED before the manifest, and an import refuses
a part out of order or unlike its manifest entry before writing it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from episodic.domain.changes import Declared, Recorded
from episodic.domain.memories import Memory
from episodic.domain.model import Caller
from episodic.domain.transfer import (
    MAX_PART_BYTES,
    EpisodeImported,
    EpisodeRows,
    ErasureWatch,
    Manifest,
    Part,
    PartHasher,
)
from episodic.domain.validation import Limits
from episodic.errors import Aborted, InvalidArgument
from episodic.service.memories import MemoryService
from episodic.service.transfer import Chunk, TransferService
from tests.fakes import FixedClock, WordTokenCounter

NOW = datetime(2026, 11, 28, tzinfo=UTC)
RECORDS: list[tuple[str, dict[str, object]]] = [
    ("episode", {"type": "episode", "episode_id": "e1"}),
    ("message", {"type": "message", "episode_id": "e1", "seq": 1}),
    ("episode", {"type": "episode", "episode_id": "e2"}),
    ("memory", {"type": "memory", "memory_id": "m1"}),
]


class ScriptedTransfer:
    """Exports RECORDS; says the user was erased after the `erased_after`-th check."""

    def __init__(self, erased_after: int = 10**9) -> None:
        self.checks = 0
        self.erased_after = erased_after
        self.written: list[str] = []
        self.records = RECORDS

    async def export(
        self, tenant_id: str, user_id: str, agent_ids: Sequence[str] | None
    ) -> AsyncIterator[tuple[str, dict[str, object]]]:
        for kind, record in self.records:
            yield kind, dict(record)

    async def erasures_of(self, tenant_id: str, user_hash: str) -> frozenset[str]:
        """The first call is the export's (or import's) baseline; each later one a check."""
        self.checks += 1
        return frozenset({"er_meanwhile"}) if self.checks > self.erased_after + 1 else frozenset()

    def episode_rows(self, part: str, records: Sequence[Mapping[str, object]], user_id: str) -> EpisodeRows:
        return EpisodeRows({"episode_id": records[0]["episode_id"], "agent_id": "a1"})

    def memories(
        self, part: str, records: Sequence[Mapping[str, object]], tenant_id: str, user_id: str
    ) -> list[Memory]:
        return []

    async def missing_agents(self, tenant_id: str, agent_ids: Iterable[str]) -> list[str]:
        return []

    async def import_episode(
        self,
        tenant_id: str,
        rows: EpisodeRows,
        now: datetime,
        watch: ErasureWatch,
        declared: Declared[EpisodeImported],
    ) -> Recorded[EpisodeImported]:
        self.written.append(rows.episode_id)
        return cast(Recorded[EpisodeImported], None)


class InlineChanges:
    async def commit(self, write: Any, changes: Any, *, exclusive: bool = True) -> Any:
        await write(None)
        return type("Committed", (), {"result": EpisodeImported(cast(Any, None), True)})()


class Unused:
    def wake(self) -> None: ...


def service(transfer: ScriptedTransfer) -> TransferService:
    memories = cast(MemoryService, None)
    return TransferService(
        transfer=transfer, memories=memories, changes=cast(Any, InlineChanges()), digests=cast(Any, Unused()),
        clock=FixedClock(NOW), tokens=WordTokenCounter(), limits=Limits(),
    )  # fmt: skip


async def chunks(transfer: ScriptedTransfer) -> list[Chunk]:
    return [c async for c in service(transfer).export_user(Caller("t1"), "mary")]


async def test_an_export_is_one_part_per_episode_then_the_memories_with_their_hashes() -> None:
    got = await chunks(ScriptedTransfer())
    manifest = got[-1].manifest
    assert manifest is not None and manifest.user_id == "mary"
    assert [p.name for p in manifest.parts] == [
        "episodes/000001.jsonl",
        "episodes/000002.jsonl",
        "memories.jsonl",
    ]
    for part in manifest.parts:
        hasher = PartHasher(part.name)
        for chunk in got[:-1]:
            if chunk.part == part.name:
                for record in chunk.records:
                    hasher.add(record)
        assert hasher.part() == part


async def test_a_user_without_memories_still_gets_an_empty_memories_part() -> None:
    transfer = ScriptedTransfer()
    transfer.records = RECORDS[:2]
    got = await chunks(transfer)
    manifest = got[-1].manifest
    assert manifest is not None
    assert [(p.name, p.records) for p in manifest.parts] == [
        ("episodes/000001.jsonl", 2),
        ("memories.jsonl", 0),
    ]
    assert [c.part for c in got[:-1]] == ["episodes/000001.jsonl"]


async def test_an_erasure_during_the_export_ends_it_before_the_manifest() -> None:
    received: list[Chunk] = []
    with pytest.raises(Aborted) as refused:  # noqa: PT012 - reading the stream until it ends is one act
        async for chunk in service(ScriptedTransfer(erased_after=1)).export_user(Caller("t1"), "mary"):
            received.append(chunk)
    assert refused.value.reason == "USER_ERASED"
    assert received and all(c.manifest is None for c in received)


async def feed(items: list[Chunk]) -> AsyncIterator[Chunk]:
    for item in items:
        yield item


async def test_an_import_refuses_a_part_out_of_order_or_unlike_its_manifest() -> None:
    exported = await chunks(ScriptedTransfer())
    manifest = exported[-1].manifest
    assert manifest is not None
    body = exported[:-1]
    transfer = ScriptedTransfer()
    with pytest.raises(InvalidArgument, match=r"where the manifest has episodes/000001\.jsonl"):
        await service(transfer).import_user(Caller("t1"), manifest, "", feed(body[1:]))
    tampered = [Chunk(body[0].part, [r.replace("e1", "e9") for r in body[0].records]), *body[1:]]
    with pytest.raises(InvalidArgument, match=r"part episodes/000001\.jsonl does not match the manifest"):
        await service(transfer).import_user(Caller("t1"), manifest, "", feed(tampered))
    assert transfer.written == []
    newer = Manifest("mary", "", NOW, manifest.parts, version=2)
    with pytest.raises(Exception, match="format version 2"):
        await service(transfer).import_user(Caller("t1"), newer, "", feed(body))
    truncated = Manifest("mary", "", NOW, (*manifest.parts[:-1], Part("memories.jsonl", 5, "0" * 64)))
    with pytest.raises(InvalidArgument, match=r"memories\.jsonl"):
        await service(transfer).import_user(Caller("t1"), truncated, "", feed(body))


async def test_an_import_holds_a_bounded_part_whatever_the_manifest_claims() -> None:
    """A manifest naming one part of 1,200 records of 1 MiB each: refused once the part
    holds more than a part may, long before the 1,200th record is taken from the client."""
    record = "x" * (1024 * 1024)
    taken = 0

    async def requests() -> AsyncIterator[Chunk]:
        nonlocal taken
        for _ in range(1200):
            taken += 1
            yield Chunk("episodes/000001.jsonl", [record])

    manifest = Manifest(
        "mary", "", NOW, (Part("episodes/000001.jsonl", 1200, "0" * 64), Part("memories.jsonl", 0, "0" * 64))
    )
    with pytest.raises(InvalidArgument, match=r"episodes/000001\.jsonl is over .* bytes"):
        await service(ScriptedTransfer()).import_user(Caller("t1"), manifest, "", requests())
    assert taken * len(record) <= MAX_PART_BYTES + len(record)


async def test_an_import_refuses_a_part_at_its_first_record_beyond_the_manifests_count() -> None:
    manifest = Manifest(
        "mary", "", NOW, (Part("episodes/000001.jsonl", 1, "0" * 64), Part("memories.jsonl", 0, "0" * 64))
    )
    extra = [Chunk("episodes/000001.jsonl", ["{}", "{}"])]
    with pytest.raises(InvalidArgument, match="record 2: the manifest has 1 records"):
        await service(ScriptedTransfer()).import_user(Caller("t1"), manifest, "", feed(extra))
