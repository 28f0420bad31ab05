"""Traces of a real server: one SERVER span per RPC (health checks excluded) carrying the
final gRPC status code, even for calls rejected by the interceptors; GenAI memory spans as
its children; no message text or user ids on spans unless content capture is on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from episodic.edges.grpc.interceptors import ErrorInterceptor
from episodic.errors import InvalidArgument, NotFound
from episodic.telemetry.instrumentation import server_interceptor
from episodic.telemetry.tracing import Tracing
from episodic.v1 import episode_pb2, episode_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client, expect_code, user_message
from tests.server_harness import KEY_A, RunningServer, running_server, settings_for

pb = episode_service_pb2
EPISODES = "/episodic.v1.EpisodeService"
STATUS_CODE = "rpc.grpc.status_code"
SECRET = "tangerine"  # message and query text that must not leak into spans
SPAN_SECONDS = 30.0  # how long a finished RPC's span may take to be exported


@dataclass(frozen=True)
class Traced:
    server: RunningServer
    spans: InMemorySpanExporter

    async def one(self, name: str) -> ReadableSpan:
        return await one_span(self.spans, name)


async def one_span(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    """The single span of that name; a span ends as its RPC completes, so wait for it (the
    guard is against a hang, never a measurement: a loaded machine ends spans late)."""
    deadline = asyncio.get_running_loop().time() + SPAN_SECONDS
    while asyncio.get_running_loop().time() < deadline:
        if found := [s for s in spans.get_finished_spans() if s.name == name]:
            assert len(found) == 1, f"{len(found)} spans named {name}"
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no span named {name}; have {[s.name for s in spans.get_finished_spans()]}")


def status_code(span: ReadableSpan) -> object:
    return (span.attributes or {}).get(STATUS_CODE)


def in_memory(exporter: InMemorySpanExporter, capture_content: bool = False) -> Tracing:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # Simple: spans export as they end
    return Tracing(provider, capture_content, release=provider.shutdown)


@asynccontextmanager
async def traced_server(database_url: str, capture_content: bool = False) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    tracing = in_memory(exporter, capture_content)
    async with running_server(settings_for(database_url), tracing) as server:
        yield Traced(server, exporter)
    tracing.shutdown()


@pytest.fixture
async def traced(sqlite_url: str) -> AsyncIterator[Traced]:
    async with traced_server(sqlite_url) as running:
        yield running


@pytest.fixture
async def alice(traced: Traced) -> AsyncIterator[Client]:
    async with traced.server.channel() as channel:
        yield Client.of(channel, KEY_A)


def child_of(parent: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def attribute_values(spans: Sequence[ReadableSpan]) -> list[str]:
    return [str(value) for span in spans for value in (span.attributes or {}).values()]


async def test_each_rpc_gets_one_server_span_named_after_its_method(traced: Traced, alice: Client) -> None:
    episode_id = await alice.open_episode()
    await alice.episodes.AddMessage(
        pb.AddMessageRequest(episode_id=episode_id, message=user_message("hi")), metadata=alice.auth
    )
    for name in (
        "/episodic.v1.AgentService/CreateAgent",
        f"{EPISODES}/OpenEpisode",
        f"{EPISODES}/AddMessage",
    ):
        span = await traced.one(name)
        assert span.kind is SpanKind.SERVER and span.parent is None
        assert span.attributes is not None and span.attributes["rpc.system"] == "grpc"
        assert status_code(span) == 0 and span.attributes["rpc.method"] == name.rsplit("/", 1)[1]


async def test_health_checks_are_not_traced(traced: Traced) -> None:
    async with traced.server.channel() as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    await asyncio.sleep(0.05)
    assert traced.spans.get_finished_spans() == ()


async def test_failed_calls_carry_their_status_code(traced: Traced, alice: Client) -> None:
    await expect_code(
        alice.episodes.AddMessage(pb.AddMessageRequest(episode_id=""), metadata=alice.auth),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    await expect_code(
        alice.episodes.GetEpisode(pb.GetEpisodeRequest(episode_id="ep_missing"), metadata=alice.auth),
        grpc.StatusCode.NOT_FOUND,
    )
    assert status_code(await traced.one(f"{EPISODES}/AddMessage")) == 3
    assert status_code(await traced.one(f"{EPISODES}/GetEpisode")) == 5


async def test_a_call_without_a_key_is_traced_as_unauthenticated(traced: Traced) -> None:
    async with traced.server.channel() as channel:
        anonymous = Client.of(channel, None)
        await expect_code(
            anonymous.episodes.GetEpisode(pb.GetEpisodeRequest(episode_id="ep_1")),
            grpc.StatusCode.UNAUTHENTICATED,
        )
    assert status_code(await traced.one(f"{EPISODES}/GetEpisode")) == 16


async def test_appending_makes_a_create_memory_span_under_the_rpc(traced: Traced, alice: Client) -> None:
    episode_id = await alice.open_episode()
    added = await alice.episodes.AddMessage(
        pb.AddMessageRequest(episode_id=episode_id, message=user_message(f"my {SECRET} note")),
        metadata=alice.auth,
    )
    await alice.add(episode_id, user_message("one"), user_message("two"))
    single, batch = await traced.one(f"{EPISODES}/AddMessage"), await traced.one(f"{EPISODES}/AddMessages")
    spans = traced.spans.get_finished_spans()
    (memory,) = child_of(single, spans)
    assert memory.name == "create_memory" and memory.kind is SpanKind.INTERNAL
    assert memory.attributes == {
        "gen_ai.operation.name": "create_memory",
        "gen_ai.conversation.id": episode_id,
        "gen_ai.memory.record.count": 1,
        "gen_ai.memory.record.id": f"{episode_id}/{added.message.seq}",
    }
    (batch_memory,) = child_of(batch, spans)
    assert batch_memory.attributes is not None and batch_memory.attributes["gen_ai.memory.record.count"] == 2
    assert not [value for value in attribute_values(spans) if SECRET in value]


async def test_a_failed_append_marks_its_memory_span_as_an_error(traced: Traced, alice: Client) -> None:
    request = pb.AddMessageRequest(episode_id="ep_missing", message=user_message("hello"))
    await expect_code(alice.episodes.AddMessage(request, metadata=alice.auth), grpc.StatusCode.NOT_FOUND)
    rpc = await traced.one(f"{EPISODES}/AddMessage")
    (memory,) = child_of(rpc, traced.spans.get_finished_spans())
    assert memory.status.status_code is StatusCode.ERROR
    assert status_code(rpc) == 5


async def remembered(client: Client, user_id: str) -> str:
    """An agent with one closed, digested conversation of `user_id`."""
    agent_id = await client.create_agent()
    episode_id = await client.open_episode(agent_id, user_id)
    await client.add(episode_id, user_message(f"I grow {SECRET} trees in my garden"))
    closed = await client.close_digested(episode_id)  # waits on the digest's state, not a deadline
    assert closed.digest.state == episode_pb2.DIGEST_STATE_READY
    return agent_id


async def search_spans(traced: Traced, client: Client) -> tuple[ReadableSpan, list[ReadableSpan], str]:
    """Searches a remembered conversation; returns the RPC span, all spans and the user id."""
    user_id = unique("mary")
    agent_id = await remembered(client, user_id)
    request = pb.SearchEpisodesRequest(
        agent_id=agent_id, user_id=user_id, mode=pb.SEARCH_MODE_HYBRID, query=SECRET
    )
    found = await client.episodes.SearchEpisodes(request, metadata=client.auth)
    assert len(found.snippets) == 1
    rpc = await traced.one(f"{EPISODES}/SearchEpisodes")
    return rpc, list(traced.spans.get_finished_spans()), user_id


async def test_searching_makes_a_search_memory_span_without_content(traced: Traced, alice: Client) -> None:
    rpc, spans, user_id = await search_spans(traced, alice)
    (memory,) = child_of(rpc, spans)
    assert memory.name == "search_memory" and memory.kind is SpanKind.INTERNAL
    assert memory.attributes is not None
    assert memory.attributes["gen_ai.operation.name"] == "search_memory"
    assert memory.attributes["gen_ai.memory.record.count"] == 1
    assert memory.attributes["episodic.search.mode"] == "hybrid"
    assert "gen_ai.memory.query.text" not in memory.attributes
    values = attribute_values(spans)
    assert not [v for v in values if SECRET in v or user_id in v or "tenant-a" in v]


async def test_content_capture_puts_the_query_on_the_search_span(sqlite_url: str) -> None:
    async with traced_server(sqlite_url, capture_content=True) as traced, traced.server.channel() as channel:
        rpc, spans, _ = await search_spans(traced, Client.of(channel, KEY_A))
    (memory,) = child_of(rpc, spans)
    assert memory.attributes is not None and memory.attributes["gen_ai.memory.query.text"] == SECRET


# --- server-streaming handlers ------------------------------------------------------------
# No streaming RPC is served yet, so a test-only method runs behind the same interceptors.


@dataclass
class RecordedAccess:
    lines: list[tuple[str, str, str]]

    def record(self, method: str, code: str, duration_ms: float, peer: str, trace_id: str = "") -> None:
        self.lines.append((method, code, trace_id))

    def close(self) -> None:
        return None


def streaming_method(fail: Callable[[], Exception]) -> grpc.RpcMethodHandler[Any, Any]:
    async def stream(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        yield b"first"
        raise fail()

    return grpc.unary_stream_rpc_method_handler(stream)


@asynccontextmanager
async def streaming_server(tracing: Tracing, access: RecordedAccess) -> AsyncIterator[grpc.aio.Channel]:
    server = grpc.aio.server(interceptors=[server_interceptor(tracing), ErrorInterceptor(access)])
    methods = {
        "NotFound": streaming_method(lambda: NotFound("episode", "ep_gone")),
        "Invalid": streaming_method(lambda: InvalidArgument.of("query", "is required")),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Streams", methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(grace=1)


async def read_stream(channel: grpc.aio.Channel, method: str) -> grpc.StatusCode:
    call = channel.unary_stream(f"/test.Streams/{method}", None, None)(b"")  # raw bytes both ways
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


async def test_streaming_failures_carry_their_status_code_and_trace_id() -> None:
    exporter, access = InMemorySpanExporter(), RecordedAccess([])
    tracing = in_memory(exporter)
    async with streaming_server(tracing, access) as channel:
        assert await read_stream(channel, "NotFound") == grpc.StatusCode.NOT_FOUND
        assert await read_stream(channel, "Invalid") == grpc.StatusCode.INVALID_ARGUMENT
    not_found = await one_span(exporter, "/test.Streams/NotFound")
    invalid = await one_span(exporter, "/test.Streams/Invalid")
    assert (status_code(not_found), status_code(invalid)) == (5, 3)
    assert access.lines == [
        ("/test.Streams/NotFound", "NOT_FOUND", f"{not_found.context.trace_id:032x}"),
        ("/test.Streams/Invalid", "INVALID_ARGUMENT", f"{invalid.context.trace_id:032x}"),
    ]
    tracing.shutdown()
