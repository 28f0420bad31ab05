"""BuildContext traces: phase spans under the RPC's server span, with token and id
attributes; rendered text only when content capture is on; failures show their code."""

from __future__ import annotations

import json

import grpc

from episodic.v1 import agent_pb2
from tests.e2e.context_helpers import build, create_agent
from tests.e2e.helpers import Client, expect_code
from tests.e2e.test_rpc_tracing import STATUS_CODE, one_span, traced_server
from tests.server_harness import KEY_A

RPC = "/episodic.v1.ContextService/BuildContext"
PHASES = ("load_working_set", "recall", "reduce", "render", "persist")


async def test_build_context_phases_are_child_spans_with_token_and_id_attributes(sqlite_url: str) -> None:
    async with traced_server(sqlite_url) as traced, traced.server.channel() as channel:
        client = Client.of(channel, KEY_A)
        agent_id = await create_agent(client, recall_mode=agent_pb2.RECALL_MODE_RECENCY)
        episode_id = await client.open_episode(agent_id)
        built = await build(client, episode_id, user_message="tangerine secrets")
        server = await one_span(traced.spans, RPC)
        assert built.report.trace_id == format(server.context.trace_id, "032x")
        for name in PHASES:
            phase = await one_span(traced.spans, name)
            assert phase.parent is not None and phase.parent.span_id == server.context.span_id
            assert (phase.attributes or {})["gen_ai.conversation.id"] == episode_id
        render = (await one_span(traced.spans, "render")).attributes or {}
        assert render["gen_ai.usage.input_tokens"] == built.report.total_tokens
        assert render["episodic.model_call.id"] == built.report.model_call_id
        assert await one_span(traced.spans, "search_memory")  # recall's memory span
        for span in traced.spans.get_finished_spans():
            assert "tangerine" not in json.dumps(dict(span.attributes or {}))


async def test_rendered_messages_go_on_spans_only_with_content_capture(sqlite_url: str) -> None:
    async with traced_server(sqlite_url, capture_content=True) as traced, traced.server.channel() as channel:
        client = Client.of(channel, KEY_A)
        episode_id = await client.open_episode()
        await build(client, episode_id, user_message="tangerine")
        render = (await one_span(traced.spans, "render")).attributes or {}
        messages = json.loads(str(render["gen_ai.input.messages"]))
        assert messages[-1] == {"role": "user", "parts": [{"type": "text", "content": "tangerine"}]}


async def test_a_failing_build_context_shows_its_status_code_on_the_span(sqlite_url: str) -> None:
    async with traced_server(sqlite_url) as traced, traced.server.channel() as channel:
        client = Client.of(channel, KEY_A)
        await expect_code(build(client, "no-such-episode", user_message="x"), grpc.StatusCode.NOT_FOUND)
        span = await one_span(traced.spans, RPC)
        assert (span.attributes or {})[STATUS_CODE] == grpc.StatusCode.NOT_FOUND.value[0]
