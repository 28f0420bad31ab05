"""MCP tool errors: every Episodic error by the one table of codes, field names as the tool's
arguments, argument-schema failures naming the argument (never its value), and anything
unexpected as INTERNAL without its text."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from episodic import errors
from episodic.domain.model import Caller
from episodic.domain.shares import ShareLimits
from episodic.edges.grpc.status import STATUS_BY_ERROR
from episodic.edges.mcp.arguments import Arguments, RememberArguments, SearchEpisodesArguments
from episodic.edges.mcp.errors import invalid_arguments, tool_error
from episodic.edges.mcp.server import run_tool
from episodic.edges.mcp.tools import READS, TOOLS, Reply, ToolSpec
from episodic.state.shares import TenantShares


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error
    found: dict[str, Any] = result.structured_content["error"]
    return found


@pytest.mark.parametrize("kind", list(STATUS_BY_ERROR))
def test_every_episodic_error_is_a_tool_error_with_its_code(kind: type[errors.EpisodicError]) -> None:
    error = _instance(kind)
    found = _error(tool_error(error))
    assert found["code"] == STATUS_BY_ERROR[kind].name and found["reason"] == error.reason


def _instance(kind: type[errors.EpisodicError]) -> errors.EpisodicError:
    if kind is errors.NotFound:
        return errors.NotFound("episode", "ep-1")
    if kind is errors.InvalidArgument:
        return errors.InvalidArgument.of("episode_id", "is required")
    return kind("what went wrong")


def test_retryable_errors_say_when_to_retry() -> None:
    found = _error(tool_error(errors.Unavailable("the database is unreachable")))
    assert found["retry_after_seconds"] == 1 and "retry in 1 s" in found["message"]


def test_service_field_names_become_the_tools_argument_names() -> None:
    error = errors.InvalidArgument(
        [
            errors.FieldViolation("message.content", "is required"),
            errors.FieldViolation("top_k", "must be between 1 and 100"),
            errors.FieldViolation("user_message", "is required when append_user_message is set"),
        ]
    )
    renames = {"message": "", "top_k": "limit", "user_message": "message", "append_user_message": "append"}
    found = _error(tool_error(error, renames))
    assert [(f["field"], f["description"]) for f in found["fields"]] == [
        ("content", "is required"),
        ("limit", "must be between 1 and 100"),
        ("message", "is required when append is set"),
    ]


def test_schema_failures_name_the_argument_but_not_the_value() -> None:
    with pytest.raises(ValidationError) as failed:
        RememberArguments.model_validate(
            {"agent_id": "a", "text": "secret-value", "kind": "rumour", "topics": ["x", 5], "extra": 1}
        )
    found = _error(tool_error(invalid_arguments(failed.value)))
    assert {f["field"] for f in found["fields"]} == {"user_id", "kind", "topics[1]", "extra"}
    assert "rumour" not in found["message"] and "secret-value" not in str(found)


def test_a_missing_argument_is_said_to_be_required() -> None:
    with pytest.raises(ValidationError) as failed:
        SearchEpisodesArguments.model_validate({"agent_id": "a"})
    assert _error(tool_error(invalid_arguments(failed.value)))["fields"] == [
        {"field": "user_id", "description": "is required"}
    ]


def test_an_unexpected_error_is_internal_without_its_text() -> None:
    found = _error(tool_error(RuntimeError("SELECT * FROM users WHERE name = 'Ana'")))
    assert found["code"] == "INTERNAL" and "Ana" not in str(found)


def test_every_tool_lists_an_object_schema_with_described_arguments() -> None:
    for tool in TOOLS:
        schema = tool.listing().input_schema
        assert schema["type"] == "object" and schema["properties"], tool.name
        undescribed = [name for name, p in schema["properties"].items() if "description" not in p]
        assert not undescribed, (tool.name, undescribed)


def test_the_knowledge_writing_tools_are_offered_only_to_keys_that_may_write_knowledge() -> None:
    writer, reader = Caller("a"), Caller("a", writes_knowledge=False)
    offered = {t.name for t in TOOLS if t.offered_to(writer)}
    read_only = {t.name for t in TOOLS if t.offered_to(reader)}
    assert offered - read_only == {"add_document", "delete_document"}
    assert "search_knowledge" in read_only
    assert read_only == {t.name for t in TOOLS if t.offered_to(None)}


async def test_a_tool_call_over_its_tenants_share_is_a_retryable_tool_error() -> None:
    ran: list[str] = []

    async def run(_services: Any, caller: Caller, _arguments: Any) -> Reply:
        ran.append(caller.tenant_id)
        return Reply({"ok": True})

    spec = ToolSpec("noop", "Noop", "Does nothing.", NoArguments, run, READS)
    shares = TenantShares(ShareLimits(rate_per_second=0.01, rate_burst=1))
    services: Any = None  # the tool above uses none
    assert not (await run_tool(spec, services, Caller("a"), {}, shares)).is_error
    found = _error(await run_tool(spec, services, Caller("a"), {}, shares))
    assert found["code"] == "RESOURCE_EXHAUSTED" and found["reason"] == "OVER_SHARE"
    assert found["retry_after_seconds"] > 1
    assert not (await run_tool(spec, services, Caller("b"), {}, shares)).is_error  # b's share is b's
    assert ran == ["a", "b"]


class NoArguments(Arguments):
    pass
