"""`episodic mcp` over streamable HTTP, driven by the official MCP SDK's client: every
request carries its own API key (none or a wrong one: 401 before MCP), tenants and
agent-restricted keys are held apart as over gRPC, bad arguments are tool errors that
name the argument while the server keeps serving, and clients of both protocol eras (the
initialize handshake and the newest, stateless one) are served."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from episodic.bootstrap.lifecycle import open_app
from episodic.config import Settings
from episodic.edges.keys import config_line
from episodic.edges.mcp.auth import UNAUTHENTICATED
from episodic.edges.mcp.serve import MCP_PATH, bound, serve_http
from tests.server_harness import KEY_A, KEY_B, TENANT_A, TENANT_B, settings_for

KEY_ONLY_TRAVEL = "epk_test_tenant_a_travel_only_0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def _settings(sqlite_url: str, **overrides: object) -> Settings:
    keys = [config_line(TENANT_A, KEY_A), config_line(TENANT_B, KEY_B)]
    keys.append(config_line(TENANT_A, KEY_ONLY_TRAVEL, ["travel"]))
    return settings_for(sqlite_url, api_keys=",".join(keys), **overrides)


@asynccontextmanager
async def mcp_http(settings: Settings) -> AsyncIterator[str]:
    with bound("127.0.0.1", 0) as sock:
        async with open_app(settings) as app, serve_http(app, sock) as port:
            yield f"http://127.0.0.1:{port}{MCP_PATH}"


@asynccontextmanager
async def connected(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_of(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error and isinstance(result.structured_content, dict), result
    error: dict[str, Any] = result.structured_content["error"]
    return error


async def _post_initialize(url: str, headers: dict[str, str]) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        return await http.post(
            url, json=INITIALIZE, headers={"Accept": "application/json, text/event-stream", **headers}
        )


async def test_a_request_without_a_key_is_refused_before_mcp(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url:
        raw = await _post_initialize(url, {})
        async with connected(url, None) as session:
            with pytest.raises(MCPError) as refused:
                await session.initialize()
    assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith("Bearer")
    assert raw.json()["error"]["code"] == UNAUTHENTICATED
    assert refused.value.error.code == UNAUTHENTICATED and "API key" in refused.value.error.message


async def test_a_wrong_key_is_refused_even_in_insecure_dev_where_no_key_is_the_dev_tenant(
    sqlite_url: str,
) -> None:
    async with mcp_http(_settings(sqlite_url, insecure_dev=True)) as url:
        for wrong in ({"Authorization": "Bearer epk_typo"}, {"Authorization": f"Basic {KEY_A}"}):
            assert (await _post_initialize(url, wrong)).status_code == 401
        async with connected(url, None) as session:
            await session.initialize()
            made = await call(session, "create_agent", agent_id="dev-agent")
    assert made["agent_id"] == "dev-agent"


async def test_a_tenant_cannot_reach_another_tenants_conversations_or_memories(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url:
        async with connected(url, KEY_A) as a:
            await a.initialize()
            await call(a, "create_agent", agent_id="travel")
            episode = (await call(a, "start_episode", agent_id="travel", user_id="u-1"))["episode_id"]
            await call(a, "add_message", episode_id=episode, role="user", content="My passport number is X1")
            memory = (await call(a, "remember", agent_id="travel", user_id="u-1", text="Lives in Porto"))[
                "memory_id"
            ]
        async with connected(url, KEY_B) as b:
            await b.initialize()
            seen = [
                await b.call_tool("get_context", {"episode_id": episode}),
                await b.call_tool("add_message", {"episode_id": episode, "role": "user", "content": "hi"}),
                await b.call_tool("forget", {"memory_id": memory}),
                await b.call_tool(
                    "search_memories", {"agent_id": "travel", "user_id": "u-1", "query": "Porto"}
                ),
            ]
            await call(b, "create_agent", agent_id="travel")  # the same id in B's own namespace
            own = await call(b, "search_memories", agent_id="travel", user_id="u-1", query="Porto")
    assert [error_of(r)["code"] for r in seen] == ["NOT_FOUND"] * 4
    assert own["memories"] == []


async def test_a_key_restricted_to_some_agents_cannot_use_the_others(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url:
        async with connected(url, KEY_A) as a:
            await a.initialize()
            await call(a, "create_agent", agent_id="travel")
            await call(a, "create_agent", agent_id="billing")
        async with connected(url, KEY_ONLY_TRAVEL) as restricted:
            await restricted.initialize()
            await call(restricted, "start_episode", agent_id="travel", user_id="u-1")
            refused = await restricted.call_tool("start_episode", {"agent_id": "billing", "user_id": "u-1"})
    assert error_of(refused)["code"] == "PERMISSION_DENIED"


BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("start_episode", {"agent_id": "travel"}, "user_id"),  # missing
    ("start_episode", {"agent_id": "travel", "user_id": 7}, "user_id"),  # wrong type
    ("start_episode", {"agent_id": "no spaces!", "user_id": "u-1"}, "agent_id"),  # the domain's id rule
    ("search_episodes", {"agent_id": "travel", "user_id": "u-1", "limit": 500}, "limit"),
    ("search_episodes", {"agent_id": "travel", "user_id": "u-1", "query": " "}, "query"),  # hybrid needs one
    ("search_memories", {"agent_id": "travel", "user_id": "u-1", "kinds": ["rumour"]}, "kinds[0]"),
    ("add_message", {"episode_id": "ep-1", "role": "robot", "content": "hi"}, "role"),
    ("remember", {"agent_id": "travel", "user_id": "u-1", "text": "x", "event_time": "soon"}, "event_time"),
    ("get_context", {"episode_id": "ep-1", "append_message": True}, "message"),
    ("forget", {"memory_id": "m-1", "memoryid": "m-1"}, "memoryid"),  # unknown argument
    ("list_users", {"agent_id": "travel", "limit": 500}, "limit"),
    ("list_users", {"agent_id": "travel", "page_token": "not a token"}, "page_token"),  # the service's
]


async def test_bad_arguments_are_tool_errors_naming_the_argument(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url, connected(url, KEY_A) as session:
        await session.initialize()
        await call(session, "create_agent", agent_id="travel")
        for tool, arguments, field in BAD_ARGUMENTS:
            error = error_of(await session.call_tool(tool, arguments))
            assert error["code"] == "INVALID_ARGUMENT", (tool, arguments, error)
            named = [f["field"] for f in error["fields"]]
            assert field in named and field in error["message"], (tool, arguments, error)
        still_serving = await session.list_tools()
    assert len(still_serving.tools) == 11  # KEY_A may not write knowledge here: no add/delete_document


async def test_an_unknown_tool_is_a_protocol_error(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url, connected(url, KEY_A) as session:
        await session.initialize()
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("drop_everything", {})
        assert (await session.list_tools()).tools
    assert unknown.value.error.code == INVALID_PARAMS and "drop_everything" in unknown.value.error.message


async def test_a_client_of_the_newest_protocol_is_served_too(sqlite_url: str) -> None:
    async with (
        mcp_http(_settings(sqlite_url)) as url,
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY_A}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        made = await client.call_tool("create_agent", {"agent_id": "travel"})
        missing = await client.call_tool("start_episode", {"agent_id": "travel"})
        version = client.protocol_version
    assert version in MODERN_PROTOCOL_VERSIONS
    assert not made.is_error and error_of(missing)["fields"][0]["field"] == "user_id"
