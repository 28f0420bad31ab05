"""`episodic mcp` over stdio, driven by the official MCP SDK's client as a host application
would: the real command in a subprocess, its API key from the environment, a whole
conversation's life (recorded, rendered, closed, found again), the long-term memory tools
and the knowledge tools (the key may write knowledge, so all of them are offered); the
refusals to start without a usable key; and a SIGTERM that stops it even while the host
keeps stdin open."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from episodic.cli.serve_mcp import serve_mcp
from episodic.config import ConfigError, Settings
from episodic.edges.keys import config_line
from tests.e2e.helpers import clean_environment, run_process
from tests.polling import eventually
from tests.server_harness import KEY_A, KEY_B, TENANT_A

EPISODIC = str(Path(sys.executable).parent / "episodic")
TOOLS = {
    "search_episodes",
    "get_context",
    "start_episode",
    "add_message",
    "close_episode",
    "search_memories",
    "list_users",
    "remember",
    "forget",
    "create_agent",
    "search_knowledge",
    "add_document",
    "delete_document",
}
USER_SAYS = "We are planning a trip to Lisbon in May with my sister Ana."


def _server(database_url: str, env: dict[str, str]) -> StdioServerParameters:
    args = ["mcp", "--database-url", database_url, "--embedder", "hashing", "--idle-sweep-seconds", "3600"]
    return StdioServerParameters(command=EPISODIC, args=args, env=env)


@asynccontextmanager
async def mcp_session(database_url: str, stderr: Path) -> AsyncIterator[ClientSession]:
    keys = config_line(TENANT_A, KEY_A, knowledge_write=True)
    env = {"EPISODIC_API_KEYS": keys, "EPISODIC_MCP_API_KEY": KEY_A}
    with stderr.open("w") as log:
        async with (
            stdio_client(_server(database_url, env), errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def test_a_host_drives_conversations_and_memories_over_stdio(sqlite_url: str, tmp_path: Path) -> None:
    stderr = tmp_path / "mcp.log"
    async with mcp_session(sqlite_url, stderr) as session:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        assert all(t.description and t.input_schema.get("type") == "object" for t in listed.tools)
        await call(session, "create_agent", agent_id="travel", system_prompt="You plan trips.")
        await _record_render_close_and_find(session)
        await _remember_find_and_forget(session)
        await _add_find_and_delete_a_document(session)
    assert "Lisbon" not in stderr.read_text()  # logs carry no user content


async def _record_render_close_and_find(session: ClientSession) -> None:
    opened = await call(session, "start_episode", agent_id="travel", user_id="u-1")
    episode_id = opened["episode_id"]
    await call(session, "add_message", episode_id=episode_id, role="user", content=USER_SAYS)
    await call(session, "add_message", episode_id=episode_id, role="assistant", content="Lovely! Dates?")

    rendered = await session.call_tool("get_context", {"episode_id": episode_id, "message": "Any tips?"})
    assert not rendered.is_error, _text(rendered)
    assert USER_SAYS in _text(rendered) and "You plan trips." in _text(rendered)
    context = rendered.structured_content or {}
    assert context["model_call_id"] and context["messages"][-1]["content"] == "Any tips?"

    closed = await call(session, "close_episode", episode_id=episode_id)
    assert closed["state"] == "closed"

    async def found() -> bool:
        hits = await call(session, "search_episodes", agent_id="travel", user_id="u-1", query="Lisbon trip")
        return episode_id in [e["episode_id"] for e in hits["episodes"]]

    assert await eventually(found, timeout=30), "the closed conversation never became searchable"
    users = await call(session, "list_users", agent_id="travel")
    assert [(u["user_id"], u["episodes"], u["open_episodes"]) for u in users["users"]] == [("u-1", 1, 0)]
    assert users["next_page_token"] == ""


async def _remember_find_and_forget(session: ClientSession) -> None:
    made = await call(
        session, "remember", agent_id="travel", user_id="u-1", text="Prefers window seats", kind="preference"
    )
    assert made["outcome"] == "created" and made["state"] == "promoted"
    search = {"agent_id": "travel", "user_id": "u-1", "query": "window seats"}

    hits = await call(session, "search_memories", **search)
    assert made["memory_id"] in [m["memory_id"] for m in hits["memories"]]

    await call(session, "forget", memory_id=made["memory_id"])
    after = await call(session, "search_memories", **search)
    assert made["memory_id"] not in [m["memory_id"] for m in after["memories"]]
    again = await session.call_tool("forget", {"memory_id": made["memory_id"]})
    assert again.is_error and (again.structured_content or {})["error"]["code"] == "NOT_FOUND"


async def _add_find_and_delete_a_document(session: ClientSession) -> None:
    text = "# Visas\n\nTravellers to Lisbon from the EU need no visa; an identity card is enough."
    made = await call(
        session, "add_document", agent_id="travel", document_id="visas", text=text, title="Visas"
    )
    assert made["created"] and made["chunk_count"] == 1

    found = await call(session, "search_knowledge", agent_id="travel", query="visa identity card")
    best = found["chunks"][0]
    assert (best["document_id"], best["title"], best["chunk_index"]) == ("visas", "Visas", 0)
    assert text[best["start_char"] : best["end_char"]] == best["text"]

    await call(session, "delete_document", agent_id="travel", document_id="visas")
    after = await call(session, "search_knowledge", agent_id="travel", query="visa identity card")
    assert after["chunks"] == []


async def test_stdio_without_a_key_refuses_to_start(sqlite_url: str) -> None:
    env = clean_environment() | {"EPISODIC_API_KEYS": config_line(TENANT_A, KEY_A)}
    done = await run_process(EPISODIC, "mcp", "--database-url", sqlite_url, env=env)
    assert done.returncode == 2
    assert "mcp_api_key: required over stdio" in done.stderr


async def test_stdio_with_a_key_not_configured_refuses_to_start_before_opening_the_database(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "never-created.db"
    settings = Settings(
        database_url=f"sqlite:///{missing}", api_keys=config_line(TENANT_A, KEY_A), mcp_api_key=KEY_B
    )
    with pytest.raises(ConfigError, match="mcp_api_key: not one of the configured API keys") as refused:
        await serve_mcp(settings)
    assert KEY_B not in str(refused.value) and not missing.exists()


async def test_sigterm_stops_the_server_while_the_host_keeps_stdin_open(sqlite_url: str) -> None:
    env = clean_environment() | {
        "EPISODIC_API_KEYS": config_line(TENANT_A, KEY_A),
        "EPISODIC_MCP_API_KEY": KEY_A,
    }
    proc = await asyncio.create_subprocess_exec(
        EPISODIC,
        *_server(sqlite_url, env).args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stderr is not None
        while b"serving MCP on stdio" not in await asyncio.wait_for(proc.stderr.readline(), 60):
            pass
        proc.send_signal(signal.SIGTERM)
        returncode = await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert returncode == 0
