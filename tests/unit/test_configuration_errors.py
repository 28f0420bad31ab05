"""A configuration problem says "invalid configuration", a malformed request "invalid request";
either way the status code, the reason and the field violations are the same as before."""

from __future__ import annotations

import grpc
import pytest

from episodic.domain.agents import AgentDraft, MemoryDraft
from episodic.edges.grpc.status import rich_status
from episodic.errors import InvalidArgument
from episodic.service.context import ContextRequest
from episodic.store.database import normalize_url
from tests.unit.use_cases import CALLER, use_cases


async def test_an_agent_wrong_only_in_its_memory_configuration_is_invalid_configuration() -> None:
    app = use_cases()
    draft = AgentDraft("helper", model="gpt-4o", memory=MemoryDraft(recall_top_k=1000))
    with pytest.raises(InvalidArgument) as refused:
        await app.agents.create_agent(CALLER, draft)
    error = refused.value
    assert error.message.startswith("invalid configuration: agent.memory_config.recall_top_k: ")
    assert [v.field for v in error.violations] == ["agent.memory_config.recall_top_k"]
    code, status = rich_status(error)
    assert code is grpc.StatusCode.INVALID_ARGUMENT and error.reason == "INVALID_ARGUMENT"
    assert status.message == error.message


async def test_an_agent_with_a_bad_id_is_still_an_invalid_request() -> None:
    app = use_cases()
    draft = AgentDraft("not an id!", model="gpt-4o", memory=MemoryDraft(recall_top_k=1000))
    with pytest.raises(InvalidArgument) as refused:
        await app.agents.create_agent(CALLER, draft)
    assert refused.value.message.startswith("invalid request: agent.agent_id: ")
    assert {v.field for v in refused.value.violations} == {
        "agent.agent_id",
        "agent.memory_config.recall_top_k",
    }


async def test_a_bad_memory_override_on_build_context_is_invalid_configuration() -> None:
    app = use_cases()
    await app.new_agent()
    episode_id = await app.open()
    override = MemoryDraft(
        context_window_tokens=1000, context_ceiling_percent=50, max_working_memory_tokens=600
    )
    with pytest.raises(InvalidArgument) as refused:
        await app.context.build(CALLER, ContextRequest(episode_id, "hi", memory=override))
    assert refused.value.message.startswith(
        "invalid configuration: memory_config.max_working_memory_tokens: "
    )


async def test_a_malformed_build_context_request_is_an_invalid_request() -> None:
    app = use_cases()
    with pytest.raises(InvalidArgument) as refused:
        await app.context.build(CALLER, ContextRequest(""))
    assert refused.value.message == "invalid request: episode_id: is required"


def test_a_database_url_of_another_kind_is_invalid_configuration() -> None:
    with pytest.raises(InvalidArgument) as refused:
        normalize_url("mysql://db/x")
    assert (
        refused.value.message
        == "invalid configuration: database_url: must be a sqlite:// or postgresql:// URL"
    )
    assert [v.field for v in refused.value.violations] == ["database_url"]
