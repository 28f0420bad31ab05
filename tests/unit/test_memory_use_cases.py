"""Memory use cases over the fakes: promotion at close (idempotent), extraction with source
seqs, the change owner keeping the memory index in step (and its rebuild from storage),
PII redaction before storage, expiry and retention, the [Known Facts] section."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from episodic.domain.agents import MemoryDraft as AgentMemory
from episodic.domain.memories import MemoryKind, MemoryState, Outcome, Placement
from episodic.domain.memory_rules import CreateRequest, MemoryDraft
from episodic.domain.model import PiiPolicy
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import Scope, SearchMode
from episodic.errors import NotFound
from episodic.service.context import ContextRequest
from episodic.service.memory_search import MemoryQuery
from episodic.state.index_cache import ResidentScopes
from tests.fakes import FakeVectorIndex
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases

SCOPE = Scope(TENANT, "helper", "mary")


@pytest.fixture
async def uc() -> UseCases:
    cases = use_cases()
    await cases.new_agent()
    return cases


def fact(text: str, kind: MemoryKind = MemoryKind.FACT, **fields: object) -> MemoryDraft:
    return MemoryDraft(text=text, kind=kind, **fields)  # type: ignore[arg-type]


async def test_pending_memories_are_promoted_with_extracted_ones_when_the_episode_closes(
    uc: UseCases,
) -> None:
    episode = await uc.open()
    (pending,) = await uc.memories.create(
        CALLER, CreateRequest([fact("Mary wants a quiet room")], episode_id=episode)
    )
    assert pending.memory.state is MemoryState.PENDING and uc.memory_index.keys(SCOPE) == set()
    await uc.say(episode, "I live in Lisbon and I love surfing.", "Nice!")
    await uc.close(episode)
    assert await uc.digester.run_once() == 1
    stored = await uc.memory_store.page(SCOPE, MemoryFilter(), uc.clock(), None, 100)
    assert {m.state for m in stored} == {MemoryState.PROMOTED}
    extracted = [m for m in stored if m.memory_id != pending.memory.memory_id]
    assert extracted and all(m.source.episode_id == episode and m.source.from_seq == 1 for m in extracted)
    assert uc.memory_index.keys(SCOPE) == {m.memory_id for m in stored}

    again = await uc.memories.promote_closed((await uc.digest_store.get(TENANT, episode)), [])  # type: ignore[arg-type]
    assert again == 0  # nothing pending any more; extraction of nothing writes nothing
    assert len(await uc.memory_store.page(SCOPE, MemoryFilter(), uc.clock(), None, 100)) == len(stored)


async def test_an_agent_can_turn_extraction_off(uc: UseCases) -> None:
    await uc.new_agent("quiet", AgentMemory(extract_memories=False))
    episode = await uc.open("quiet")
    await uc.say(episode, "I live in Lisbon and I love surfing.", "Nice!")
    await uc.close(episode)
    await uc.digester.run_once()
    assert (
        await uc.memory_store.page(Scope(TENANT, "quiet", "mary"), MemoryFilter(), uc.clock(), None, 10) == []
    )


async def test_the_memory_index_is_rebuilt_from_storage_after_a_crash_between_sql_and_index(
    uc: UseCases,
) -> None:
    made = await uc.memories.create(CALLER, CreateRequest([fact("Mary plays the cello")], "helper", "mary"))
    restarted = ResidentScopes(
        FakeVectorIndex(), uc.memory_store, dimension=64, max_bytes=1 << 20, lock=asyncio.Lock()
    )
    await restarted.ensure(SCOPE)  # a new process loads the scope from storage on first use
    assert restarted.keys(SCOPE) == {made[0].memory.memory_id}


async def test_a_redacting_agent_stores_and_embeds_memories_without_personal_data(uc: UseCases) -> None:
    await uc.new_agent("private", AgentMemory(pii_policy=PiiPolicy.REDACT))
    request = CreateRequest([fact("Mary's email is mary@example.com")], "private", "mary")
    (made,) = await uc.memories.create(CALLER, request)
    assert "mary@example.com" not in made.memory.text and "[EMAIL]" in made.memory.text


async def test_memories_expire_and_unused_ones_go_after_the_agents_retention(uc: UseCases) -> None:
    await uc.new_agent("brief", AgentMemory(retention_days=1))
    soon = uc.clock() + timedelta(hours=1)
    await uc.memories.create(CALLER, CreateRequest([fact("Expires soon", expires_at=soon)], "helper", "mary"))
    await uc.memories.create(CALLER, CreateRequest([fact("Unused for a while")], "brief", "mary"))
    kept = await uc.memories.create(CALLER, CreateRequest([fact("Kept forever")], "helper", "mary"))
    uc.clock.advance(timedelta(days=2))
    await uc.retention.sweep()
    left = await uc.memory_store.page(SCOPE, MemoryFilter(), uc.clock(), None, 10)
    assert [m.memory_id for m in left] == [kept[0].memory.memory_id]
    assert (
        await uc.memory_store.page(Scope(TENANT, "brief", "mary"), MemoryFilter(), uc.clock(), None, 10) == []
    )
    assert uc.memory_index.keys(SCOPE) == {kept[0].memory.memory_id}


async def test_deleting_a_memory_takes_its_vector_out_of_the_index(uc: UseCases) -> None:
    (made,) = await uc.memories.create(CALLER, CreateRequest([fact("Mary sails")], "helper", "mary"))
    await uc.memories.delete(CALLER, made.memory.memory_id)
    assert uc.memory_index.keys(SCOPE) == set()


async def test_a_repeat_within_one_batch_merges_into_the_first(uc: UseCases) -> None:
    made = await uc.memories.create(
        CALLER,
        CreateRequest([fact("Mary sails"), fact("mary sails.")], "helper", "mary", placement=Placement.EAGER),
    )
    assert [m.outcome for m in made] == [Outcome.CREATED, Outcome.MERGED]
    assert made[1].memory.memory_id == made[0].memory.memory_id


async def test_search_filters_by_kind_and_reports_its_signals(uc: UseCases) -> None:
    request = CreateRequest(
        [
            fact("Mary likes jazz", MemoryKind.PREFERENCE),
            fact("Mary went to a jazz concert", MemoryKind.EVENT),
        ],
        "helper",
        "mary",
    )
    await uc.memories.create(CALLER, request)
    query = MemoryQuery(
        "helper",
        "mary",
        SearchMode.HYBRID,
        "jazz",
        5,
        None,
        MemoryFilter(kinds=frozenset({MemoryKind.EVENT})),
    )
    (hit,) = await uc.memory_search.search(CALLER, query)
    assert hit.memory.kind is MemoryKind.EVENT and hit.signals


async def test_known_facts_come_first_and_can_be_turned_off_per_request(uc: UseCases) -> None:
    await uc.memories.create(CALLER, CreateRequest([fact("Mary is vegetarian")], "helper", "mary"))
    episode = await uc.open()
    call, _ = await uc.context.build(CALLER, ContextRequest(episode, user_message="is Mary vegetarian?"))
    assert "[Known Facts]" in call.messages[1].content and "vegetarian" in call.messages[1].content
    assert [m.rendered for m in call.report.memories] == [True]
    off = ContextRequest(episode, user_message="is Mary vegetarian?", memory=AgentMemory(known_facts=False))
    call, _ = await uc.context.build(CALLER, off)
    assert not any("[Known Facts]" in m.content for m in call.messages) and call.report.memories == ()


async def test_an_erasure_between_close_and_promotion_leaves_no_memory_behind(uc: UseCases) -> None:
    episode = await uc.open()
    await uc.memories.create(CALLER, CreateRequest([fact("Mary wants a quiet room")], episode_id=episode))
    await uc.say(episode, "I live in Lisbon and I love surfing.", "Nice!")
    await uc.close(episode)
    digest = await uc.digest_store.get(TENANT, episode)
    transcript = await uc.digest_store.transcript(digest)  # type: ignore[arg-type]
    await uc.erasure.erase_user(CALLER, "mary")
    with pytest.raises(NotFound):
        await uc.memories.promote_closed(digest, transcript)  # type: ignore[arg-type]
    assert await uc.memory_store.page(SCOPE, MemoryFilter(), uc.clock(), None, 10) == []
    assert uc.memory_index.keys(SCOPE) == set()


async def test_an_expired_memorys_client_id_is_free_before_the_sweep(uc: UseCases) -> None:
    soon = uc.clock() + timedelta(minutes=5)
    request = CreateRequest([fact("Mary is in Oslo", memory_id="where", expires_at=soon)], "helper", "mary")
    (_first,) = await uc.memories.create(CALLER, request)
    uc.clock.advance(timedelta(minutes=10))  # expired; the retention sweep has not run
    with pytest.raises(NotFound):
        await uc.memories.get(CALLER, "where")
    again = CreateRequest([fact("Mary is in Rome", memory_id="where")], "helper", "mary")
    (second,) = await uc.memories.create(CALLER, again)
    assert second.outcome is Outcome.CREATED and second.memory.text == "Mary is in Rome"
    assert uc.memory_index.keys(SCOPE) == {"where"}
    assert (await uc.memories.get(CALLER, "where")).text == "Mary is in Rome"
