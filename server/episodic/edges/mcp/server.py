"""The MCP server (the SDK's low-level `Server`): lists the tools and runs a call as the
caller its transport authenticated. A call never raises out of here: arguments that do
not fit the tool's schema, Episodic's errors and anything unexpected all become tool
errors (see `episodic.mcp.errors`); only an unknown tool name is a protocol error."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeAlias

from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)
from pydantic import ValidationError

from episodic import __version__
from episodic.domain.model import Caller
from episodic.edges.mcp.errors import as_text, invalid_arguments, tool_error
from episodic.edges.mcp.tools import TOOLS, TOOLS_BY_NAME, ToolSpec
from episodic.errors import Unauthenticated
from episodic.service.services import Services
from episodic.state.shares import TenantShares

log = logging.getLogger("episodic.mcp")

Context: TypeAlias = "ServerRequestContext[Any, Any]"
CallerOf = Callable[[Context], Caller | None]

INSTRUCTIONS = (
    "Episodic is the memory of an agent's conversations with its users. Record each "
    "conversation (start_episode, add_message, close_episode), call get_context before "
    "answering to see what the model should know, search_episodes for earlier conversations, "
    "and search_memories / remember / forget for durable facts about the user. "
    "search_knowledge finds passages in the agent's own documents (add_document and "
    "delete_document maintain them, with a key allowed to write knowledge)."
)


def build_server(services: Services, caller_of: CallerOf, shares: TenantShares | None = None) -> Server[Any]:
    """`caller_of` names who is calling from the request's context (None: nobody); each
    call is held to its tenant's `shares`, as over gRPC. The tools listed are the caller's:
    a key that may not write knowledge is not offered the tools that write it."""
    listings = {tool.name: tool.listing() for tool in TOOLS}

    async def list_tools(ctx: Context, params: PaginatedRequestParams | None) -> ListToolsResult:
        caller = caller_of(ctx)
        return ListToolsResult(tools=[listings[t.name] for t in TOOLS if t.offered_to(caller)])

    async def call_tool(ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {params.name!r}; see tools/list")
        return await run_tool(spec, services, caller_of(ctx), params.arguments or {}, shares)

    return Server(
        "episodic",
        version=__version__,
        title="Episodic memory",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def run_tool(
    spec: ToolSpec[Any],
    services: Services,
    caller: Caller | None,
    arguments: dict[str, Any],
    shares: TenantShares | None = None,
) -> CallToolResult:
    started = time.perf_counter()
    result = await _outcome(spec, services, caller, arguments, shares)
    code = "OK" if not result.is_error else str(result.structured_content["error"]["code"])
    log.info(
        "mcp tool call",
        extra={
            "tool": spec.name,
            "code": code,
            "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    return result


async def _outcome(
    spec: ToolSpec[Any],
    services: Services,
    caller: Caller | None,
    arguments: dict[str, Any],
    shares: TenantShares | None,
) -> CallToolResult:
    try:
        parsed = spec.arguments.model_validate(arguments)
    except ValidationError as exc:
        return tool_error(invalid_arguments(exc))
    try:
        if caller is None:  # the transport refuses such calls first; never served as anyone
            raise Unauthenticated("missing or unknown API key", reason="API_KEY_INVALID")
        if shares is None:
            reply = await spec.run(services, caller, parsed)
        else:
            async with shares.serving(caller.tenant_id):
                reply = await spec.run(services, caller, parsed)
    except Exception as exc:
        return tool_error(exc, spec.renames)
    text = reply.text if reply.text is not None else as_text(reply.data)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=reply.data)
