"""EpisodeService over in-memory fakes: the open, append and close rules, the PII policy
and agent-restricted keys, as the e2e layer checks them over gRPC, in milliseconds."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.domain.model import (
    Caller,
    CloseReason,
    EpisodeState,
    NewMessage,
    PiiPolicy,
    Role,
    ToolCall,
    ToolResult,
)
from episodic.domain.recall import DigestState
from episodic.errors import AlreadyExists, FailedPrecondition, NotFound, PermissionDenied
from tests.unit.use_cases import CALLER, TENANT, Settings, UseCases, use_cases


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent()
    return built


def user(text: str, client_id: str | None = None) -> NewMessage:
    return NewMessage(Role.USER, text, client_message_id=client_id)


async def log_of(app: UseCases, episode_id: str) -> list[str]:
    page = await app.episodes.list_messages(CALLER, episode_id, 100, "")
    return [m.content for m in reversed(page.items)]


# --- open ------------------------------------------------------------------------------


async def test_opening_a_named_id_again_for_the_same_agent_and_user_resumes_it(app: UseCases) -> None:
    first, created = await app.episodes.open_episode(
        CALLER, agent_id="helper", user_id="mary", episode_id="e1"
    )
    again, created_again = await app.episodes.open_episode(
        CALLER, agent_id="helper", user_id="mary", episode_id="e1"
    )
    assert (created, created_again) == (True, False)
    assert again == first


async def test_an_episode_id_held_by_another_user_is_already_exists(app: UseCases) -> None:
    await app.open(episode_id="e1")
    with pytest.raises(AlreadyExists):
        await app.open(user_id="john", episode_id="e1")


async def test_a_closed_episode_cannot_be_opened_again(app: UseCases) -> None:
    await app.open(episode_id="e1")
    await app.close("e1")
    with pytest.raises(FailedPrecondition):
        await app.open(episode_id="e1")


async def test_an_episode_of_an_unknown_agent_is_not_found(app: UseCases) -> None:
    with pytest.raises(NotFound):
        await app.open(agent_id="nobody")


async def test_an_episode_counts_tokens_with_the_encoding_of_its_agents_model(app: UseCases) -> None:
    episode_id = await app.open()
    message, _ = await app.episodes.add_message(CALLER, episode_id, user("three short words"))
    assert (message.token_encoding, message.token_count) == ("cl100k_base", 3)


# --- append ----------------------------------------------------------------------------


async def test_messages_get_dense_seqs_and_page_back_newest_first(app: UseCases) -> None:
    episode_id = await app.open()
    await app.say(episode_id, "one", "two", "three")
    await app.episodes.add_message(CALLER, episode_id, user("four"))
    first = await app.episodes.list_messages(CALLER, episode_id, 3, "")
    second = await app.episodes.list_messages(CALLER, episode_id, 3, first.next_token)
    assert [m.seq for m in first.items] == [4, 3, 2]
    assert [m.seq for m in second.items] == [1] and not second.next_token


async def test_a_retry_with_the_same_client_message_id_returns_the_stored_message(app: UseCases) -> None:
    episode_id = await app.open()
    stored, deduplicated = await app.episodes.add_message(CALLER, episode_id, user("hi", "m-1"))
    again, deduplicated_again = await app.episodes.add_message(CALLER, episode_id, user("hi", "m-1"))
    assert (deduplicated, deduplicated_again) == (False, True)
    assert again == stored
    assert await log_of(app, episode_id) == ["hi"]


async def test_a_client_message_id_reused_for_other_content_is_already_exists(app: UseCases) -> None:
    episode_id = await app.open()
    await app.episodes.add_message(CALLER, episode_id, user("hi", "m-1"))
    with pytest.raises(AlreadyExists) as refused:
        await app.episodes.add_message(CALLER, episode_id, user("bye", "m-1"))
    assert refused.value.reason == "CLIENT_MESSAGE_ID_REUSED"
    assert await log_of(app, episode_id) == ["hi"]


async def test_a_batch_with_one_refused_message_stores_none_of_them(app: UseCases) -> None:
    episode_id = await app.open()
    orphan = NewMessage(Role.TOOL, "", tool_result=ToolResult("never-called", {"ok": True}, True))
    with pytest.raises(FailedPrecondition):
        await app.episodes.add_messages(CALLER, episode_id, [user("first"), orphan])
    assert await log_of(app, episode_id) == []


async def test_a_tool_result_joins_the_call_issued_before_it(app: UseCases) -> None:
    episode_id = await app.open()
    call = NewMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("c1", "weather", {"city": "Kyoto"}),))
    result = NewMessage(Role.TOOL, "", tool_result=ToolResult("c1", {"sky": "clear"}, True))
    await app.episodes.add_messages(CALLER, episode_id, [call, result])
    with pytest.raises(FailedPrecondition) as twice:
        await app.episodes.add_message(CALLER, episode_id, result)
    assert twice.value.reason == "TOOL_RESULT_DUPLICATE"


async def test_appending_to_a_closed_episode_is_failed_precondition(app: UseCases) -> None:
    episode_id = await app.open()
    await app.close(episode_id)
    with pytest.raises(FailedPrecondition) as refused:
        await app.episodes.add_message(CALLER, episode_id, user("still there?"))
    assert refused.value.reason == "EPISODE_CLOSED"


async def test_another_tenants_episode_is_not_found(app: UseCases) -> None:
    episode_id = await app.open()
    stranger = Caller("other-tenant")
    with pytest.raises(NotFound):
        await app.episodes.add_message(stranger, episode_id, user("hello"))
    with pytest.raises(NotFound):
        await app.episodes.get_episode(stranger, episode_id)


# --- close -----------------------------------------------------------------------------


async def test_closing_adds_a_pending_digest_and_wakes_the_digester(app: UseCases) -> None:
    episode_id = await app.open()
    closed = await app.close(episode_id)
    assert closed.state is EpisodeState.CLOSED
    assert closed.digest is not None and closed.digest.state is DigestState.PENDING
    assert app.waiter.wakes == 1


async def test_closing_again_keeps_the_first_reason_and_end_time(app: UseCases) -> None:
    episode_id = await app.open()
    first = await app.episodes.close_episode(CALLER, episode_id, reason=CloseReason.AGENT_DECISION)
    app.clock.advance(timedelta(minutes=5))
    again = await app.episodes.close_episode(CALLER, episode_id, reason=CloseReason.USER_ENDED)
    assert (again.close_reason, again.ended_at) == (CloseReason.AGENT_DECISION, first.ended_at)


async def test_a_close_that_waits_for_its_digest_returns_it_ready(app: UseCases) -> None:
    episode_id = await app.open()
    await app.say(episode_id, "I moved to Lisbon in 2021.", "Noted.")
    closing = app.episodes.close_episode(CALLER, episode_id, wait_for_digest=120.0)  # returns once READY
    closed, done = await asyncio.gather(closing, app.digester.run_once())
    assert done == 1
    assert closed.digest is not None and closed.digest.state is DigestState.READY
    assert closed.digest.summary == "I moved to Lisbon in 2021."


async def test_the_idle_reaper_closes_idle_episodes_at_their_last_activity(app: UseCases) -> None:
    quiet, busy = await app.open(episode_id="quiet"), await app.open(episode_id="busy")
    last_word = app.clock()
    app.clock.advance(timedelta(minutes=45))
    await app.say(busy, "still here")
    assert await app.reaper.sweep() == 1
    closed = await app.episodes.get_episode(CALLER, quiet)
    assert (closed.close_reason, closed.ended_at) == (CloseReason.IDLE_TIMEOUT, last_word)
    assert (await app.episodes.get_episode(CALLER, busy)).state is EpisodeState.OPEN


# --- PII policy ------------------------------------------------------------------------

EMAIL_LINE = "write to mary@example.com please"
REDACTED_LINE = "write to [EMAIL] please"


async def stored_line(app: UseCases, agent_id: str) -> str:
    episode_id = await app.open(agent_id=agent_id)
    message, _ = await app.episodes.add_message(CALLER, episode_id, user(EMAIL_LINE))
    return message.content


async def test_an_agent_that_inherits_follows_its_tenants_policy() -> None:
    app = use_cases(Settings(pii_tenants={TENANT: PiiPolicy.REDACT}))
    await app.new_agent("inherits")
    assert await stored_line(app, "inherits") == REDACTED_LINE


async def test_an_agents_own_policy_overrides_its_tenants() -> None:
    app = use_cases(Settings(pii_tenants={TENANT: PiiPolicy.REDACT}))
    await app.new_agent("keeps-all", MemoryDraft(pii_policy=PiiPolicy.OFF))
    assert await stored_line(app, "keeps-all") == EMAIL_LINE


async def test_a_tenant_without_a_policy_follows_the_server_default() -> None:
    app = use_cases(Settings(pii_default=PiiPolicy.REDACT, pii_tenants={"someone-else": PiiPolicy.OFF}))
    await app.new_agent("inherits")
    assert await stored_line(app, "inherits") == REDACTED_LINE


async def test_an_agents_new_policy_applies_to_its_next_append_at_once(app: UseCases) -> None:
    assert await stored_line(app, "helper") == EMAIL_LINE  # the OFF answer is now remembered
    draft = AgentDraft("helper", memory=MemoryDraft(pii_policy=PiiPolicy.REDACT))
    await app.agents.update_agent(CALLER, draft, ["memory_config.pii_policy"])
    assert await stored_line(app, "helper") == REDACTED_LINE  # no TTL passed: the change owner said so


# --- agent-restricted keys -------------------------------------------------------------


async def test_a_restricted_key_is_denied_an_agent_it_names_but_may_not_use(app: UseCases) -> None:
    await app.new_agent("other")
    restricted = Caller(TENANT, frozenset({"helper"}))
    with pytest.raises(PermissionDenied):
        await app.episodes.open_episode(restricted, agent_id="other", user_id="mary")


async def test_a_restricted_key_finds_no_episode_of_another_agent(app: UseCases) -> None:
    await app.new_agent("other")
    theirs = await app.open(agent_id="other")
    restricted = Caller(TENANT, frozenset({"helper"}))
    with pytest.raises(NotFound):
        await app.episodes.add_message(restricted, theirs, user("hello"))
    assert await log_of(app, theirs) == []


async def test_a_restricted_key_naming_another_agents_id_gets_one_of_its_own(app: UseCases) -> None:
    await app.new_agent("other")
    await app.open(agent_id="other", episode_id="shared-name")
    restricted = Caller(TENANT, frozenset({"helper"}))
    mine, created = await app.episodes.open_episode(
        restricted, agent_id="helper", user_id="mary", episode_id="shared-name"
    )
    again, created_again = await app.episodes.open_episode(
        restricted, agent_id="helper", user_id="mary", episode_id="shared-name"
    )
    assert mine.episode_id != "shared-name" and (created, created_again) == (True, False)
    assert again.episode_id == mine.episode_id
