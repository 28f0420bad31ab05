"""The access log of a live server says what happened at the level it deserves: a health
probe is a DEBUG line, a caller's miss is an INFO line with its reason, and a
LangGraph put of a new key is one CreateMemories call that succeeds (no NOT_FOUND first)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic_client import AsyncEpisodicClient, EpisodicClient, NotFoundError
from episodic_client.integrations.langgraph import EpisodicStore
from tests.conftest import unique
from tests.server_harness import KEY_A, running_server, settings_for

HEALTH = "/grpc.health.v1.Health/Check"
MEMORY = "/episodic.v1.MemoryService/"


def access_lines(stderr: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == "episodic.access"]


async def probe(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_probes_are_debug_a_miss_has_its_reason_and_a_new_keys_put_misses_nothing(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """With DEBUG on (at INFO the probe's line is not written: tests/unit/test_access_log.py)."""
    caplog.set_level(logging.DEBUG, logger="episodic.access")
    async with running_server(settings_for(sqlite_url, access_log=True)) as server:  # logs to our stderr
        await probe(server.address)
        async with AsyncEpisodicClient(server.address, api_key=KEY_A) as client:
            with pytest.raises(NotFoundError):
                await client.get_episode(unique("missing"))

        def put_new_and_old_keys() -> str:
            with EpisodicClient(server.address, api_key=KEY_A, timeout=10.0) as sync:
                agent_id = sync.create_agent(unique("agent")).agent.agent_id
                store = EpisodicStore(sync, agent_id)
                store.put(("mary", "prefs"), "drink", {"text": "tea"})  # new
                store.put(("mary", "prefs"), "drink", {"text": "coffee"})  # written by this store
                assert store.get(("mary", "prefs"), "drink") is not None
                other = EpisodicStore(sync, agent_id)
                assert other.get(("mary", "prefs"), "drink") is not None  # read, then put
                other.put(("mary", "prefs"), "drink", {"text": "water"})
                return agent_id

        await asyncio.to_thread(put_new_and_old_keys)

    lines = access_lines(capsys.readouterr().err)
    health = [line for line in lines if line["rpc_method"] == HEALTH]
    assert [(line["level"], line["grpc_code"]) for line in health] == [("DEBUG", "OK")], "one probe, at DEBUG"
    (miss,) = [line for line in lines if line["rpc_method"].endswith("/GetEpisode")]
    assert (miss["level"], miss["grpc_code"], miss["reason"]) == ("INFO", "NOT_FOUND", "EPISODE_NOT_FOUND")
    memory_calls = [
        (line["rpc_method"].removeprefix(MEMORY), line["grpc_code"])
        for line in lines
        if line["rpc_method"].startswith(MEMORY)
    ]
    assert memory_calls == [
        ("CreateMemories", "OK"),  # a new key: created, no UpdateMemory NOT_FOUND first
        ("UpdateMemory", "OK"),  # a key this store wrote: updated, no CreateMemories ALREADY_EXISTS
        ("GetMemory", "OK"),
        ("GetMemory", "OK"),
        ("UpdateMemory", "OK"),  # a key the other store read
    ]
    assert all(line["level"] == "INFO" for line in lines if line["rpc_method"] != HEALTH)
