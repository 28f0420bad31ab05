"""The `DigestStore` port (and `StoredVectorKeys`, which both implementations also are): a
closed episode's digest as stored and saved (READY with its vectors and full text, or a
failed attempt), its transcript, and the reads recall makes of one scope (recent, among
ids, pending, lexical); per tenant and per scope.

The digester's work queue (`claim_due`) and the staleness listing (`stale`, `count_stale`)
serve the whole cluster: they name no tenant and take every tenant's digests, so those tests
run over a database of their own (`own_database`) and state exactly what a sweep takes."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from episodic.domain.changes import NO_CHANGES
from episodic.domain.digests import failed
from episodic.domain.erasure import Audit, user_hash
from episodic.domain.model import Agent, Message
from episodic.domain.recall import Digest, DigestState, Hit, Scope, vector_key
from tests.conftest import unique
from tests.contracts.conftest import MODEL, World, own_database

HOUR = timedelta(hours=1)


async def waiting(world: World, agent: Agent | None = None, user_id: str = "u1") -> Digest:
    """A new episode, said something in and closed now: its digest, PENDING and due."""
    episode = await world.episode(agent, user_id)
    await world.say(episode, "hello")
    digest = (await world.close(episode)).digest
    assert digest is not None and digest.state is DigestState.PENDING
    return digest


async def ready(world: World, agent: Agent, user_id: str = "u1", body: str = "what was said") -> Digest:
    return await world.digested(await world.episode(agent, user_id), body=body)


def ids(digests: list[Digest] | dict[str, Digest]) -> list[str]:
    return list(digests) if isinstance(digests, dict) else [d.episode_id for d in digests]


def found(hits: list[Hit]) -> list[str]:
    return [h.episode_id for h in hits]


def by_key(keys: list[tuple[Scope, str]]) -> list[tuple[Scope, str]]:
    return sorted(keys, key=lambda scoped: scoped[1])


def scope_of(agent: Agent, user_id: str = "u1") -> Scope:
    return Scope(agent.tenant_id, agent.agent_id, user_id)


# --- one digest -----------------------------------------------------------------------------


async def test_a_closed_episodes_digest_waits_pending_then_round_trips_ready(world: World) -> None:
    pending = await waiting(world)
    assert await world.digests.get(world.tenant, pending.episode_id) == pending
    assert await world.digests.get(unique("tenant"), pending.episode_id) is None
    assert await world.digests.get(world.tenant, "no-such-episode") is None
    world.later()
    made = dataclasses.replace(
        pending, state=DigestState.READY, summary="Talked about cats", key_facts=("Miso is 3", "a cat"),
        embedding_model=MODEL, attempts=2, updated_at=world.clock(),
    )  # fmt: skip
    await world.digests.save_ready(made, [[1.0, 0.0], [0.0, 1.0]], "Miso the cat", NO_CHANGES)
    assert await world.digests.get(world.tenant, pending.episode_id) == made


async def test_saving_ready_again_replaces_the_vectors_and_the_full_text(world: World) -> None:
    agent = await world.agent()
    digest = await ready(world, agent, body="a walk in the forest")  # two chunks
    again = dataclasses.replace(digest, embedding_model="next-model", updated_at=world.clock())
    await world.digests.save_ready(again, [[0.5, 0.5]], "a swim in the lake", NO_CHANGES)
    scope = scope_of(agent)
    assert await world.digest_keys.vector_keys(world.tenant, "next-model") == [
        (scope, vector_key(digest.episode_id, 0))
    ]
    assert await world.digest_keys.vector_keys(world.tenant, MODEL) == []
    assert found(await world.digests.lexical(scope, "lake", 10)) == [digest.episode_id]
    assert await world.digests.lexical(scope, "forest", 10) == []
    assert await world.digests.get(world.tenant, digest.episode_id) == again


async def test_a_failed_attempt_is_recorded_and_a_ready_digest_keeps_what_it_had(world: World) -> None:
    pending = await waiting(world)
    attempt = failed(pending, "summarizer unavailable", world.clock())
    await world.digests.save_failed(attempt, NO_CHANGES)
    stored = await world.digests.get(world.tenant, pending.episode_id)
    assert stored is not None  # when it is due again counts from the cluster's clock: not compared
    assert dataclasses.replace(stored, next_attempt_at=attempt.next_attempt_at) == attempt
    assert (stored.state, stored.attempts, stored.last_error) == (
        DigestState.PENDING,
        1,
        "summarizer unavailable",
    )

    agent = await world.agent()
    done = await ready(world, agent, body="Miso the cat")
    reembedding = failed(done, "embedder unavailable", world.clock())  # a re-embedding that failed
    await world.digests.save_failed(reembedding, NO_CHANGES)
    kept = await world.digests.get(world.tenant, done.episode_id)
    assert kept is not None and (kept.state, kept.summary, kept.last_error) == (
        DigestState.READY,
        done.summary,
        "embedder unavailable",
    )
    assert len(await world.digest_keys.vector_keys(world.tenant, MODEL, agent.agent_id)) == 2
    assert found(await world.digests.lexical(scope_of(agent), "Miso", 10)) == [done.episode_id]


async def erased_while_digested(world: World) -> tuple[Agent, Digest]:
    """A pending digest being made (as if claimed), whose episode is then erased."""
    agent = await world.agent()
    pending = await waiting(world, agent)
    audit = Audit(unique("erasure"), user_hash(world.tenant, "u1"), "", world.clock())
    await world.eraser.erase(world.tenant, "u1", agent.agent_id, audit, NO_CHANGES)
    return agent, pending


async def test_a_failure_saved_for_an_episode_erased_meanwhile_writes_nothing(world: World) -> None:
    _, pending = await erased_while_digested(world)
    await world.digests.save_failed(failed(pending, "late", world.clock()), NO_CHANGES)
    assert await world.digests.get(world.tenant, pending.episode_id) is None


async def test_a_digest_saved_ready_for_an_episode_erased_meanwhile_writes_nothing(world: World) -> None:
    agent, pending = await erased_while_digested(world)
    made = dataclasses.replace(pending, state=DigestState.READY, embedding_model=MODEL)
    saved = await world.digests.save_ready(made, [[1.0, 0.0]], "Miso the cat", NO_CHANGES)
    assert saved.result is False
    assert await world.digests.get(world.tenant, pending.episode_id) is None
    assert await world.digest_keys.vector_keys(world.tenant, MODEL, agent.agent_id) == []
    assert await world.digests.lexical(scope_of(agent), "Miso", 10) == []


async def test_the_transcript_is_the_episodes_log_oldest_first_in_its_own_tenant(world: World) -> None:
    agent = await world.agent()
    episode = await world.episode(agent)
    await world.say(episode, "first", "second")
    await world.tool_round(episode, "call-1")
    digest = (await world.close(episode)).digest
    assert digest is not None
    other = await world.agent(unique("tenant"), agent.agent_id)  # the same ids in another tenant
    namesake = await world.episode(other, "u1", episode.episode_id)
    await world.say(namesake, "not theirs")
    log = await world.episodes.list_messages(world.tenant, episode.episode_id, None, 100)
    transcript: list[Message] = await world.digests.transcript(digest)
    assert transcript == log[::-1] and [m.seq for m in transcript] == [1, 2, 3, 4]


# --- what recall reads of one scope ---------------------------------------------------------


async def test_recent_lists_a_scopes_ready_digests_newest_first_within_the_window(world: World) -> None:
    agent = await world.agent()
    start = world.clock()
    oldest = await ready(world, agent)
    world.later(HOUR)
    middle = await ready(world, agent)
    world.later(HOUR)
    newest = sorted([await ready(world, agent), await ready(world, agent)], key=lambda d: d.episode_id)
    await waiting(world, agent)  # not READY yet
    await ready(world, agent, "u2")  # another user
    await ready(world, await world.agent())  # another agent
    await ready(world, await world.agent(unique("tenant"), agent.agent_id))  # another tenant
    scope = scope_of(agent)
    assert await world.digests.recent(scope, 10, None, None) == [*newest, middle, oldest]
    assert await world.digests.recent(scope, 2, None, None) == newest
    after, before = start + HOUR, start + 2 * HOUR  # after: inclusive; before: exclusive
    assert await world.digests.recent(scope, 10, after, None) == [*newest, middle]
    assert await world.digests.recent(scope, 10, None, before) == [middle, oldest]
    assert await world.digests.recent(scope, 10, after, before) == [middle]
    assert await world.digests.recent(Scope(unique("tenant"), agent.agent_id, "u1"), 10, None, None) == []


async def test_ready_among_returns_the_scopes_ready_digests_of_the_ids_asked(world: World) -> None:
    agent = await world.agent()
    start = world.clock()
    early = await ready(world, agent)
    world.later(HOUR)
    late = await ready(world, agent)
    pending = await waiting(world, agent)
    theirs = await ready(world, agent, "u2")
    another_agents = await ready(world, await world.agent())  # the same user, another agent
    asked = [
        early.episode_id, late.episode_id, pending.episode_id, theirs.episode_id,
        another_agents.episode_id, "missing",
    ]  # fmt: skip
    scope = scope_of(agent)
    assert await world.digests.ready_among(scope, asked, None, None) == {
        early.episode_id: early,
        late.episode_id: late,
    }
    assert ids(await world.digests.ready_among(scope, asked, start + HOUR, None)) == [late.episode_id]
    assert ids(await world.digests.ready_among(scope, asked, None, start + HOUR)) == [early.episode_id]
    assert await world.digests.ready_among(scope, [], None, None) == {}
    elsewhere = Scope(unique("tenant"), agent.agent_id, "u1")
    assert await world.digests.ready_among(elsewhere, asked, None, None) == {}


async def test_pending_count_counts_a_scopes_digests_still_waiting(world: World) -> None:
    agent = await world.agent()
    scope = scope_of(agent)
    assert await world.digests.pending_count(scope) == 0
    await waiting(world, agent)
    given_up = await waiting(world, agent)
    three_times = dataclasses.replace(
        failed(given_up, "boom", world.clock()), state=DigestState.FAILED, attempts=3
    )
    await world.digests.save_failed(three_times, NO_CHANGES)  # FAILED still waits: retried forever
    await ready(world, agent)
    await waiting(world, agent, "u2")
    await waiting(world, await world.agent(unique("tenant"), agent.agent_id))
    assert await world.digests.pending_count(scope) == 2
    assert await world.digests.pending_count(Scope(world.tenant, agent.agent_id, "u3")) == 0


async def test_lexical_finds_a_scopes_texts_by_their_words_most_matches_first(world: World) -> None:
    agent = await world.agent()
    once = await ready(world, agent, body="Miso sleeps on the sofa all afternoon long")
    often = await ready(world, agent, body="Miso chased Miso's shadow; Miso, Miso everywhere")
    await ready(world, agent, body="a walk in the forest")
    await ready(world, agent, "u2", body="Miso again, Miso")  # another user
    await ready(world, await world.agent(unique("tenant"), agent.agent_id), body="Miso Miso")  # tenant
    scope = scope_of(agent)
    assert found(await world.digests.lexical(scope, "miso?", 10)) == [often.episode_id, once.episode_id]
    assert found(await world.digests.lexical(scope, "Where is Miso", 1)) == [often.episode_id]
    assert found(await world.digests.lexical(scope, "sofa", 10)) == [once.episode_id]
    assert await world.digests.lexical(scope, "giraffe", 10) == []
    assert await world.digests.lexical(scope, "the and of", 10) == []  # stop words only
    assert await world.digests.lexical(scope, "", 10) == []


async def test_vector_keys_are_a_tenants_stored_vectors_of_one_model(world: World) -> None:
    a, b = await world.agent(), await world.agent()
    first = await world.digested(await world.episode(a), chunks=2)
    second = await world.digested(await world.episode(b, "u2"), chunks=1)
    await world.digested(await world.episode(a), chunks=3, model="old-model")
    await waiting(world, a)  # nothing stored yet
    await world.digested(await world.episode(await world.agent(unique("tenant"), a.agent_id)))
    expected = [
        (scope_of(a), vector_key(first.episode_id, 0)),
        (scope_of(a), vector_key(first.episode_id, 1)),
        (scope_of(b, "u2"), vector_key(second.episode_id, 0)),
    ]
    assert by_key(await world.digest_keys.vector_keys(world.tenant, MODEL)) == by_key(expected)
    assert by_key(await world.digest_keys.vector_keys(world.tenant, MODEL, a.agent_id)) == expected[:2]
    assert len(await world.digest_keys.vector_keys(world.tenant, "old-model")) == 3
    assert await world.digest_keys.vector_keys(unique("tenant"), MODEL) == []


# --- the cluster's work queue and staleness -----------------------------------------------


@own_database
async def test_claims_take_waiting_digests_of_every_tenant_oldest_first_up_to_the_limit(
    world: World,
) -> None:
    agent = await world.agent()
    first = await waiting(world, agent)
    await ready(world, agent)  # READY: not work
    world.later()
    second = await waiting(world, agent)
    world.later()
    third = await waiting(world, agent)
    world.later()
    theirs = await waiting(world, await world.agent(unique("tenant"), agent.agent_id))
    assert await world.digests.claim_due(world.clock(), 2, HOUR) == [first, second]
    assert await world.digests.claim_due(world.clock(), 10, HOUR) == [third, theirs]
    assert await world.digests.claim_due(world.clock(), 10, HOUR) == []  # all leased


@own_database
async def test_a_claim_whose_lease_has_run_out_is_due_again(world: World) -> None:
    agent = await world.agent()
    crashed = await waiting(world, agent)
    assert await world.digests.claim_due(world.clock(), 10, timedelta(0)) == [crashed]  # its lease: over
    world.later()
    fresh = await waiting(world, agent)
    again = await world.digests.claim_due(world.clock(), 10, HOUR)
    assert sorted(ids(again)) == sorted([crashed.episode_id, fresh.episode_id])
    assert await world.digests.claim_due(world.clock(), 10, HOUR) == []


@own_database
async def test_a_new_digest_is_due_even_to_a_claimer_whose_clock_is_behind(world: World) -> None:
    world.later(HOUR)  # the closing replica's clock runs an hour ahead of the claiming one's
    fresh = await waiting(world)
    assert await world.digests.claim_due(world.clock() - HOUR, 10, HOUR) == [fresh]


@own_database
async def test_a_failed_digest_is_not_due_before_its_next_attempt(world: World) -> None:
    digest = await waiting(world)
    assert await world.digests.claim_due(world.clock(), 10, timedelta(0)) == [digest]
    backing_off = dataclasses.replace(  # an hour, not the rules' 2 s: PostgreSQL's clock runs on
        failed(digest, "boom", world.clock()), next_attempt_at=world.clock() + HOUR
    )
    await world.digests.save_failed(backing_off, NO_CHANGES)
    assert await world.digests.claim_due(world.clock(), 10, HOUR) == []


@own_database
async def test_stale_lists_ready_digests_of_every_tenant_made_with_another_model(world: World) -> None:
    agent = await world.agent()
    old = await world.digested(await world.episode(agent), model="old-model")
    current = await ready(world, agent)
    await waiting(world, agent)  # not embedded yet: the queue's, not staleness's
    theirs = await world.digested(
        await world.episode(await world.agent(unique("tenant"), agent.agent_id)), model="old-model"
    )
    stale = await world.digests.stale(MODEL, 10)
    assert sorted(stale, key=lambda d: d.tenant_id) == sorted([old, theirs], key=lambda d: d.tenant_id)
    assert await world.digests.count_stale(MODEL) == 2
    (one,) = await world.digests.stale(MODEL, 1)
    assert one in (old, theirs)
    assert await world.digests.stale("old-model", 10) == [current]
    assert await world.digests.count_stale("old-model") == 1
