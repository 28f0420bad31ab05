"""`episodic model-call CALL_ID [--tenant TENANT]` (in dev mode the dev tenant by default):
one stored model call (what a BuildContext rendered for the model, and why), printed for a
person to read, or as the API's JSON with `--json`. It reads the database directly with the
server's settings, like `reindex`: an operator's tool on the box, needing no API key, which
never writes."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator

from google.protobuf.json_format import MessageToJson

from episodic.bootstrap.core import open_core
from episodic.bootstrap.schema import explained_startup_failures
from episodic.config import ConfigError, Settings
from episodic.domain.context import ContextReport, ModelCall, RenderedMessage, Section
from episodic.domain.json_text import json_text
from episodic.edges.grpc.context_convert import model_call_out
from episodic.errors import NotFound

INDENT = "    "


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Exit 0 with the call printed; 1 when the tenant has no such call."""
    tenant = tenant_of(settings, args.tenant)
    try:
        call = asyncio.run(read_model_call(settings, tenant, args.model_call_id))
    except NotFound:
        print(f"episodic: no model call {args.model_call_id!r} in tenant {tenant!r}", file=sys.stderr)
        return 1
    print(as_json(call) if args.json else readable(call))
    return 0


def tenant_of(settings: Settings, given: str | None) -> str:
    """--tenant, else the dev tenant in dev mode (--insecure-dev, by flag, variable or file),
    which is where the calls of a server without keys are; else --tenant is required."""
    if given is not None:
        return given
    if settings.insecure_dev:
        return settings.dev_tenant
    raise ConfigError("model-call: --tenant is required (or --insecure-dev: the dev tenant's calls)")


async def read_model_call(settings: Settings, tenant_id: str, model_call_id: str) -> ModelCall:
    """Through the core's one door, reading only (`open_core`): the database must exist at this
    release's schema; nothing is created, migrated or written, and no model is loaded."""
    async with open_core(settings, reads_only=True, models=False) as opened:
        with explained_startup_failures(opened.database):
            return await opened.adapters.context.get_call(tenant_id, model_call_id)


def as_json(call: ModelCall) -> str:
    return MessageToJson(model_call_out(call), indent=2)


def readable(call: ModelCall) -> str:
    return "\n".join([*_header(call), "", *_messages(call.messages)])


def _header(call: ModelCall) -> Iterator[str]:
    r = call.report
    yield f"model call {call.model_call_id}"
    yield from _fields(
        ("episode", f"{call.episode_id} (agent {call.agent_id}, user {call.user_id})"),
        ("turn", _turn(r)),
        ("when", call.created_at.isoformat()),
        ("trace id", r.trace_id or "-"),
        ("request id", call.request_id or "-"),
        ("model", f"{r.model} ({r.token_encoding})"),
        ("budget", _budget(r)),
        ("tokens", _section_tokens(r)),
        ("compaction", f"{r.compaction.value}; pruned {r.pruned}, stubbed {r.stubbed}"),
        ("reply", _reply(call)),
    )
    yield from _recalled(r)


def _fields(*pairs: tuple[str, str]) -> Iterator[str]:
    width = max(len(name) for name, _ in pairs)
    for name, value in pairs:
        yield f"{INDENT}{name:<{width}}  {value}"


def _turn(r: ContextReport) -> str:
    parts = [
        f"user message seq {r.user_message_seq}"
        if r.user_message_seq
        else "user message not appended to the log"
    ]
    if r.summary_span.to_seq:
        parts.append(f"summary of seq {r.summary_span.from_seq}-{r.summary_span.to_seq}")
    if r.history_span.to_seq:
        parts.append(f"history seq {r.history_span.from_seq}-{r.history_span.to_seq}")
    return "; ".join(parts)


def _budget(r: ContextReport) -> str:
    over = " OVER BUDGET" if r.over_budget else ""
    return f"{r.total_tokens} of {r.budget} tokens (ceiling {r.ceiling}){over}"


def _section_tokens(r: ContextReport) -> str:
    shown = [
        f"{section.value} {r.section_tokens[section]}" for section in Section if section in r.section_tokens
    ]
    return ", ".join([*shown, f"reply priming {r.reply_priming}"])


def _reply(call: ModelCall) -> str:
    reply = call.reply
    if reply is None:
        return "not recorded"
    seq = f", assistant message seq {reply.assistant_message_seq}" if reply.assistant_message_seq else ""
    seconds = reply.latency.total_seconds()
    return f"{reply.input_tokens} input, {reply.output_tokens} output tokens in {seconds:.2f} s{seq}"


def _recalled(r: ContextReport) -> Iterator[str]:
    if r.recalled:
        yield f"{INDENT}recalled episodes ({r.pending_digests} still being digested):"
        for episode in r.recalled:
            ended = f"ended {episode.ended_at.date().isoformat()}, " if episode.ended_at else ""
            shown = "rendered" if episode.rendered else "not rendered (no room)"
            yield f"{INDENT * 2}{episode.episode_id}  score {episode.score:.3f}, {ended}{shown}"
    if r.memories:
        yield f"{INDENT}memories:"
        for memory in r.memories:
            shown = "rendered" if memory.rendered else "not rendered (no room)"
            pending = ", pending (this episode's working memory)" if memory.pending else ""
            yield f"{INDENT * 2}{memory.memory_id}  score {memory.score:.3f}, {shown}{pending}"
    if r.session_keys:
        yield f"{INDENT}session data keys: {', '.join(r.session_keys)}"


def _messages(messages: tuple[RenderedMessage, ...]) -> Iterator[str]:
    for m in messages:
        yield _message_heading(m)
        for line in m.content.splitlines():
            yield f"{INDENT}{line}" if line.strip() else ""
        for call in m.tool_calls:
            yield f"{INDENT}-> {call.tool_name}({json_text(call.input)})  [call {call.tool_call_id}]"
        yield ""


def _message_heading(m: RenderedMessage) -> str:
    details = [f"{m.tokens} tokens"]
    if m.seq:
        details.append(f"seq {m.seq}")
    if m.tool_call_id:
        details.append(f"answers call {m.tool_call_id}")
    if m.stubbed:
        details.append("stubbed")
    return f"[{m.role.value}] ({m.section.value}) {', '.join(details)}"
