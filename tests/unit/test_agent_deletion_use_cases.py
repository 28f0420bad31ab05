"""ListUsers and DeleteAgent over in-memory fakes: the users of an agent a page at a time,
with their counts; an agent deleted at once when it holds nothing, refused while it holds
data, and erased through EraseUser's own path (ledger, audit, index, caches) when asked."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from episodic.domain.knowledge import DocumentDraft
from episodic.domain.memories import Memory, MemoryKind, MemoryOrigin, MemoryState, Source
from episodic.domain.model import Caller
from episodic.domain.recall import SearchMode
from episodic.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from episodic.service.agent_deletion import AgentDeletion
from episodic.service.knowledge import KnowledgeQuery
from tests.fakes import FakeErasureLedger, StoredMemory
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases

RESTRICTED = Caller(TENANT, agents=frozenset({"other"}))


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent()
    return built


def remember(app: UseCases, user_id: str, agent_id: str = "helper") -> Memory:
    at = app.clock()
    memory = Memory(
        TENANT, f"mem_{user_id}_{len(app.tables.memories)}", agent_id, user_id, f"{user_id} likes tea",
        MemoryKind.FACT, Source(MemoryOrigin.CLIENT), MemoryState.PROMOTED, at, at,
    )  # fmt: skip
    app.tables.memories[(TENANT, memory.memory_id)] = StoredMemory(memory)
    return memory


def deletion(app: UseCases, ledger: FakeErasureLedger) -> AgentDeletion:
    d = app.services.agent_deletion
    return dataclasses.replace(d, erasure=dataclasses.replace(d.erasure, ledger=ledger))


async def test_users_are_listed_a_page_at_a_time_with_their_counts(app: UseCases) -> None:
    users = app.services.users
    for user in ("carol", "alice", "bob"):
        await app.close(await app.open(user_id=user))
        app.clock.advance(timedelta(seconds=1))
    still_open = await app.open(user_id="alice")
    remember(app, "dave")
    first = await users.list_users(CALLER, "helper", 2, "")
    assert [(u.user_id, u.episodes, u.open_episodes, u.memories) for u in first.items] == [
        ("alice", 2, 1, 0),
        ("bob", 1, 0, 0),
    ]
    rest = await users.list_users(CALLER, "helper", 2, first.next_token)
    assert [(u.user_id, u.episodes, u.memories) for u in rest.items] == [("carol", 1, 0), ("dave", 0, 1)]
    assert rest.next_token == ""
    assert (
        first.items[0].last_activity_at
        == (await app.episodes.get_episode(CALLER, still_open)).last_activity_at
    )


async def test_listing_users_checks_its_request_the_key_and_the_agent(app: UseCases) -> None:
    users = app.services.users
    with pytest.raises(InvalidArgument) as bad:
        await users.list_users(CALLER, "", -1, "")
    assert {v.field for v in bad.value.violations} == {"agent_id", "page_size"}
    with pytest.raises(PermissionDenied):
        await users.list_users(RESTRICTED, "helper", 10, "")
    with pytest.raises(NotFound):
        await users.list_users(CALLER, "nobody", 10, "")
    await app.new_agent("other")
    await app.open(user_id="mary")
    await app.open(user_id="john")
    page = await users.list_users(CALLER, "helper", 1, "")
    with pytest.raises(InvalidArgument) as foreign:  # a token of another agent's listing
        await users.list_users(CALLER, "other", 1, page.next_token)
    assert [v.field for v in foreign.value.violations] == ["page_token"]


async def test_an_agent_that_holds_nothing_is_deleted_at_once(app: UseCases) -> None:
    receipt = await app.services.agent_deletion.delete_agent(CALLER, "helper", erase_data=False)
    assert (receipt.agent_id, receipt.users, receipt.erasure_ids) == ("helper", 0, [])
    assert set(receipt.counts.values()) == {0}
    with pytest.raises(NotFound):
        await app.agents.get_agent(CALLER, "helper")
    with pytest.raises(NotFound):
        await app.services.agent_deletion.delete_agent(CALLER, "helper", erase_data=True)


async def test_an_agent_that_holds_data_is_refused_saying_what_and_how(app: UseCases) -> None:
    await app.open(user_id="mary")
    remember(app, "john")
    with pytest.raises(FailedPrecondition) as refused:
        await app.services.agent_deletion.delete_agent(CALLER, "helper", erase_data=False)
    assert refused.value.reason == "AGENT_HOLDS_DATA"
    assert "2 user(s)" in refused.value.message and "erase_data=true" in refused.value.message
    assert (await app.agents.get_agent(CALLER, "helper")).agent_id == "helper"
    assert len(app.tables.episodes) == 1 and len(app.tables.memories) == 1


async def test_erasing_an_agent_erases_each_user_through_the_ledger_then_deletes_it(app: UseCases) -> None:
    await app.remembered("ep_kyoto", "We booked a ryokan in Kyoto.", "Enjoy the temples.", user_id="mary")
    await app.open(user_id="john", episode_id="ep_john")
    remember(app, "zoe")
    await app.new_agent("other")
    kept = await app.open(agent_id="other", user_id="mary", episode_id="ep_kept")
    await app.knowledge.create(CALLER, "helper", [DocumentDraft("care", "# Care\n\nBasil likes sun.")])
    ledger = FakeErasureLedger()
    receipt = await deletion(app, ledger).delete_agent(CALLER, "helper", erase_data=True)
    assert receipt.users == 3 and len(set(receipt.erasure_ids)) == 3
    assert receipt.counts["episodes"] == 2 and receipt.counts["memories"] >= 1
    assert receipt.counts["documents"] == 1 and receipt.index_vectors >= 1
    assert [e.erasure_id for e in ledger.entries] == receipt.erasure_ids  # each intent, before it ran
    assert {e.agent_id for e in ledger.entries} == {"helper"}
    assert {a.erasure_id for _, a, _ in app.tables.erasures} == set(receipt.erasure_ids)
    assert [e.episode_id for e in app.tables.episodes.values()] == [kept]
    assert all(s.memory.agent_id != "helper" for s in app.tables.memories.values())
    assert not app.tables.documents
    with pytest.raises(NotFound):
        await app.agents.get_agent(CALLER, "helper")
    with pytest.raises(NotFound):  # the knowledge service does not remember it existed
        await app.knowledge.search(CALLER, KnowledgeQuery("helper", SearchMode.HYBRID, "basil"))


async def test_a_restricted_key_deletes_only_its_agents_and_a_read_only_one_no_documents(
    app: UseCases,
) -> None:
    with pytest.raises(PermissionDenied):
        await app.services.agent_deletion.delete_agent(RESTRICTED, "helper", erase_data=True)
    await app.knowledge.create(CALLER, "helper", [DocumentDraft("care", "# Care\n\nBasil likes sun.")])
    await app.open(user_id="mary")
    reader = Caller(TENANT, writes_knowledge=False)
    with pytest.raises(PermissionDenied) as refused:
        await app.services.agent_deletion.delete_agent(reader, "helper", erase_data=True)
    assert refused.value.reason == "KNOWLEDGE_READ_ONLY"
    assert len(app.tables.episodes) == 1  # refused before anything was erased


async def test_the_freed_space_is_scrubbed_once_for_every_user(app: UseCases) -> None:
    for user in ("mary", "john", "zoe"):
        await app.open(user_id=user, episode_id=f"ep_{user}")
    app.eraser.scrubs.clear()
    receipt = await app.services.agent_deletion.delete_agent(CALLER, "helper", erase_data=True)
    assert app.eraser.scrubs == [{k: receipt.counts[k] for k in app.eraser.scrubs[0]}]
    assert app.eraser.scrubs[0]["episodes"] == 3 and receipt.storage_scrubbed


class WritesMeanwhile:
    """The agent store, with a user's episode opened for the agent just before its deletion."""

    def __init__(self, app: UseCases) -> None:
        self._app = app
        self._store = app.agent_store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def delete_agent(self, tenant_id: str, agent_id: str, declared: Any) -> Any:
        await self._app.open(user_id="late", episode_id="ep_late")
        return await self._store.delete_agent(tenant_id, agent_id, declared)


async def test_data_written_during_the_deletion_refuses_its_last_step(app: UseCases) -> None:
    await app.open(user_id="mary", episode_id="ep_mary")
    racing = dataclasses.replace(app.services.agent_deletion, agents=WritesMeanwhile(app))
    with pytest.raises(FailedPrecondition) as refused:
        await racing.delete_agent(CALLER, "helper", erase_data=True)
    assert refused.value.reason == "AGENT_HOLDS_DATA" and "call DeleteAgent again" in refused.value.message
    assert [e.user_id for e in app.tables.episodes.values()] == ["late"]  # mary was erased, scrubbed
    assert app.eraser.scrubs and app.eraser.scrubs[-1]["episodes"] == 1
    assert (await app.agents.get_agent(CALLER, "helper")).agent_id == "helper"
    again = await app.services.agent_deletion.delete_agent(CALLER, "helper", erase_data=True)
    assert again.users == 1 and not app.tables.episodes
