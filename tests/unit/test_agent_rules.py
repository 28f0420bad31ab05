"""Agent definitions: defaults, ranges, encodings, and masked updates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.agents import AgentDraft, MemoryDraft, build_agent, update_agent
from episodic.domain.model import RecallMode
from episodic.domain.validation import Limits
from episodic.errors import InvalidArgument
from tests.fakes_tokens import WordTokenCounter

NOW = datetime(2026, 5, 1, tzinfo=UTC)
TOKENS = WordTokenCounter()


def build(draft: AgentDraft):  # type: ignore[no-untyped-def]
    return build_agent("t", draft, TOKENS, Limits(), NOW)


def fields_of(err: pytest.ExceptionInfo[InvalidArgument]) -> set[str]:
    return {v.field for v in err.value.violations}


def test_unset_memory_settings_take_the_documented_defaults() -> None:
    agent = build(AgentDraft("a1", model="gpt-4o"))
    assert agent.memory.max_working_memory_tokens == 8000
    assert agent.memory.ceiling_tokens == 89_600
    assert agent.memory.recall_mode is RecallMode.HYBRID
    assert agent.memory.idle_timeout == timedelta(minutes=30)


def test_the_encoding_follows_the_model_unless_pinned() -> None:
    assert build(AgentDraft("a1", model="gpt-4o")).token_encoding == "o200k_base"
    assert build(AgentDraft("a1", model="gpt-4")).token_encoding == "cl100k_base"
    pinned = build(AgentDraft("a1", model="gpt-4", token_encoding="o200k_base"))
    assert pinned.token_encoding == "o200k_base" and pinned.encoding_pinned


def test_an_unknown_encoding_is_rejected_naming_the_field() -> None:
    with pytest.raises(InvalidArgument) as err:
        build(AgentDraft("a1", token_encoding="p50k_base"))
    assert fields_of(err) == {"agent.token_encoding"}


def test_out_of_range_settings_are_all_reported_at_once() -> None:
    memory = MemoryDraft(max_working_memory_tokens=0, recall_top_k=1000, recall_min_score=2.0)
    with pytest.raises(InvalidArgument) as err:
        build(AgentDraft("a1", memory=memory))
    assert fields_of(err) == {
        "agent.memory_config.max_working_memory_tokens",
        "agent.memory_config.recall_top_k",
        "agent.memory_config.recall_min_score",
    }


def test_a_working_budget_above_the_ceiling_is_rejected() -> None:
    memory = MemoryDraft(max_working_memory_tokens=8000, context_window_tokens=10_000)
    with pytest.raises(InvalidArgument) as err:
        build(AgentDraft("a1", memory=memory))
    assert fields_of(err) == {"agent.memory_config.max_working_memory_tokens"}


def test_a_masked_update_changes_only_the_named_fields() -> None:
    agent = build(AgentDraft("a1", system_prompt="old", model="gpt-4"))
    draft = AgentDraft("a1", system_prompt="new", model="ignored", memory=MemoryDraft(recall_top_k=7))
    updated = update_agent(
        agent, draft, ["system_prompt", "memory_config.recall_top_k"], TOKENS, Limits(), NOW
    )
    assert (updated.system_prompt, updated.model, updated.memory.recall_top_k) == ("new", "gpt-4", 7)
    assert updated.created_at == agent.created_at


def test_changing_the_model_re_derives_an_unpinned_encoding() -> None:
    agent = build(AgentDraft("a1", model="gpt-4"))
    updated = update_agent(agent, AgentDraft("a1", model="gpt-4o"), ["model"], TOKENS, Limits(), NOW)
    assert updated.token_encoding == "o200k_base"


def test_an_unknown_mask_path_is_rejected() -> None:
    agent = build(AgentDraft("a1"))
    with pytest.raises(InvalidArgument) as err:
        update_agent(agent, AgentDraft("a1"), ["agent_id"], TOKENS, Limits(), NOW)
    assert fields_of(err) == {"update_mask"}
