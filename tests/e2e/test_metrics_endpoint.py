"""Prometheus metrics of a real server on --metrics-address: what a scrape shows after a few
RPCs, what it never shows (tenant and user ids), paths other than /metrics, and scrapes made
while the server shuts down (a full answer or a refused connection, nothing in between, but
the kernel's reset of a connection left in the listen backlog)."""

from __future__ import annotations

import asyncio
import http.client
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from episodic.bootstrap.containers import Replacements
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.v1 import episode_service_pb2, knowledge_service_pb2
from tests.e2e.context_helpers import build
from tests.e2e.helpers import Client, expect_code, user_message
from tests.server_harness import KEY_A, TENANT_A, settings_for

ADD_MESSAGE = "episodic.v1.EpisodeService/AddMessage"
BUILD_CONTEXT = "episodic.v1.ContextService/BuildContext"
OPEN_EPISODE = "episodic.v1.EpisodeService/OpenEpisode"
USER_ID = "user-7f3a9c"


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


def get(port: int, path: str = "/metrics", method: str = "GET") -> Answer:
    """One HTTP request (blocking: run it in a thread, the server shares the event loop)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return Answer(response.status, response.read().decode())
    finally:
        connection.close()


async def scrape(port: int, path: str = "/metrics", method: str = "GET") -> Answer:
    return await asyncio.to_thread(get, port, path, method)


def samples(text: str, name: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def value(text: str, name: str, **labels: str) -> float:
    found = [s.value for s in samples(text, name) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


@asynccontextmanager
async def metered_server(database_url: str) -> AsyncIterator[tuple[str, int]]:
    """The gRPC address and the metrics port of a server with metrics on."""
    settings = settings_for(database_url, metrics_address="127.0.0.1:0")
    async with open_app(settings) as app, serve_app(app, grace_seconds=1) as grpc_server:
        assert app.metrics.port is not None
        yield f"127.0.0.1:{grpc_server.port}", app.metrics.port


async def a_few_rpcs(address: str) -> list[str]:
    """An AddMessage, a BuildContext, a refused OpenEpisode and a closed episode; returns
    the ids they made."""
    async with grpc.aio.insecure_channel(address) as channel:
        client = Client.of(channel, KEY_A)
        agent_id = await client.create_agent()
        episode_id = await client.open_episode(agent_id, user_id=USER_ID)
        add = episode_service_pb2.AddMessageRequest(episode_id=episode_id, message=user_message("hi"))
        await client.episodes.AddMessage(add, metadata=client.auth)
        doc = knowledge_service_pb2.DocumentInput(document_id="faq", text="What we said is kept here.")
        create = knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=[doc])
        await client.knowledge.CreateDocuments(create, metadata=client.auth)
        await build(client, episode_id, user_message="What did we say?", append_user_message=True)
        bad = episode_service_pb2.OpenEpisodeRequest(agent_id="", user_id=USER_ID)
        await expect_code(
            client.episodes.OpenEpisode(bad, metadata=client.auth), grpc.StatusCode.INVALID_ARGUMENT
        )
        closed = await client.open_episode(agent_id, user_id=USER_ID)
        close = episode_service_pb2.CloseEpisodeRequest(episode_id=closed)
        await client.episodes.CloseEpisode(close, metadata=client.auth)
        return [agent_id, episode_id, closed]


async def test_a_scrape_shows_rpcs_renders_and_state_and_no_tenant_or_user_ids(database_url: str) -> None:
    settings = settings_for(database_url, metrics_address="127.0.0.1:0")
    # no digester: the closed episode stays in the digest queue
    async with (
        open_app(settings, replace=Replacements(background=False)) as app,
        serve_app(app, grace_seconds=1) as grpc_server,
    ):
        ids = await a_few_rpcs(f"127.0.0.1:{grpc_server.port}")
        assert app.metrics.port is not None
        # cluster-wide: on the run's shared PostgreSQL, other tests' closed episodes wait too,
        # and may come and go while we scrape: a scrape counts when the queue held still
        for _ in range(20):
            before = await app.adapters.sql_digests.waiting()
            answer = await scrape(app.metrics.port)
            if await app.adapters.sql_digests.waiting() == before:
                break
        waiting = {state: count for state, count, _ in before}

    assert answer.status == 200
    text = answer.body
    rpcs = "episodic_rpc_server_duration_seconds_count"
    assert value(text, rpcs, rpc_method=ADD_MESSAGE, rpc_response_status_code="OK") == 1
    assert value(text, rpcs, rpc_method=BUILD_CONTEXT, rpc_response_status_code="OK") == 1
    assert value(text, rpcs, rpc_method=OPEN_EPISODE, rpc_response_status_code="INVALID_ARGUMENT") == 1
    assert value(text, rpcs, rpc_method=OPEN_EPISODE, rpc_response_status_code="OK") == 2

    tokens = "episodic_context_section_tokens"
    for section in ("system", "user_message", "history"):
        assert value(text, f"{tokens}_count", section=section) == 1
        assert value(text, f"{tokens}_sum", section=section) > 0
    observed = {s.labels["section"] for s in samples(text, f"{tokens}_count")}
    assert "summary" not in observed, "an absent section is not observed (with 0): it skewed averages"
    assert value(text, "episodic_recall_duration_seconds_count", episodic_search_mode="hybrid") == 1

    assert value(text, "episodic_working_set_count") == 1
    assert value(text, "episodic_working_set_usage_bytes") > 0
    assert value(text, "episodic_working_set_evictions_total") == 0
    assert value(text, "episodic_db_writer_batch_size_count") >= 4  # agent, opens, appends, the call
    assert value(text, "episodic_db_writer_batch_size_sum") >= value(
        text, "episodic_db_writer_batch_size_count"
    )
    used = samples(text, "episodic_db_client_connection_count")
    assert {s.labels["db_client_connection_pool_name"] for s in used} >= {"main"}
    assert all(s.value >= 0 for s in used)
    assert waiting.get("pending", 0) >= 1  # this test's closed episode
    assert value(text, "episodic_digest_queue_depth", state="pending") == waiting["pending"]
    assert value(text, "episodic_digest_queue_depth", state="failed") == waiting.get("failed", 0)
    assert 0 <= value(text, "episodic_digest_queue_oldest_age_seconds", state="pending") < 600
    assert value(text, "episodic_knowledge_search_duration_seconds_count", episodic_search_mode="hybrid") == 1
    assert value(text, "episodic_knowledge_documents") >= 1  # cluster-wide: other tests may add theirs
    assert value(text, "episodic_knowledge_chunks") >= 1
    assert value(text, "episodic_knowledge_cache_usage_bytes") > 0  # the turn's one chunk, read in
    assert value(text, "episodic_index_vectors", index="knowledge") == 1
    for index in ("episodes", "memories", "knowledge"):
        assert value(text, "episodic_index_scopes", index=index) >= 0
        assert value(text, "episodic_index_vectors", index=index) >= 0

    for private in (TENANT_A, USER_ID, *ids, "What did we say"):
        assert private not in text


async def test_only_get_metrics_is_served(sqlite_url: str) -> None:
    async with metered_server(sqlite_url) as (_, port):
        assert (await scrape(port, "/")).status == 404
        assert (await scrape(port, "/metrics/extra")).status == 404
        assert (await scrape(port, "/metrics", "POST")).status == 405
        assert (await scrape(port, "/metrics?name[]=x")).status == 200


async def test_metrics_are_off_by_default(sqlite_url: str) -> None:
    async with open_app(settings_for(sqlite_url)) as app, serve_app(app, grace_seconds=1):
        assert not app.metrics.enabled
        assert app.metrics.port is None


async def scrapes_until_refused(port: int) -> list[str]:
    """Scrapes back to back until the endpoint refuses; each outcome named."""
    outcomes: list[str] = []
    while True:
        try:
            answer = await asyncio.wait_for(scrape(port), 15)
        except ConnectionRefusedError:
            outcomes.append("refused")
            return outcomes
        except Exception as exc:  # a reset, a truncated body, a hang: what must not happen
            outcomes.append(f"broken: {type(exc).__name__}: {exc}")
            return outcomes
        complete = answer.status == 200 and "episodic_working_set_count" in answer.body
        outcomes.append("full" if complete else f"broken: {answer.status}")
        if not complete:
            return outcomes


async def scrape_once_not_serving(watch: AsyncIterator[health_pb2.HealthCheckResponse], port: int) -> Answer:
    """A scrape made as soon as health says NOT_SERVING: the server is shutting down, and
    the open health watch holds its drain for the grace."""
    async for update in watch:
        if update.status == health_pb2.HealthCheckResponse.NOT_SERVING:
            return await scrape(port)
    raise AssertionError("the watch ended before NOT_SERVING")


async def test_scrapes_during_shutdown_get_a_full_answer_or_a_refused_connection(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with metered_server(sqlite_url) as (address, port):
        channel = grpc.aio.insecure_channel(address)
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
        during = asyncio.create_task(scrape_once_not_serving(watch, port))
        scraping = asyncio.create_task(scrapes_until_refused(port))
        await asyncio.sleep(0.2)  # a few scrapes while serving; the rest as it shuts down
    outcomes = await asyncio.wait_for(scraping, 30)
    draining = await asyncio.wait_for(during, 30)
    await channel.close(None)
    assert draining.status == 200 and "episodic_working_set_count" in draining.body
    # A connection the kernel completed into the listen backlog just as the listener closed
    # is reset by the kernel, never seen by the server: as good as refused (no answer begun).
    assert outcomes[-1] == "refused" or outcomes[-1].startswith("broken: ConnectionResetError"), outcomes
    assert set(outcomes[:-1]) == {"full"}, outcomes
    assert not [r for r in caplog.records if r.name.startswith("episodic.telemetry")]


@pytest.mark.parametrize("tenant_labels", [False, True])
async def test_refusals_are_counted_by_share_and_name_the_tenant_only_when_opted_in(
    database_url: str, tenant_labels: bool
) -> None:
    settings = settings_for(
        database_url,
        metrics_address="127.0.0.1:0",
        tenant_rate_per_second=0.01,
        tenant_rate_burst=1,
        metrics_tenant_labels=tenant_labels,
    )
    async with (
        open_app(settings, replace=Replacements(background=False)) as app,
        serve_app(app, grace_seconds=1) as grpc_server,
        grpc.aio.insecure_channel(f"127.0.0.1:{grpc_server.port}") as channel,
    ):
        client = Client.of(channel, KEY_A)
        await client.create_agent()  # the burst
        await expect_code(client.create_agent(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert app.metrics.port is not None
        text = (await scrape(app.metrics.port)).body
    (refusal,) = samples(text, "episodic_share_refusals_total")
    assert refusal.value == 1 and refusal.labels["episodic_share"] == "requests_per_second"
    assert (refusal.labels.get("episodic_tenant") == TENANT_A) is tenant_labels
    assert (TENANT_A in text) is tenant_labels
