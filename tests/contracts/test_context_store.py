"""The `ContextStore` port: a working set's sources (only what is new, at most what an
allowance needs), summaries (one per span end), model calls (unique per request id, paged
newest first, one reply each), and the spoken messages recall reads; per tenant."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from episodic.domain.context import (
    Compaction,
    ContextReport,
    ModelCall,
    ModelReply,
    RecalledEpisode,
    RenderedMessage,
    Section,
    Span,
    Summary,
)
from episodic.domain.model import Episode, Message, Role
from episodic.domain.recall import Signal
from episodic.errors import AlreadyExists, InvalidArgument, NotFound
from tests.conftest import unique
from tests.contracts.conftest import ENCODING, World


def model_call(world: World, episode: Episode, request_id: str = "", call_id: str = "") -> ModelCall:
    found = RecalledEpisode("ep_before", 0.42, world.clock(), True, (Signal.SEMANTIC, Signal.LEXICAL))
    report = ContextReport(
        section_tokens={Section.SYSTEM: 3, Section.USER_MESSAGE: 4}, reply_priming=3, budget=100,
        ceiling=200, over_budget=False, pruned=1, stubbed=0, summarized=2, summary_span=Span(1, 2),
        history_span=Span(3, 4), compaction=Compaction.NONE, pending_digests=0,
        recalled=(found,),
        model="gpt-4o", token_encoding=ENCODING, trace_id="t" * 32, user_message_seq=5,
    )  # fmt: skip
    messages = (
        RenderedMessage(Role.SYSTEM, "Be brief.", Section.SYSTEM, 3),
        RenderedMessage(Role.USER, "the question", Section.USER_MESSAGE, 4, seq=5),
    )
    return ModelCall(
        episode.tenant_id, call_id or unique("mc"), episode.episode_id, episode.agent_id, episode.user_id,
        world.clock(), messages, report, request_id,
    )  # fmt: skip


def summary(episode: Episode, to_seq: int, content: str = "so far", created: int = 0) -> Summary:
    at = episode.started_at + timedelta(seconds=created)
    return Summary(episode.tenant_id, episode.episode_id, 1, to_seq, content, 4, ENCODING, "extractive", at)


def reply(seq: int = 0, output_tokens: int = 20) -> ModelReply:
    return ModelReply(100, output_tokens, timedelta(milliseconds=1500), seq)


def seqs(messages: list[Message]) -> list[int]:
    return [m.seq for m in messages]


# --- model calls --------------------------------------------------------------------------


async def test_a_model_call_round_trips_whole(world: World) -> None:
    episode = await world.episode()
    call = model_call(world, episode, request_id="r1")
    assert await world.context.save_call(call, None) == (call, True)
    assert await world.context.get_call(world.tenant, call.model_call_id) == call
    assert await world.context.call_for_request(world.tenant, episode.episode_id, "r1") == call


async def test_a_request_id_is_used_once_per_episode(world: World) -> None:
    agent = await world.agent()
    episode, other = await world.episode(agent), await world.episode(agent)
    first = model_call(world, episode, request_id="r1")
    await world.context.save_call(first, None)
    retry = model_call(world, episode, request_id="r1")
    assert await world.context.save_call(retry, None) == (first, False)
    with pytest.raises(NotFound):
        await world.context.get_call(world.tenant, retry.model_call_id)
    elsewhere = model_call(world, other, request_id="r1")  # the same request id in another episode
    assert await world.context.save_call(elsewhere, None) == (elsewhere, True)
    without = [model_call(world, episode), model_call(world, episode)]  # no request id: never replayed
    assert [await world.context.save_call(c, None) for c in without] == [(c, True) for c in without]
    assert await world.context.call_for_request(world.tenant, episode.episode_id, "r2") is None


async def test_a_call_for_an_episode_that_does_not_exist_is_not_found(world: World) -> None:
    episode = await world.episode()
    gone = dataclasses.replace(episode, episode_id=unique("ep"))
    with pytest.raises(NotFound):
        await world.context.save_call(model_call(world, gone), None)


async def test_model_calls_are_per_tenant(world: World) -> None:
    episode = await world.episode()
    call = model_call(world, episode, request_id="r1")
    await world.context.save_call(call, None)
    other = unique("tenant")
    with pytest.raises(NotFound):
        await world.context.get_call(other, call.model_call_id)
    assert await world.context.call_for_request(other, episode.episode_id, "r1") is None
    with pytest.raises(NotFound):
        await world.context.list_calls(other, episode.episode_id, None, 10)
    with pytest.raises(NotFound):
        await world.context.record_reply(other, call.model_call_id, reply())


async def test_calls_list_newest_first_in_pages(world: World) -> None:
    episode = await world.episode()
    calls = []
    for n in range(5):
        if n != 3:  # two calls at one instant: ordered by id
            world.later()
        calls.append(model_call(world, episode, call_id=f"mc_{n}_{unique('x')}"))
        await world.context.save_call(calls[-1], None)
    newest_first = sorted(calls, key=lambda c: (c.created_at, c.model_call_id), reverse=True)
    page = await world.context.list_calls(world.tenant, episode.episode_id, None, 2)
    assert page == newest_first[:2]
    rest = await world.context.list_calls(
        world.tenant, episode.episode_id, (page[-1].created_at, page[-1].model_call_id), 10
    )
    assert rest == newest_first[2:]


async def test_listing_the_calls_of_a_missing_episode_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        await world.context.list_calls(world.tenant, "no-such-episode", None, 10)
    episode = await world.episode()
    assert await world.context.list_calls(world.tenant, episode.episode_id, None, 10) == []


async def test_a_reply_is_recorded_once_and_a_retry_is_answered_alike(world: World) -> None:
    episode = await world.episode()
    await world.say(episode, "hi")
    [answer] = await world.say(episode, "hello", role=Role.ASSISTANT)
    call = model_call(world, episode)
    await world.context.save_call(call, None)
    replied = await world.context.record_reply(world.tenant, call.model_call_id, reply(answer.seq))
    assert replied == dataclasses.replace(call, reply=reply(answer.seq))
    assert await world.context.get_call(world.tenant, call.model_call_id) == replied
    assert await world.context.record_reply(world.tenant, call.model_call_id, reply(answer.seq)) == replied
    with pytest.raises(AlreadyExists) as refused:
        await world.context.record_reply(world.tenant, call.model_call_id, reply(answer.seq, 21))
    assert refused.value.reason == "REPLY_ALREADY_RECORDED"


async def test_a_reply_must_name_an_assistant_message_of_the_episode(world: World) -> None:
    episode = await world.episode()
    [question] = await world.say(episode, "hi")
    call = model_call(world, episode)
    await world.context.save_call(call, None)
    for seq in (question.seq, 99):
        with pytest.raises(InvalidArgument):
            await world.context.record_reply(world.tenant, call.model_call_id, reply(seq))
    assert (await world.context.get_call(world.tenant, call.model_call_id)).reply is None
    with pytest.raises(NotFound):
        await world.context.record_reply(world.tenant, "no-such-call", reply())


# --- sources and summaries ----------------------------------------------------------------


async def test_sources_bring_the_episode_its_agent_and_what_is_new(world: World) -> None:
    agent = await world.agent()
    episode = await world.episode(agent)
    said = await world.say(episode, "one", "two", "three")
    cold = await world.context.sources(world.tenant, episode.episode_id, 0, None, 1000)
    assert (cold.agent, cold.summary, cold.messages, cold.complete) == (agent, None, said, True)
    assert (cold.episode.episode_id, cold.episode.message_count) == (episode.episode_id, 3)
    warm = await world.context.sources(world.tenant, episode.episode_id, 0, 2, 1000)
    assert (warm.messages, warm.complete) == (said[2:], True)
    nothing_new = await world.context.sources(world.tenant, episode.episode_id, 0, 3, 1000)
    assert nothing_new.messages == []


async def test_sources_of_a_missing_episode_are_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        await world.context.sources(world.tenant, "no-such-episode", 0, None, 1000)
    episode = await world.episode()
    with pytest.raises(NotFound):
        await world.context.sources(unique("tenant"), episode.episode_id, 0, None, 1000)


async def test_a_cold_start_reads_from_the_latest_summary_and_a_newer_one_only(world: World) -> None:
    episode = await world.episode()
    said = await world.say(episode, *[f"m{n}" for n in range(6)])
    await world.context.save_summary(summary(episode, 2))
    await world.context.save_summary(summary(episode, 4, "later"))
    cold = await world.context.sources(world.tenant, episode.episode_id, 0, None, 1000)
    assert (cold.summary, cold.messages) == (summary(episode, 4, "later"), said[4:])
    known = await world.context.sources(world.tenant, episode.episode_id, 4, None, 1000)
    assert (known.summary, known.messages) == (None, said)  # the summary is known: the log from 0
    older = await world.context.sources(world.tenant, episode.episode_id, 2, 5, 1000)
    assert (older.summary, older.messages) == (summary(episode, 4, "later"), said[5:])


async def test_a_second_summary_with_the_same_span_end_is_ignored(world: World) -> None:
    episode = await world.episode()
    await world.say(episode, "one", "two")
    await world.context.save_summary(summary(episode, 2, "first"))
    await world.context.save_summary(summary(episode, 2, "second"))
    # also when it comes with a model call
    await world.context.save_call(model_call(world, episode), summary(episode, 2, "third"))
    sources = await world.context.sources(world.tenant, episode.episode_id, 0, None, 1000)
    assert sources.summary == summary(episode, 2, "first")


async def test_a_summary_saved_with_a_replayed_call_is_kept(world: World) -> None:
    episode = await world.episode()
    await world.say(episode, "one", "two")
    first = model_call(world, episode, request_id="r1")
    await world.context.save_call(first, None)
    assert await world.context.save_call(
        model_call(world, episode, request_id="r1"), summary(episode, 2)
    ) == (
        first,
        False,
    )
    sources = await world.context.sources(world.tenant, episode.episode_id, 0, None, 1000)
    assert sources.summary == summary(episode, 2)


async def test_sources_read_only_the_newest_messages_an_allowance_needs(world: World) -> None:
    agent = await world.agent(max_working_memory_tokens=100)
    episode = await world.episode(agent)
    said = await world.say(episode, *[f"m{n}" for n in range(6)], tokens=3000)
    cold = await world.context.sources(world.tenant, episode.episode_id, 0, None, 100)
    assert (seqs(cold.messages), cold.complete) == ([4, 5, 6], False)
    exactly = await world.context.sources(world.tenant, episode.episode_id, 0, 3, 100)
    assert (cold.messages, exactly.complete) == (said[3:], True)  # reaches back to what is known


# --- spoken messages ----------------------------------------------------------------------


def spoken_fields(found: dict[str, list[Message]]) -> dict[str, list[tuple[int, Role, str]]]:
    """What the port fills in (besides episode id and time)."""
    return {e: [(m.seq, m.role, m.content) for m in ms] for e, ms in found.items()}


async def test_spoken_brings_the_first_user_and_assistant_messages_of_each_episode(world: World) -> None:
    agent = await world.agent()
    one, two, silent = await world.episode(agent), await world.episode(agent), await world.episode(agent)
    await world.say(one, "q1")
    await world.tool_round(one, "c1")  # an assistant message (the call) and a tool message
    await world.say(one, "a1", role=Role.ASSISTANT)
    await world.say(one, "q2")
    await world.say(two, "hello")
    await world.say(silent, "note", role=Role.SYSTEM)
    ids = [one.episode_id, two.episode_id, silent.episode_id, "no-such-episode"]
    found = await world.context.spoken(world.tenant, ids, 3)
    assert spoken_fields(found) == {
        one.episode_id: [(1, Role.USER, "q1"), (2, Role.ASSISTANT, ""), (4, Role.ASSISTANT, "a1")],
        two.episode_id: [(1, Role.USER, "hello")],
    }
    assert all(m.episode_id == e and m.created_at == world.clock() for e, ms in found.items() for m in ms)
    assert await world.context.spoken(unique("tenant"), ids, 2) == {}
    assert await world.context.spoken(world.tenant, [], 2) == {}
