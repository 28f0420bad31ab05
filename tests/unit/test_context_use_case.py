"""ContextService (BuildContext and the model-call audit) over in-memory fakes: order,
budget and ceiling, stubs, compaction, replays, read-only closed episodes, recall and its
remembered answers, as the e2e layer checks them over gRPC, in milliseconds. Tokens are
words (tests/fakes_tokens.py) plus 4 per message."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.changes import NO_CHANGES, ScopeChanged
from episodic.domain.context import Compaction, ModelCall, ModelReply, Section
from episodic.domain.digests import ready
from episodic.domain.episodes import OpenRequest
from episodic.domain.memories import MemoryKind
from episodic.domain.memory_rules import CreateRequest
from episodic.domain.memory_rules import MemoryDraft as NewMemory
from episodic.domain.model import (
    Caller,
    CloseReason,
    NewMessage,
    PiiPolicy,
    RecallMode,
    Role,
    ToolCall,
    ToolResult,
)
from episodic.domain.recall import DigestText, Scope
from episodic.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, Unavailable
from episodic.service.context import ContextRequest
from tests.fakes import FakeBackgroundCompactions
from tests.unit.use_cases import CALLER, TENANT, Settings, UseCases, use_cases

CHAT = [
    "I am planning a trip to Kyoto in April with my sister.",
    "Lovely. Cherry blossoms usually peak in early April, so book early.",
    "We want a quiet hotel near Gion for under 25000 yen a night.",
    "Gion Hatanaka and Sakura Terrace both fit; Sakura Terrace is cheaper.",
]
NO_RECALL = MemoryDraft(recall_mode=RecallMode.NONE)


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent(memory=NO_RECALL)
    return built


async def build(app: UseCases, episode_id: str, user_message: str = "", **fields: object) -> ModelCall:
    request = ContextRequest(episode_id, user_message, **fields)  # type: ignore[arg-type]
    call, _ = await app.context.build(CALLER, request)
    return call


def sections(call: ModelCall) -> list[Section]:
    return [m.section for m in call.messages]


async def log_of(app: UseCases, episode_id: str) -> list[str]:
    page = await app.episodes.list_messages(CALLER, episode_id, 1000, "")
    return [m.content for m in reversed(page.items)]


def invalid_fields(error: InvalidArgument) -> list[str]:
    return [v.field for v in error.violations]


# --- order and the audit ---------------------------------------------------------------


async def test_a_turn_renders_system_history_then_user_message_and_is_stored_as_rendered(
    app: UseCases,
) -> None:
    episode_id = await app.open()
    await app.say(episode_id, *CHAT)
    call = await build(app, episode_id, "Any restaurants nearby?", append_user_message=True)
    assert sections(call) == [Section.SYSTEM, *[Section.HISTORY] * 4, Section.USER_MESSAGE]
    assert call.messages[0].content == "Be brief."
    assert [m.content for m in call.messages[1:5]] == CHAT
    report = call.report
    assert report.user_message_seq == 5
    assert (report.history_span.from_seq, report.history_span.to_seq) == (1, 4)
    assert report.total_tokens == sum(m.tokens for m in call.messages) + report.reply_priming
    assert report.total_tokens <= report.budget <= report.ceiling
    assert await app.model_calls.get_model_call(CALLER, call.model_call_id) == call


async def test_reads_of_a_call_whose_record_still_commits_wait_for_it(app: UseCases) -> None:
    """The report may go out before the record is durable (record_pending): a read of the call
    right after it finds the call, as one after the stream's end does."""
    episode_id = await app.open()
    started = await app.context.start(CALLER, ContextRequest(episode_id, "hi", append_user_message=True))
    assert not started.stored.done()
    call_id = started.call.model_call_id
    assert await app.model_calls.get_model_call(CALLER, call_id) == started.call
    started = await app.context.start(CALLER, ContextRequest(episode_id, "and?", append_user_message=True))
    page = await app.model_calls.list_model_calls(CALLER, episode_id, 10, "")
    assert page.items[0] == started.call
    started = await app.context.start(CALLER, ContextRequest(episode_id, "so?", append_user_message=True))
    reply = ModelReply(1, 2, timedelta(0), 0)
    replied = await app.model_calls.record_reply(CALLER, started.call.model_call_id, reply)
    assert replied.model_call_id == started.call.model_call_id


async def test_the_appended_user_message_is_logged_once_and_rendered_only_last(app: UseCases) -> None:
    episode_id = await app.open()
    await app.say(episode_id, *CHAT[:2])
    for _ in range(2):
        call = await build(app, episode_id, "hi", append_user_message=True, client_message_id="m-1")
    assert await log_of(app, episode_id) == [*CHAT[:2], "hi"]
    assert [m.content for m in call.messages if m.content == "hi"] == ["hi"]
    assert call.messages[-1].section is Section.USER_MESSAGE


async def test_a_request_id_replays_the_stored_call_without_appending_or_rendering_again(
    app: UseCases,
) -> None:
    episode_id = await app.open()
    first, fresh = await app.context.build(CALLER, ContextRequest(episode_id, "hello", request_id="turn-1"))
    await app.say(episode_id, *CHAT[:2])
    retry = ContextRequest(episode_id, "other words", append_user_message=True, request_id="turn-1")
    again, fresh_again = await app.context.build(CALLER, retry)
    assert (fresh, fresh_again) == (True, False)
    assert again == first
    assert await log_of(app, episode_id) == CHAT[:2]
    assert len((await app.model_calls.list_model_calls(CALLER, episode_id, 10, "")).items) == 1


async def test_another_tenants_episode_is_not_found(app: UseCases) -> None:
    episode_id = await app.open()
    with pytest.raises(NotFound):
        await app.context.build(Caller("other-tenant"), ContextRequest(episode_id, "hi"))


# --- budget and ceiling ----------------------------------------------------------------


async def test_a_budget_above_the_ceiling_names_max_working_memory_tokens(app: UseCases) -> None:
    episode_id = await app.open()
    too_big = MemoryDraft(
        context_window_tokens=1000, context_ceiling_percent=50, max_working_memory_tokens=600
    )
    with pytest.raises(InvalidArgument) as refused:
        await build(app, episode_id, "hi", memory=too_big)
    assert invalid_fields(refused.value) == ["memory_config.max_working_memory_tokens"]


async def test_a_user_message_that_passes_the_ceiling_is_refused_before_it_is_appended(
    app: UseCases,
) -> None:
    episode_id = await app.open()
    small = MemoryDraft(context_window_tokens=100, context_ceiling_percent=100, max_working_memory_tokens=50)
    with pytest.raises(InvalidArgument) as refused:
        await build(app, episode_id, "word " * 120, append_user_message=True, memory=small)
    assert invalid_fields(refused.value) == ["user_message"]
    assert await log_of(app, episode_id) == []


async def test_an_agent_prompt_over_the_ceiling_is_failed_precondition() -> None:
    app = use_cases()
    small = MemoryDraft(context_window_tokens=100, context_ceiling_percent=100, max_working_memory_tokens=50)
    await app.new_agent(memory=small, system_prompt="rule " * 120)
    episode_id = await app.open()
    with pytest.raises(FailedPrecondition) as refused:
        await build(app, episode_id, "hi")
    assert refused.value.reason == "CONTEXT_TOO_LARGE"


async def test_a_requested_system_prompt_over_the_ceiling_names_system_prompt(app: UseCases) -> None:
    episode_id = await app.open()
    small = MemoryDraft(context_window_tokens=100, context_ceiling_percent=100, max_working_memory_tokens=50)
    with pytest.raises(InvalidArgument) as refused:
        await build(app, episode_id, "hi", system_prompt="rule " * 120, memory=small)
    assert invalid_fields(refused.value) == ["system_prompt"]


async def test_when_prompt_and_user_message_pass_the_budget_only_they_are_rendered(app: UseCases) -> None:
    episode_id = await app.open()
    await app.say(episode_id, *CHAT)
    call = await build(app, episode_id, "word " * 30, memory=MemoryDraft(max_working_memory_tokens=20))
    assert sections(call) == [Section.SYSTEM, Section.USER_MESSAGE]
    assert call.report.over_budget
    # nothing is summarized for a turn that could not show it, and the counts add up
    assert call.report.compaction is Compaction.NONE and call.report.summarized == 0
    assert call.report.pruned == len(CHAT)


async def test_a_known_model_of_another_encoding_is_refused_and_an_unknown_one_is_a_label(
    app: UseCases,
) -> None:
    episode_id = await app.open()  # the agent's gpt-4 counts with cl100k_base
    with pytest.raises(FailedPrecondition) as refused:
        await build(app, episode_id, "hi", model="gpt-4o")
    assert refused.value.reason == "ENCODING_MISMATCH"
    assert (await build(app, episode_id, "hi", model="my-local-llama")).report.model == "my-local-llama"


# --- tool results and compaction -------------------------------------------------------


async def test_tool_results_older_than_the_newest_kept_are_stubbed_but_kept_in_the_log() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, tool_results_kept_verbatim=1))
    episode_id = await app.open()
    for i in range(3):
        call = NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall(f"c{i}", "weather", {"day": i}),))
        result = NewMessage(Role.TOOL, f"sunny on day {i}", tool_result=ToolResult(f"c{i}", {"day": i}, True))
        await app.episodes.add_messages(CALLER, episode_id, [call, result])
    built = await build(app, episode_id, "and tomorrow?")
    assert [m.stubbed for m in built.messages if m.role is Role.TOOL] == [True, True, False]
    assert built.report.stubbed == 2
    assert [line for line in await log_of(app, episode_id) if line] == [f"sunny on day {i}" for i in range(3)]


async def long_chat(app: UseCases, episode_id: str, turns: int) -> None:
    await app.say(episode_id, *[CHAT[i % 4] for i in range(turns)])


async def test_a_history_that_does_not_fit_is_compacted_into_a_summary_of_its_oldest_turns() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=200))
    episode_id = await app.open()
    await long_chat(app, episode_id, 60)
    report = (await build(app, episode_id, "Summarize our plan.")).report
    assert report.compaction is Compaction.SUMMARIZED
    assert report.summary_span.from_seq == 1
    assert report.history_span.from_seq == report.summary_span.to_seq + 1
    assert report.history_span.to_seq == 60 and report.total_tokens <= 200
    stored = app.tables.summaries[(TENANT, episode_id)]
    assert [s.to_seq for s in stored] == [report.summary_span.to_seq]
    assert len(await log_of(app, episode_id)) == 60  # the log keeps everything


async def test_after_a_compaction_the_next_turn_reuses_the_summary_while_the_tail_fits() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=200))
    episode_id = await app.open()
    await long_chat(app, episode_id, 60)
    first = (await build(app, episode_id, "Summarize our plan.")).report
    await long_chat(app, episode_id, 2)
    second = await build(app, episode_id, "And then?")
    assert second.report.compaction is Compaction.NONE
    assert second.report.summary_span == first.summary_span
    summary = [m for m in second.messages if m.section is Section.SUMMARY]
    assert len(summary) == 1 and summary[0].content.startswith("[Summary of earlier conversation]")


async def test_with_a_background_summarizer_a_turn_schedules_compaction_and_slides_the_window() -> None:
    background = FakeBackgroundCompactions()
    app = use_cases(Settings(background=background))
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=200))
    episode_id = await app.open()
    await long_chat(app, episode_id, 60)
    report = (await build(app, episode_id, "Summarize our plan.")).report
    assert report.compaction is Compaction.SCHEDULED
    assert report.pruned > 0 and report.summary_span.to_seq == 0
    assert [key for key, _ in background.scheduled] == [(TENANT, episode_id)]
    assert (TENANT, episode_id) not in app.tables.summaries


async def test_a_closed_episode_is_rendered_read_only() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=200))
    episode_id = await app.open()
    await long_chat(app, episode_id, 60)
    await app.close(episode_id)
    assert (await build(app, episode_id, "hi")).report.compaction is Compaction.SKIPPED_CLOSED
    with pytest.raises(FailedPrecondition) as refused:
        await build(app, episode_id, "hi", append_user_message=True)
    assert refused.value.reason == "EPISODE_CLOSED"
    assert len(await log_of(app, episode_id)) == 60 and (TENANT, episode_id) not in app.tables.summaries


# --- recall in the context -------------------------------------------------------------


@pytest.fixture
async def recalling() -> UseCases:
    built = use_cases()
    await built.new_agent(memory=MemoryDraft(recall_mode=RecallMode.RECENCY))
    return built


async def test_past_conversations_come_between_the_system_prompt_and_the_history(recalling: UseCases) -> None:
    before = await recalling.remembered("before", "Book the Kyoto hotel.", "Done.")
    episode_id = await recalling.open()
    await recalling.say(episode_id, *CHAT[:2])
    call = await build(recalling, episode_id, "Where were we?")
    assert sections(call)[:3] == [Section.SYSTEM, Section.PAST_CONVERSATIONS, Section.HISTORY]
    assert call.messages[1].content.startswith("[Past Conversations]")
    assert "Book the Kyoto hotel." in call.messages[1].content
    assert [(r.episode_id, r.rendered) for r in call.report.recalled] == [(before, True)]


async def test_a_recalled_episode_shows_the_messages_that_match_this_turns_question(
    recalling: UseCases,
) -> None:
    await recalling.remembered(
        "trip", "We talked about travel.", "The hotel in Gion costs 24000 yen a night.", "Noted."
    )
    episode_id = await recalling.open()
    block = (await build(recalling, episode_id, "How much was the Gion hotel per night?")).messages[1]
    assert "Relevant excerpts:\n- Assistant: The hotel in Gion costs 24000 yen a night." in block.content
    unrelated = (await build(recalling, episode_id, "Tell me a joke")).messages[1]
    assert "Relevant excerpts" not in unrelated.content


async def test_neither_the_current_episode_nor_another_users_are_recalled(recalling: UseCases) -> None:
    await recalling.remembered("marys", "Book the Kyoto hotel.", "Done.")
    johns = await recalling.open(user_id="john")
    assert not (await build(recalling, johns, "Where were we?")).report.recalled
    await recalling.close(johns)
    await recalling.digester.run_once()
    assert not (await build(recalling, johns, "Where were we?")).report.recalled


async def test_a_recency_answer_is_remembered_until_the_change_owner_announces_a_change(
    recalling: UseCases,
) -> None:
    first = await recalling.remembered("first", "Book the Kyoto hotel.", "Done.")
    episode_id = await recalling.open()
    assert [r.episode_id for r in (await build(recalling, episode_id, "hi")).report.recalled] == [first]
    sneaked_in = await digested_behind_the_owners_back(recalling, "sneaked-in")
    assert [r.episode_id for r in (await build(recalling, episode_id, "hi")).report.recalled] == [first]
    recalling.visibility.apply(ScopeChanged(Scope(TENANT, "helper", "mary")))
    recalled = [r.episode_id for r in (await build(recalling, episode_id, "hi")).report.recalled]
    assert recalled == [sneaked_in, first]


async def digested_behind_the_owners_back(app: UseCases, episode_id: str) -> str:
    """An episode another replica closed and digested: in SQL, never announced here."""
    app.clock.advance(timedelta(minutes=1))
    request = OpenRequest("helper", "mary", episode_id, {}, app.clock())
    await app.episode_store.open_episode(TENANT, request, "cl100k_base")
    closed = (
        await app.episode_store.close_episode(
            TENANT, episode_id, CloseReason.USER_ENDED, "", app.clock(), NO_CHANGES
        )
    ).result
    assert closed.digest is not None
    made = ready(closed.digest, DigestText("Another trip."), app.embedder.model_id, app.clock())
    app.tables.digests[(TENANT, episode_id)] = made
    return episode_id


async def test_a_close_in_the_scope_refreshes_the_remembered_answer(recalling: UseCases) -> None:
    first = await recalling.remembered("first", "Book the Kyoto hotel.", "Done.")
    episode_id = await recalling.open()
    await build(recalling, episode_id, "hi")
    recalling.clock.advance(timedelta(minutes=1))
    second = await recalling.remembered("second", "Rent a bike.", "Done.")
    recalled = [r.episode_id for r in (await build(recalling, episode_id, "hi")).report.recalled]
    assert recalled == [second, first]


async def test_under_a_redact_policy_the_user_message_is_rendered_and_embedded_with_placeholders() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.SEMANTIC, pii_policy=PiiPolicy.REDACT))
    await app.remembered("past", "Book the Kyoto hotel.")  # something to recall, so the query is embedded
    app.embedder.embedded.clear()
    episode_id = await app.open()
    call = await build(app, episode_id, "mail mary@example.com the plan", append_user_message=True)
    assert call.messages[-1].content == "mail [EMAIL] the plan"
    assert await log_of(app, episode_id) == ["mail [EMAIL] the plan"]
    assert app.embedder.embedded == ["mail [EMAIL] the plan"]


async def test_a_warm_turns_early_embedding_uses_the_redacted_query_once() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.HYBRID, pii_policy=PiiPolicy.REDACT))
    await app.remembered("past", "Book the Kyoto hotel.")
    episode_id = await app.open()
    await build(app, episode_id, "first turn")  # the working set is cached from here on
    app.embedder.embedded.clear()
    await build(app, episode_id, "write to mary@example.com about Lisbon")
    # started before the reads, shared by recall and known facts, never of the raw text
    assert app.embedder.embedded == ["write to [EMAIL] about Lisbon"]


async def test_a_user_with_nothing_to_recall_or_know_costs_no_query_embedding() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.HYBRID))
    episode_id = await app.open()
    for text in ("first turn about Lisbon", "second turn about Porto"):
        await build(app, episode_id, text)
    assert app.embedder.embedded == []  # no digested episode, no long-term memory: nothing to match
    await app.remembered("past", "Book the Kyoto hotel.")
    app.embedder.embedded.clear()
    await build(app, episode_id, "and Kyoto?")
    assert app.embedder.embedded == ["and Kyoto?"]


# --- one pass: a warm turn reads nothing before its append ------------------------------


class CountingSources:
    """Counts the working-set reads a turn makes through the context store."""

    def __init__(self, app: UseCases) -> None:
        self.reads = 0
        store = app.context_store
        original = store.sources

        async def counted(*args: Any) -> Any:
            self.reads += 1
            return await original(*args)

        store.sources = counted  # type: ignore[method-assign,assignment]


async def test_a_warm_turn_that_appends_reads_no_working_set_before_its_append(app: UseCases) -> None:
    episode_id = await app.open()
    await app.say(episode_id, *CHAT)
    await build(app, episode_id, "first question", append_user_message=True)  # reads: the set is cold
    counting = CountingSources(app)
    call = await build(app, episode_id, "second question", append_user_message=True)
    assert counting.reads == 0
    assert [m.content for m in call.messages[-3:]] == [CHAT[-1], "first question", "second question"]


async def test_messages_another_writer_appended_between_turns_are_rendered_at_the_next(app: UseCases) -> None:
    episode_id = await app.open()
    await build(app, episode_id, "first question", append_user_message=True)
    await app.say(episode_id, "appended elsewhere", "and answered")  # AddMessages, not this turn
    counting = CountingSources(app)
    call = await build(app, episode_id, "second question", append_user_message=True)
    assert counting.reads == 1  # the append's seq did not follow the held tail: read what is new
    contents = [m.content for m in call.messages]
    assert contents[-4:] == ["first question", "appended elsewhere", "and answered", "second question"]


async def test_an_agent_changed_between_turns_is_rendered_at_the_next_turn(app: UseCases) -> None:
    episode_id = await app.open()
    await build(app, episode_id, "first question", append_user_message=True)
    draft = AgentDraft("helper", system_prompt="Answer in French.")
    await app.agents.update_agent(CALLER, draft, ["system_prompt"])
    call = await build(app, episode_id, "second question", append_user_message=True)
    assert call.messages[0].content == "Answer in French."


async def test_a_turn_shows_the_pending_memories_its_append_read(app: UseCases) -> None:
    episode_id = await app.open()
    await build(app, episode_id, "first question", append_user_message=True)
    vegetarian = NewMemory(text="Mary is vegetarian.", kind=MemoryKind.FACT)
    await app.memories.create(CALLER, CreateRequest([vegetarian], episode_id=episode_id))
    call = await build(app, episode_id, "what should I eat?", append_user_message=True)
    facts = [m.content for m in call.messages if m.section is Section.KNOWN_FACTS]
    assert len(facts) == 1 and "Mary is vegetarian." in facts[0]


# --- replies ---------------------------------------------------------------------------


async def test_a_reply_attaches_once_and_a_different_one_is_refused(app: UseCases) -> None:
    episode_id = await app.open()
    call = await build(app, episode_id, "hi")
    reply = ModelReply(
        input_tokens=10, output_tokens=5, latency=timedelta(seconds=1), assistant_message_seq=0
    )
    first = await app.model_calls.record_reply(CALLER, call.model_call_id, reply)
    again = await app.model_calls.record_reply(CALLER, call.model_call_id, reply)
    assert first == again and first.reply is not None and first.reply.recorded_at == app.clock()
    with pytest.raises(AlreadyExists) as refused:
        await app.model_calls.record_reply(
            CALLER, call.model_call_id, ModelReply(11, 5, timedelta(seconds=1), 0)
        )
    assert refused.value.reason == "REPLY_ALREADY_RECORDED"


async def test_a_turn_whose_user_message_does_not_commit_fails_unrecorded_and_drops_its_working_set(
    app: UseCases, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append answers before its COMMIT, so the turn goes on; if the COMMIT then fails,
    no model call is recorded for it and the held working set (which took the message) goes."""
    episode_id = await app.open()
    await app.say(episode_id, *CHAT[:2])
    await build(app, episode_id, "warm", append_user_message=True)
    store, append_turn = app.episode_store, app.episode_store.append_turn

    async def lost() -> None:
        raise Unavailable("the disk went away")

    async def uncommitted(*args: Any) -> Any:
        stored, replayed, pending, durable = await append_turn(*args)
        await durable
        return stored, replayed, pending, lost()

    monkeypatch.setattr(store, "append_turn", uncommitted)
    with pytest.raises(Unavailable):
        await build(app, episode_id, "lost", append_user_message=True)
    assert app.working_sets.get((TENANT, episode_id)) is None
    page = await app.context_store.list_calls(TENANT, episode_id, None, 10)
    assert len(page) == 1  # the warm turn's only
