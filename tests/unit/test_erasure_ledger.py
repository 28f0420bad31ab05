"""The erasure ledger over in-memory fakes: EraseUser writes its intent to the ledger before
anything is erased (and erases nothing when it cannot), and the replay at start erases again,
through the erase path, every user the ledger names and the database has not recorded: what
a restore of an older backup would otherwise bring back."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodic.domain.erasure import user_hash
from episodic.domain.erasure_ledger import LedgerEntry, UnreadableEntry
from episodic.domain.recall import Scope
from episodic.errors import Unavailable
from episodic.service.erasure import EraseService
from episodic.service.erasure_replay import ErasureReplay
from tests.fakes import FakeErasureLedger, FakeErasureRecords
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases

KYOTO = ("We booked a ryokan in Kyoto for the cherry blossoms.", "Enjoy the temples.")
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent()
    return built


def with_ledger(app: UseCases, ledger: FakeErasureLedger) -> EraseService:
    return dataclasses.replace(app.erasure, ledger=ledger)


def replay(app: UseCases, ledger: FakeErasureLedger, batch: int = 1000) -> ErasureReplay:
    records = FakeErasureRecords(app.tables)
    return ErasureReplay(ledger=ledger, records=records, erasure=with_ledger(app, ledger), batch=batch)


def erased_after_the_backup(user_id: str, agent_id: str = "", erasure_id: str = "er_later") -> LedgerEntry:
    """An erasure the ledger holds and the (restored) database does not."""
    return LedgerEntry(erasure_id, TENANT, user_hash(TENANT, user_id), agent_id, WHEN)


def users_with_rows(app: UseCases) -> set[str]:
    return {e.user_id for e in app.tables.episodes.values()} | {
        s.memory.user_id for s in app.tables.memories.values()
    }


def audited(app: UseCases) -> dict[str, str]:
    """erasure id -> user hash, of the audit rows."""
    return {audit.erasure_id: audit.user_hash for _, audit, _ in app.tables.erasures}


class WatchingLedger(FakeErasureLedger):
    """Notes, at each append, whether the user's episode was still there."""

    def __init__(self, app: UseCases) -> None:
        super().__init__()
        self.app = app
        self.episode_there: list[bool] = []

    async def append(self, entries: Sequence[LedgerEntry]) -> None:
        self.episode_there.append((TENANT, "kyoto") in self.app.tables.episodes)
        await super().append(entries)


async def test_an_erasure_is_in_the_ledger_by_hash_before_the_database_erases(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)
    ledger = WatchingLedger(app)
    receipt = await with_ledger(app, ledger).erase_user(CALLER, "mary", agent_id="helper")
    (entry,) = ledger.entries
    assert ledger.episode_there == [True]  # written while everything was still there
    assert (entry.erasure_id, entry.tenant_id, entry.agent_id) == (receipt.erasure_id, TENANT, "helper")
    assert entry.user_hash == user_hash(TENANT, "mary") and "mary" not in entry.line()
    assert (TENANT, "kyoto") not in app.tables.episodes


async def test_a_ledger_that_cannot_be_written_fails_the_erasure_unavailable_and_erases_nothing(
    app: UseCases,
) -> None:
    await app.remembered("kyoto", *KYOTO)
    memories = len(app.tables.memories)
    with pytest.raises(Unavailable) as raised:
        await with_ledger(app, FakeErasureLedger(broken=True)).erase_user(CALLER, "mary")
    assert raised.value.reason == "ERASURE_LEDGER_UNAVAILABLE"
    assert (TENANT, "kyoto") in app.tables.episodes and len(app.tables.memories) == memories
    assert app.tables.erasures == [] and app.index.keys(Scope(TENANT, "helper", "mary"))


async def test_the_replay_erases_again_a_user_erased_after_the_backup_and_records_the_audit(
    app: UseCases,
) -> None:
    await app.remembered("kyoto", *KYOTO)
    await app.remembered("other", *KYOTO, user_id="john")
    ledger = FakeErasureLedger(erased_after_the_backup("mary"))
    report = await replay(app, ledger).run()
    assert (report.entries, report.pending, report.users, report.nothing_left) == (1, 1, 1, 0)
    assert report.counts["episodes"] == 1 and report.counts["memories"] >= 1
    assert users_with_rows(app) == {"john"}
    assert not app.index.keys(Scope(TENANT, "helper", "mary"))  # the vectors went with the rows
    assert audited(app) == {"er_later": user_hash(TENANT, "mary")}  # the ledger's id: not replayed again
    again = await replay(app, ledger).run()
    assert (again.pending, again.users) == (0, 0)


async def test_an_erasure_whose_user_has_nothing_left_gets_its_audit_row_alone(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)
    report = await replay(app, FakeErasureLedger(erased_after_the_backup("nobody"))).run()
    assert (report.pending, report.users, report.nothing_left) == (1, 0, 1)
    assert users_with_rows(app) == {"mary"} and "er_later" in audited(app)


async def test_an_erasure_in_one_agent_is_replayed_in_that_agent_only(app: UseCases) -> None:
    await app.new_agent("other")
    await app.open(agent_id="other", user_id="mary", episode_id="elsewhere")
    await app.remembered("kyoto", *KYOTO)
    await replay(app, FakeErasureLedger(erased_after_the_backup("mary", agent_id="helper"))).run()
    assert (TENANT, "kyoto") not in app.tables.episodes
    assert app.tables.episodes[(TENANT, "elsewhere")].user_id == "mary"


async def test_the_users_are_walked_a_page_at_a_time_until_every_hash_is_found(app: UseCases) -> None:
    for n in range(7):
        await app.open(user_id=f"user-{n}", episode_id=f"ep-{n}")
    entries = [erased_after_the_backup(f"user-{n}", erasure_id=f"er_{n}") for n in (1, 5)]
    report = await replay(app, FakeErasureLedger(*entries), batch=2).run()
    assert report.users == 2 and users_with_rows(app) == {f"user-{n}" for n in (0, 2, 3, 4, 6)}


async def test_the_replay_adds_to_the_ledger_the_erasures_only_the_database_recorded(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)
    before_the_ledger = await app.erasure.erase_user(CALLER, "mary")  # no ledger yet
    ledger = FakeErasureLedger(erased_after_the_backup("nobody"))
    report = await replay(app, ledger).run()
    assert report.adopted == 1
    assert [e.erasure_id for e in ledger.entries] == ["er_later", before_the_ledger.erasure_id]
    assert (await replay(app, ledger).run()).adopted == 0


async def test_entries_appended_twice_are_replayed_once(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)
    entry = erased_after_the_backup("mary")
    report = await replay(app, FakeErasureLedger(entry, entry)).run()
    assert (report.entries, report.pending, report.users) == (2, 1, 1)


ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)


@settings(max_examples=25, deadline=None)
@given(erasure_id=ids, tenant_id=ids, agent_id=st.one_of(st.just(""), ids), seconds=st.integers(0, 10**9))
def test_an_entry_reads_back_as_written(erasure_id: str, tenant_id: str, agent_id: str, seconds: int) -> None:
    at = datetime.fromtimestamp(seconds, UTC)
    entry = LedgerEntry(erasure_id, tenant_id, user_hash(tenant_id, "u"), agent_id, at)
    line = entry.line()
    assert line.endswith("\n") and line.count("\n") == 1
    assert LedgerEntry.parse(line) == entry


@pytest.mark.parametrize(
    "line",
    [
        '{"erasure_id":"er_1","tenant_id":"acme","user_hash":"ab","agent_id":"","erased_at":"2026-0',  # torn
        "not json at all",
        '["a list"]',
        '{"erasure_id":"er_1","tenant_id":"acme","user_hash":"ab","agent_id":"","erased_at":"2026-03-01T12:00:00"}',
        '{"erasure_id":"","tenant_id":"acme","user_hash":"ab","agent_id":"","erased_at":"2026-03-01T12:00:00+00:00"}',
    ],
    ids=["torn", "not-json", "not-an-object", "naive-time", "empty-id"],
)
def test_a_line_that_is_no_entry_is_refused_naming_why(line: str) -> None:
    with pytest.raises(UnreadableEntry):
        LedgerEntry.parse(line)
