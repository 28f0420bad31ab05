"""Crash durability (DESIGN §7): the real `episodic serve`, under concurrent AddMessage load
and with digests in flight, is killed with SIGKILL and restarted on the same database.
Every acknowledged message is there exactly once with its seq and content, seqs are dense,
and once every digest has settled the index (each scope loaded from SQL on its first search
after the restart) holds exactly what SQL holds.
Calls in flight at the kill may or may not have been stored; nothing else may appear.
Memories acknowledged before the load are all there after the restart, promoted (some
promotions were in flight at the kill), and found in the memory index loaded from SQL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from episodic.v1 import (
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from tests.e2e.helpers import Client, assert_serving, clean_environment, expire_digest_leases, user_message

pytestmark = pytest.mark.slow  # a server process killed under load, then restarted

EPISODES = 8
WORKERS = 16
CLOSED_EARLY = 2  # closed halfway through the load: digested (or not) before the kill
CLOSED_AT_KILL = 2  # closed just before the kill: their digests are in flight
LOAD_HALF_SECONDS = 0.75  # a load window, not a measurement
START_TIMEOUT_SECONDS = 30.0
CALL_TIMEOUT_SECONDS = 20.0
TOPICS = ("flights to Lisbon", "the cat's vet visit", "passport renewal", "a birthday cake", "tax forms")


# --- the server process -----------------------------------------------------------------


@dataclass(frozen=True)
class ServerProcess:
    proc: asyncio.subprocess.Process
    port: int

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(f"127.0.0.1:{self.port}")

    async def kill(self) -> None:
        """SIGKILL to the server's whole process group: no shutdown code runs."""
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


def serve_command(database_url: str) -> tuple[str, ...]:
    return (
        sys.executable, "-m", "episodic", "serve", "--insecure-dev", "--migrate-on-start",
        "--database-url", database_url, "--address", "127.0.0.1:0", "--embedder", "hashing",
        "--no-access-log",
    )  # fmt: skip


@asynccontextmanager
async def episodic_server(database_url: str, log_path: Path) -> AsyncIterator[ServerProcess]:
    """The server in a process group of its own, up and SERVING; killed on the way out
    whatever happened, so a failing test leaves no server behind."""
    with log_path.open("wb") as log_file:  # a file, not a pipe nobody drains
        proc = await asyncio.create_subprocess_exec(
            *serve_command(database_url), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=log_file, env=clean_environment(),
            cwd=log_path.parent, process_group=0,
        )  # fmt: skip
        server = ServerProcess(proc, 0)
        try:
            port = await asyncio.wait_for(serving_port(proc, log_path), START_TIMEOUT_SECONDS)
            server = ServerProcess(proc, port)
            async with server.channel() as channel:
                await assert_serving(channel)
            yield server
        finally:
            await server.kill()


async def serving_port(proc: asyncio.subprocess.Process, log_path: Path) -> int:
    """The port from the server's JSON "serving" log line (it was started on port 0)."""
    while True:
        log = await asyncio.to_thread(log_path.read_text, errors="replace")
        for line in log.splitlines():
            with suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("message") == "serving":
                    return int(entry["port"])
        if proc.returncode is not None:
            log = await asyncio.to_thread(log_path.read_text)
            raise AssertionError(f"server exited with {proc.returncode}:\n{log}")
        await asyncio.sleep(0.05)


# --- the load ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    episode_id: str
    client_message_id: str
    content: str


@dataclass
class Load:
    """What the workers sent and what the server acknowledged, keyed by client_message_id."""

    open_episodes: list[str]
    closed_episodes: list[str] = field(default_factory=list)
    sent: dict[str, Sent] = field(default_factory=dict)
    acknowledged: dict[str, int] = field(default_factory=dict)  # -> the acknowledged seq
    in_flight: set[str] = field(default_factory=set)
    in_flight_at_kill: frozenset[str] = frozenset()
    refused_before_kill: list[grpc.StatusCode] = field(default_factory=list)
    killed: bool = False


async def add_until_killed(client: Client, load: Load, worker: int) -> None:
    """One message at a time, round-robin over the episodes still open."""
    n = 0
    while not load.killed:
        message = Sent(
            episode_id=load.open_episodes[(worker + n) % len(load.open_episodes)],
            client_message_id=f"w{worker}-m{n}",
            content=f"Worker {worker}, message {n}: a note about {TOPICS[(worker + n) % len(TOPICS)]}.",
        )
        n += 1
        await add_one(client, load, message)


async def add_one(client: Client, load: Load, message: Sent) -> None:
    request = episode_service_pb2.AddMessageRequest(
        episode_id=message.episode_id, message=user_message(message.content, message.client_message_id)
    )
    load.sent[message.client_message_id] = message
    load.in_flight.add(message.client_message_id)
    try:
        reply = await client.episodes.AddMessage(request, timeout=CALL_TIMEOUT_SECONDS)
    except grpc.aio.AioRpcError as err:
        if not load.killed:
            load.refused_before_kill.append(err.code())
        return
    finally:
        load.in_flight.discard(message.client_message_id)
    # Also after the kill: a reply the server sent before it died is an acknowledgement.
    load.acknowledged[message.client_message_id] = reply.message.seq


async def close_without_waiting(client: Client, load: Load, count: int) -> None:
    """Closes `count` episodes while the load goes on; the workers leave them first (calls
    already on their way to one are refused with FAILED_PRECONDITION)."""
    for _ in range(count):
        episode_id = load.open_episodes.pop()
        request = episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id, wait_for_digest=False)
        await client.episodes.CloseEpisode(request, timeout=CALL_TIMEOUT_SECONDS)
        load.closed_episodes.append(episode_id)


async def load_then_kill(client: Client, server: ServerProcess, load: Load) -> None:
    workers = [asyncio.create_task(add_until_killed(client, load, w)) for w in range(WORKERS)]
    try:
        await asyncio.sleep(LOAD_HALF_SECONDS)
        await close_without_waiting(client, load, CLOSED_EARLY)
        await asyncio.sleep(LOAD_HALF_SECONDS)
        await close_without_waiting(client, load, CLOSED_AT_KILL)
        load.killed = True
        load.in_flight_at_kill = frozenset(load.in_flight)
        await server.kill()
    finally:
        load.killed = True
        await asyncio.gather(*workers)
    assert load.in_flight_at_kill, "no AddMessage call was in flight at the kill"
    assert server.proc.returncode == -signal.SIGKILL


# --- after the restart ------------------------------------------------------------------


async def stored_log(client: Client, episode_id: str) -> list[episode_pb2.Message]:
    """Every message of the episode, paged through ListMessages, in seq order."""
    messages: list[episode_pb2.Message] = []
    token = ""
    while True:
        request = episode_service_pb2.ListMessagesRequest(
            episode_id=episode_id, page_size=1000, page_token=token
        )
        page = await client.episodes.ListMessages(request, timeout=CALL_TIMEOUT_SECONDS)
        messages.extend(page.messages)
        token = page.next_page_token
        if not token:
            return sorted(messages, key=lambda m: m.seq)


async def check_episode(client: Client, load: Load, episode_id: str) -> dict[str, int]:
    """Asserts the episode's log is dense, holds only messages sent to it (each once, as
    sent) and every acknowledged one with its seq; returns client_message_id -> seq stored."""
    log = await stored_log(client, episode_id)
    request = episode_service_pb2.GetEpisodeRequest(episode_id=episode_id)
    episode = (await client.episodes.GetEpisode(request, timeout=CALL_TIMEOUT_SECONDS)).episode
    assert [m.seq for m in log] == list(range(1, len(log) + 1)), f"{episode_id}: seqs are not dense"
    assert episode.message_count == len(log), f"{episode_id}: message_count disagrees with the log"
    stored = {m.client_message_id: m.seq for m in log}
    assert len(stored) == len(log), f"{episode_id}: a client_message_id is stored twice"
    unsent = [m for m in log if load.sent.get(m.client_message_id) != Sent(episode_id, *as_sent(m))]
    assert not unsent, f"{episode_id}: stored but never sent like this: {unsent[:3]}"
    acknowledged = {i: seq for i, seq in load.acknowledged.items() if load.sent[i].episode_id == episode_id}
    lost = {i: (seq, stored.get(i)) for i, seq in acknowledged.items() if stored.get(i) != seq}
    assert not lost, f"{episode_id}: acknowledged (seq) -> stored (seq): {lost}"
    if episode_id in load.closed_episodes:
        assert episode.state == episode_pb2.Episode.STATE_CLOSED, f"{episode_id}: acknowledged close lost"
    return stored


def as_sent(message: episode_pb2.Message) -> tuple[str, str]:
    return message.client_message_id, message.content


async def check_every_log(client: Client, load: Load, episode_ids: list[str]) -> dict[str, int]:
    """check_episode for each; also, what is stored unacknowledged was in flight at the kill."""
    stored: dict[str, int] = {}
    for episode_id in episode_ids:
        stored |= await check_episode(client, load, episode_id)
    unacknowledged = stored.keys() - load.acknowledged.keys()
    assert unacknowledged <= load.in_flight_at_kill, "stored, never acknowledged, not in flight"
    return stored


async def settle_every_digest(client: Client, episode_ids: list[str]) -> list[episode_pb2.Episode]:
    """Closes every episode (a no-op for the closed ones) and waits for each digest to
    settle (its state polled: see settled_digest)."""
    return list(await asyncio.gather(*(client.close_digested(e) for e in episode_ids)))


async def check_index(client: Client, agent_id: str = "") -> diagnostics_service_pb2.CheckIndexResponse:
    request = diagnostics_service_pb2.CheckIndexRequest(agent_id=agent_id)
    return await client.diagnostics.CheckIndex(request, timeout=CALL_TIMEOUT_SECONDS)


# --- the test ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FirstLife:
    agent_id: str
    episode_ids: list[str]
    load: Load
    memories: dict[str, tuple[str, str]]  # acknowledged memory id -> (user, text)


async def remember(client: Client, agent_id: str, episode_ids: list[str]) -> dict[str, tuple[str, str]]:
    """A PENDING memory in every episode (promoted when its digest is made, some of them at
    the kill) and a long-term one per user; returns the acknowledged ones."""
    requests = [
        (f"user-{i % 3}", episode_id, f"Note {i}: the user cares about {TOPICS[i % len(TOPICS)]}")
        for i, episode_id in enumerate(episode_ids)
    ]
    requests += [
        (f"user-{u}", "", f"Long-term: user {u} plays the {('cello', 'oboe', 'harp')[u]}") for u in range(3)
    ]
    made: dict[str, tuple[str, str]] = {}
    for user, episode_id, text in requests:
        scope = ("", "") if episode_id else (agent_id, user)  # lazy in the episode, or eager
        request = memory_service_pb2.CreateMemoriesRequest(
            agent_id=scope[0], user_id=scope[1], episode_id=episode_id, memories=[_memory(text)]
        )
        reply = await client.memories.CreateMemories(request, timeout=CALL_TIMEOUT_SECONDS)
        made |= {r.memory.memory_id: (user, r.memory.text) for r in reply.results}
    assert len(made) == len(requests), "a memory merged into another: make the texts differ more"
    return made


def _memory(text: str) -> memory_service_pb2.MemoryInput:
    return memory_service_pb2.MemoryInput(text=text, kind=memory_pb2.MEMORY_KIND_FACT)


async def check_memories(client: Client, agent_id: str, memories: dict[str, tuple[str, str]]) -> None:
    """Every acknowledged memory is there and promoted, and the rebuilt memory index finds it
    by its own text."""
    for memory_id, (user, text) in memories.items():
        request = memory_service_pb2.GetMemoryRequest(memory_id=memory_id)
        got = (await client.memories.GetMemory(request, timeout=CALL_TIMEOUT_SECONDS)).memory
        assert (got.text, got.state) == (text, memory_pb2.MEMORY_STATE_PROMOTED), memory_id
        search = memory_service_pb2.SearchMemoriesRequest(
            agent_id=agent_id,
            user_id=user,
            query=text,
            top_k=1,
            mode=episode_service_pb2.SEARCH_MODE_SEMANTIC,
        )
        hits = (await client.memories.SearchMemories(search, timeout=CALL_TIMEOUT_SECONDS)).hits
        assert [h.memory.memory_id for h in hits] == [memory_id], f"{memory_id} is not in the rebuilt index"


async def load_and_kill_a_server(database_url: str, log_path: Path) -> FirstLife:
    async with episodic_server(database_url, log_path) as server, server.channel() as channel:
        client = Client.of(channel, None)  # --insecure-dev: the dev tenant
        agent_id = await client.create_agent()
        episode_ids = [await client.open_episode(agent_id, user_id=f"user-{i % 3}") for i in range(EPISODES)]
        memories = await remember(client, agent_id, episode_ids)
        load = Load(open_episodes=list(episode_ids))
        await load_then_kill(client, server, load)
    assert set(load.refused_before_kill) <= {grpc.StatusCode.FAILED_PRECONDITION}, load.refused_before_kill
    return FirstLife(agent_id, episode_ids, load, memories)


async def test_a_server_killed_under_load_loses_no_acknowledged_message_and_rebuilds_its_index(
    database_url: str, tmp_path: Path
) -> None:
    life = await load_and_kill_a_server(database_url, tmp_path / "killed.log")
    still_leased = await expire_digest_leases(database_url, life.agent_id)

    restarted = episodic_server(database_url, tmp_path / "restarted.log")
    async with restarted as server, server.channel() as channel:
        client = Client.of(channel, None)
        stored = await check_every_log(client, life.load, life.episode_ids)
        settled = await settle_every_digest(client, life.episode_ids)
        ours, tenant = await check_index(client, life.agent_id), await check_index(client)
        await check_memories(client, life.agent_id, life.memories)

    ready = episode_pb2.DIGEST_STATE_READY
    unsettled = {e.episode_id: e.digest.state for e in settled if e.digest.state != ready}
    assert not unsettled, f"digests not READY after the restart: {unsettled}"
    assert ours.sql_vectors == ours.index_vectors >= EPISODES
    assert (ours.missing, ours.orphaned) == (0, 0), (ours.missing_keys, ours.orphaned_keys)
    assert (tenant.missing, tenant.orphaned) == (0, 0), (tenant.missing_keys, tenant.orphaned_keys)
    load = life.load
    print(
        f"\nacknowledged {len(load.acknowledged)}, stored {len(stored)} (in flight at the kill "
        f"{len(load.in_flight_at_kill)}), refused before the kill {len(load.refused_before_kill)}, "
        f"digests still leased {still_leased}, vectors sql {ours.sql_vectors} index {ours.index_vectors}"
    )
