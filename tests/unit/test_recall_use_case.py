"""RecallService, the digester, erasure, retention and CheckIndex over in-memory fakes:
what the index holds and what search finds after each of them, as the integration and
e2e layers check them over a database, in milliseconds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from episodic.domain.agents import MemoryDraft
from episodic.domain.model import Caller, NewMessage, Role
from episodic.domain.recall import DigestState, Scope, SearchMode, Signal
from episodic.errors import InvalidArgument, NotFound, PermissionDenied
from episodic.service.context import ContextRequest
from episodic.service.recall import SearchRequest
from tests.unit.use_cases import CALLER, TENANT, Settings, UseCases, use_cases

MARY = Scope(TENANT, "helper", "mary")
KYOTO = ("We booked a ryokan in Kyoto for the cherry blossoms.", "Enjoy the temples.")
PAY = ("My salary payment is late this month.", "I will ask payroll.")
BIKE = ("I want to rent a bike in Amsterdam.", "Try the shop near the station.")


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent()
    return built


async def three_past_conversations(app: UseCases) -> list[str]:
    """Ended a minute apart, oldest first."""
    ids = []
    for episode_id, lines in (("kyoto", KYOTO), ("pay", PAY), ("bike", BIKE)):
        app.clock.advance(timedelta(minutes=1))
        ids.append(await app.remembered(episode_id, *lines))
    return ids


async def search(
    app: UseCases, mode: SearchMode, query: str = "", caller: Caller = CALLER, **fields: object
) -> list[str]:
    request = SearchRequest("helper", "mary", mode, query, **fields)  # type: ignore[arg-type]
    return [s.episode_id for s in (await app.recall.search(caller, request)).snippets]


# --- search ----------------------------------------------------------------------------


async def test_recency_returns_the_newest_endings_first_scored_one_over_rank(app: UseCases) -> None:
    await three_past_conversations(app)
    found = await app.recall.search(CALLER, SearchRequest("helper", "mary", SearchMode.RECENCY, top_k=2))
    assert [(s.episode_id, s.score) for s in found.snippets] == [("bike", 1.0), ("pay", 0.5)]


async def test_semantic_search_ranks_the_conversation_sharing_the_querys_words_first(app: UseCases) -> None:
    await three_past_conversations(app)
    assert (await search(app, SearchMode.SEMANTIC, "cherry blossoms in Kyoto", top_k=1)) == ["kyoto"]


async def test_a_min_score_leaves_out_weak_semantic_matches(app: UseCases) -> None:
    await three_past_conversations(app)
    assert await search(app, SearchMode.SEMANTIC, "cherry blossoms in Kyoto", min_score=0.99) == []


async def test_hybrid_search_fuses_meaning_with_full_text_matches(app: UseCases) -> None:
    await three_past_conversations(app)
    found = await app.recall.search(
        CALLER, SearchRequest("helper", "mary", SearchMode.HYBRID, "payroll", top_k=1)
    )
    (best,) = found.snippets
    assert best.episode_id == "pay" and set(best.signals) == {Signal.SEMANTIC, Signal.LEXICAL}


async def test_hybrid_ranks_first_what_ended_in_the_period_the_query_names(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)  # Monday 6 January
    app.clock.advance(timedelta(days=7))
    await app.remembered("pay", *PAY)
    await app.remembered("bike", *BIKE)
    found = await app.recall.search(
        CALLER, SearchRequest("helper", "mary", SearchMode.HYBRID, "what did we say last week?", top_k=3)
    )
    assert found.snippets[0].episode_id == "kyoto" and Signal.RECENCY in found.snippets[0].signals
    assert (await search(app, SearchMode.HYBRID, "shop near the station last week", top_k=1)) == ["bike"]


async def test_a_time_range_keeps_only_episodes_that_ended_inside_it(app: UseCases) -> None:
    await three_past_conversations(app)
    pay_ended = app.tables.digests[(TENANT, "pay")].ended_at
    window = (pay_ended, pay_ended + timedelta(seconds=1))
    assert await search(app, SearchMode.RECENCY, ended_after=window[0], ended_before=window[1]) == ["pay"]


async def test_another_user_agent_or_tenant_finds_none_of_the_episodes(app: UseCases) -> None:
    await three_past_conversations(app)
    await app.new_agent("other")
    for agent_id, user_id, caller in (("helper", "john", CALLER), ("other", "mary", CALLER)):
        request = SearchRequest(agent_id, user_id, SearchMode.SEMANTIC, "Kyoto")
        assert not (await app.recall.search(caller, request)).snippets
    with pytest.raises(NotFound):  # the agent does not exist in that tenant
        await search(app, SearchMode.RECENCY, caller=Caller("other-tenant"))


async def test_a_restricted_key_may_not_search_another_agent(app: UseCases) -> None:
    with pytest.raises(PermissionDenied):
        await search(app, SearchMode.RECENCY, caller=Caller(TENANT, frozenset({"other"})))


async def test_a_search_needs_a_query_outside_recency_mode(app: UseCases) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await search(app, SearchMode.SEMANTIC, "  ")
    assert [v.field for v in refused.value.violations] == ["query"]


async def test_only_ready_episodes_are_found_and_pending_ones_are_counted(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)
    await app.open(episode_id="pending")
    await app.close("pending")
    found = await app.recall.search(CALLER, SearchRequest("helper", "mary", SearchMode.RECENCY))
    assert [s.episode_id for s in found.snippets] == ["kyoto"] and found.pending_digests == 1


# --- the digester ----------------------------------------------------------------------


async def test_a_ready_digest_lands_in_the_index_through_the_change_owner(app: UseCases) -> None:
    await app.open(episode_id="kyoto")
    await app.say("kyoto", *KYOTO)
    await app.close("kyoto")
    assert not app.index.keys(MARY)
    assert await app.digester.run_once() == 1
    digest = app.tables.digests[(TENANT, "kyoto")]
    assert digest.state is DigestState.READY and digest.summary == KYOTO[0]
    assert app.index.keys(MARY) == {"kyoto#0", "kyoto#1"}  # the digest line and one transcript chunk


async def test_a_failed_digest_is_retried_after_its_back_off_and_then_succeeds(app: UseCases) -> None:
    app.summarizer.fail_next = 1
    await app.open(episode_id="kyoto")
    await app.say("kyoto", *KYOTO)
    await app.close("kyoto")
    assert await app.digester.run_once() == 0
    failed = app.tables.digests[(TENANT, "kyoto")]
    assert (failed.state, failed.attempts, failed.last_error) == (DigestState.PENDING, 1, "RuntimeError")
    assert await app.digester.run_once() == 0  # not due again before its back-off
    app.clock.advance(timedelta(seconds=2))
    assert await app.digester.run_once() == 1
    assert app.tables.digests[(TENANT, "kyoto")].state is DigestState.READY


async def test_a_digest_failing_three_times_shows_failed(app: UseCases) -> None:
    app.summarizer.fail_next = 3
    await app.open(episode_id="kyoto")
    await app.close("kyoto")
    for _ in range(3):
        await app.digester.run_once()
        app.clock.advance(timedelta(minutes=10))
    assert app.tables.digests[(TENANT, "kyoto")].state is DigestState.FAILED


# --- erasure ---------------------------------------------------------------------------


async def test_erasure_removes_the_users_rows_and_vectors_and_returns_counts(app: UseCases) -> None:
    await three_past_conversations(app)
    receipt = await app.erasure.erase_user(CALLER, "mary")
    assert receipt.counts["episodes"] == 3 and receipt.counts["messages"] == 6
    assert receipt.counts["digest_vectors"] == 6
    assert receipt.index_vectors == 6 + receipt.counts["memories"]  # memories extracted at close
    assert not app.index.keys(MARY) and receipt.storage_scrubbed
    assert await search(app, SearchMode.RECENCY) == []
    assert (await app.erasure.erase_user(CALLER, "mary")).counts["episodes"] == 0


async def test_erasure_of_one_agent_leaves_the_users_other_agents_alone(app: UseCases) -> None:
    await app.new_agent("other")
    await app.open(agent_id="other", episode_id="elsewhere")
    await app.remembered("kyoto", *KYOTO)
    receipt = await app.erasure.erase_user(CALLER, "mary", agent_id="helper")
    assert receipt.counts["episodes"] == 1
    assert (await app.episodes.get_episode(CALLER, "elsewhere")).user_id == "mary"


async def test_an_erased_conversation_is_not_found_though_its_working_set_was_cached(app: UseCases) -> None:
    episode_id = await app.open(episode_id="live")
    await app.say(episode_id, *KYOTO)
    await app.context.build(CALLER, ContextRequest(episode_id, "and then?"))
    assert app.working_sets.get((TENANT, episode_id)) is not None
    assert app.fixed_facts.get((TENANT, episode_id)) is not None
    await app.erasure.erase_user(CALLER, "mary")
    assert app.working_sets.get((TENANT, episode_id)) is None
    assert app.fixed_facts.get((TENANT, episode_id)) is None
    with pytest.raises(NotFound):
        await app.context.build(CALLER, ContextRequest(episode_id, "still there?"))


async def test_an_erased_id_may_be_opened_again_by_another_agent(app: UseCases) -> None:
    await app.new_agent("other")
    await app.open(episode_id="reused")
    await app.say("reused", "hello")
    await app.erasure.erase_user(CALLER, "mary")
    await app.open(agent_id="other", episode_id="reused")
    message, _ = await app.episodes.add_message(CALLER, "reused", NewMessage(Role.USER, "hi again"))
    assert message.seq == 1 and (await app.episodes.get_episode(CALLER, "reused")).agent_id == "other"


async def test_a_restricted_key_may_not_erase_across_every_agent(app: UseCases) -> None:
    with pytest.raises(PermissionDenied):
        await app.erasure.erase_user(Caller(TENANT, frozenset({"helper"})), "mary")


# --- retention -------------------------------------------------------------------------


async def test_retention_soft_deletes_expired_episodes_and_takes_their_vectors_out() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(retention_days=30))
    await app.remembered("old", *KYOTO)
    app.clock.advance(timedelta(days=20))
    await app.remembered("recent", *PAY)
    still_open = await app.open(episode_id="open")
    app.clock.advance(timedelta(days=15))
    old_vectors = sum(key.partition("#")[0] == "old" for key in app.index.keys(MARY))
    memory_vectors = len(app.memory_index.keys(MARY))
    counts = await app.retention.sweep()
    expired_memories = memory_vectors - len(app.memory_index.keys(MARY))  # memories past retention too
    assert old_vectors > 0
    assert (counts.soft_deleted, counts.vectors_removed, counts.purged) == (
        1,
        old_vectors + expired_memories,
        0,
    )
    assert {key.partition("#")[0] for key in app.index.keys(MARY)} == {"recent"}
    with pytest.raises(NotFound):
        await app.episodes.get_episode(CALLER, "old")
    assert (await app.episodes.get_episode(CALLER, still_open)).episode_id == "open"


async def test_a_soft_deleted_episode_is_purged_after_the_grace_period() -> None:
    app = use_cases(Settings(retention_grace=timedelta(days=7)))
    await app.new_agent(memory=MemoryDraft(retention_days=1))
    await app.remembered("old", *KYOTO)
    app.clock.advance(timedelta(days=2))
    assert (await app.retention.sweep()).soft_deleted == 1
    app.clock.advance(timedelta(days=8))
    assert (await app.retention.sweep()).purged == 1
    assert (TENANT, "old") not in app.tables.episodes


async def test_a_tenant_cap_limits_even_an_agent_that_keeps_forever() -> None:
    app = use_cases(Settings(retention_caps={TENANT: 10}))
    await app.new_agent(memory=MemoryDraft(retention_days=0))
    await app.remembered("old", *KYOTO)
    app.clock.advance(timedelta(days=11))
    assert (await app.retention.sweep()).soft_deleted == 1


# --- CheckIndex ------------------------------------------------------------------------


async def test_a_consistent_index_reports_every_vector_and_no_drift(app: UseCases) -> None:
    await three_past_conversations(app)
    report = await app.index_checker.check(CALLER)
    assert (report.sql_vectors, report.index_vectors, report.missing, report.orphaned) == (6, 6, 0, 0)


async def test_a_vector_missing_from_the_index_or_from_sql_is_reported_with_its_key(app: UseCases) -> None:
    await app.remembered("kyoto", *KYOTO)
    app.index.remove(MARY, ["kyoto#1"])
    app.index.add(MARY, ["ghost#0"], [[1.0] + [0.0] * 63])
    report = await app.index_checker.check(CALLER)
    assert report.missing_keys == ["helper/mary/kyoto#1"]
    assert report.orphaned_keys == ["helper/mary/ghost#0"]
