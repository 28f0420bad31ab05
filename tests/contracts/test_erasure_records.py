"""The `ErasureRecords` port (what the erasure ledger's replay asks the database): which
erasures the audit table holds, every audit row in (tenant, erasure id) order, a tenant's
user ids a page at a time, and an audit row recorded alone, once."""

from __future__ import annotations

from typing import cast

from episodic.domain.erasure import Audit, user_hash
from episodic.domain.ports.users import ErasureRecords
from episodic.domain.recall import Scope
from episodic.store.erasure import SqlEraser
from tests.conftest import unique
from tests.contracts.conftest import World
from tests.contracts.test_eraser import erase
from tests.fakes import FakeEraser, FakeErasureRecords


def records_of(world: World) -> ErasureRecords:
    if world.kind == "fake":
        return FakeErasureRecords.beside(cast(FakeEraser, world.eraser))
    return cast(SqlEraser, world.eraser)


def audit(world: World, user_id: str, erasure_id: str = "") -> Audit:
    return Audit(erasure_id or unique("er"), user_hash(world.tenant, user_id), "", world.clock())


async def test_the_erasures_the_audit_table_holds_are_told_apart_from_the_others(world: World) -> None:
    records = records_of(world)
    await world.episode(user_id="u1")
    made = await erase(world, "u1")
    assert made.counts["episodes"] == 1
    (erasure_id,) = [
        e.erasure_id for e in await records.audits((world.tenant, ""), 100) if e.tenant_id == world.tenant
    ]
    asked = [(world.tenant, erasure_id), (world.tenant, "er_never"), (unique("tenant"), erasure_id)]
    assert await records.recorded(asked) == {(world.tenant, erasure_id)}
    assert await records.recorded([]) == set()


async def test_an_audit_row_is_recorded_alone_once(world: World) -> None:
    records = records_of(world)
    row = audit(world, "gone")
    assert await records.record(world.tenant, row) is True
    assert await records.record(world.tenant, row) is False
    assert await records.recorded([(world.tenant, row.erasure_id)]) == {(world.tenant, row.erasure_id)}
    (entry,) = [e for e in await records.audits((world.tenant, ""), 100) if e.tenant_id == world.tenant]
    assert (entry.erasure_id, entry.user_hash, entry.agent_id, entry.erased_at) == (
        row.erasure_id, row.user_hash, "", row.erased_at,
    )  # fmt: skip


async def test_audit_rows_come_in_tenant_and_erasure_id_order_a_page_at_a_time(world: World) -> None:
    records = records_of(world)
    ids = ["er_b", "er_a", "er_c"]
    for erasure_id in ids:
        await records.record(world.tenant, audit(world, "gone", erasure_id))
    seen, after = [], (world.tenant, "")
    while page := [e for e in await records.audits(after, 2) if e.tenant_id == world.tenant]:
        assert len(page) <= 2
        seen += [e.erasure_id for e in page]
        after = page[-1].key
    assert seen == sorted(ids)


async def test_every_user_of_the_tenant_is_walked_page_by_page_and_no_one_elses(world: World) -> None:
    records = records_of(world)
    a, b = await world.agent(), await world.agent()
    for agent, user in ((a, "u1"), (a, "u2"), (b, "u1"), (b, "u3")):
        await world.episode(agent, user)
    await world.remember(world.memory(Scope(world.tenant, a.agent_id, "memories-only")))
    elsewhere = await world.agent(tenant_id=unique("tenant"))
    await world.episode(elsewhere, "stranger")
    found: list[str] = []
    cursor, pages = "", 0
    while True:
        users, cursor = await records.user_page(world.tenant, cursor, 2)
        assert len(users) <= 2
        found += users
        pages += 1
        if not cursor:
            break
        assert pages < 20, "the walk does not end"
    assert set(found) == {"u1", "u2", "u3", "memories-only"}
