"""Scale-out: three real `episodic serve` replicas (A, B, C) on one throwaway PostgreSQL
database. What one replica commits, the others show within the visibility bound (polled
here with a generous deadline; the latency itself is measured by `episodic-lab
bench-replicas`); an erasure through one leaves no vector in any; a replica SIGKILLed under
round-robin load loses no acknowledged write and its digests are taken over; a rolling
restart fails no call of a client that retries UNAVAILABLE; a watcher on one replica sees
what is pushed through another.

One cluster serves the whole module; a test that kills or restarts a replica leaves all
three serving again (the `replicas` fixture starts any that is down)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import grpc
import pytest

from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
    knowledge_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from tests.e2e.context_helpers import Built, build, create_agent
from tests.e2e.helpers import Client, assert_serving, expect_code, expire_digest_leases, user_message
from tests.e2e.replicas import Cluster, Replica, running_cluster

pytestmark = pytest.mark.postgres

T = TypeVar("T")
es, ms, ks = episode_service_pb2, memory_service_pb2, knowledge_service_pb2
NAMES = ("A", "B", "C")
# The bound is 1 s p99; on a loaded 2-core machine a test only asks for "soon".
VISIBILITY_DEADLINE_SECONDS = 10.0
CALL_TIMEOUT_SECONDS = 20.0
LISBON = ["I booked a flight to Lisbon for the conference", "Great, the conference is in May"]
VET = ["My cat Miso needs a vet appointment", "The vet is open on Saturday mornings"]
TOPICS = ("flights to Lisbon", "the cat's vet visit", "passport renewal", "a birthday cake")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(NAMES, tmp_path_factory.mktemp("replicas")) as running:
        yield running


@dataclass
class Replicas:
    """A client of each replica by name, and one that round-robins over all of them."""

    cluster: Cluster
    by_name: dict[str, Client]
    any: Client

    def __getitem__(self, name: str) -> Client:
        return self.by_name[name]


@pytest.fixture
async def replicas(cluster: Cluster) -> AsyncIterator[Replicas]:
    await cluster.serving()
    channels = {r.name: r.channel() for r in cluster.replicas}
    round_robin = cluster.round_robin()
    try:
        yield Replicas(
            cluster, {n: Client.of(c, None) for n, c in channels.items()}, Client.of(round_robin, None)
        )
    finally:
        for channel in (*channels.values(), round_robin):
            await channel.close(None)


# --- polling ------------------------------------------------------------------------------


async def eventually(what: str, check: Callable[[], Awaitable[T | None]]) -> T:
    """The check's first truthy answer; fails once the deadline has passed without one."""
    deadline = time.monotonic() + VISIBILITY_DEADLINE_SECONDS
    while True:
        answer = await check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {VISIBILITY_DEADLINE_SECONDS:.0f} s: {what}")
        await asyncio.sleep(0.05)


# --- calls --------------------------------------------------------------------------------


async def semantic_agent(client: Client) -> str:
    """An agent whose BuildContext recalls by meaning: served from the vector index, the
    state each replica keeps in RAM."""
    return await create_agent(client, recall_mode=agent_pb2.RECALL_MODE_SEMANTIC, recall_min_score=0.0)


async def converse(client: Client, agent_id: str, user: str, lines: list[str]) -> str:
    """An episode written and closed through `client`, its digest READY."""
    episode_id = await client.open_episode(agent_id, user_id=user)
    await client.add(episode_id, *(user_message(line) for line in lines))
    closed = await client.close_digested(episode_id)
    assert closed.digest.state == episode_pb2.DIGEST_STATE_READY, closed.digest
    return episode_id


async def searched(client: Client, agent_id: str, user: str, query: str) -> set[str]:
    request = es.SearchEpisodesRequest(
        agent_id=agent_id, user_id=user, mode=es.SEARCH_MODE_SEMANTIC, query=query, top_k=10
    )
    reply = await client.episodes.SearchEpisodes(request, timeout=CALL_TIMEOUT_SECONDS)
    return {s.episode_id for s in reply.snippets}


async def recalled(client: Client, episode_id: str, query: str) -> set[str]:
    built = await build(client, episode_id, user_message=query, timeout=CALL_TIMEOUT_SECONDS)
    return {r.episode_id for r in built.report.recalled_episodes}


async def remember(client: Client, agent_id: str, user: str, text: str) -> str:
    request = ms.CreateMemoriesRequest(
        agent_id=agent_id,
        user_id=user,
        placement=ms.MEMORY_PLACEMENT_EAGER,
        memories=[ms.MemoryInput(text=text, kind=memory_pb2.MEMORY_KIND_FACT)],
    )
    reply = await client.memories.CreateMemories(request, timeout=CALL_TIMEOUT_SECONDS)
    return str(reply.results[0].memory.memory_id)


async def memories_found(client: Client, agent_id: str, user: str, query: str) -> set[str]:
    request = ms.SearchMemoriesRequest(
        agent_id=agent_id, user_id=user, query=query, top_k=10, mode=es.SEARCH_MODE_SEMANTIC
    )
    reply = await client.memories.SearchMemories(request, timeout=CALL_TIMEOUT_SECONDS)
    return {h.memory.memory_id for h in reply.hits}


async def finds_episode(client: Client, agent_id: str, user: str, query: str, wanted: str) -> bool:
    return wanted in await searched(client, agent_id, user, query)


async def recalls(client: Client, episode_id: str, query: str, wanted: str) -> bool:
    return wanted in await recalled(client, episode_id, query)


async def finds_memory(client: Client, agent_id: str, user: str, query: str, wanted: str) -> bool:
    return wanted in await memories_found(client, agent_id, user, query)


async def check_index(client: Client, agent_id: str) -> diagnostics_service_pb2.CheckIndexResponse:
    request = diagnostics_service_pb2.CheckIndexRequest(agent_id=agent_id)
    return await client.diagnostics.CheckIndex(request, timeout=CALL_TIMEOUT_SECONDS)


async def index_agrees(client: Client, agent_id: str) -> diagnostics_service_pb2.CheckIndexResponse | None:
    report = await check_index(client, agent_id)
    return report if (report.missing, report.orphaned) == (0, 0) else None


async def assert_index_agrees_everywhere(
    replicas: Replicas, agent_id: str, names: tuple[str, ...] = NAMES
) -> None:
    for name in names:
        report = await eventually(
            f"CheckIndex 0 missing 0 orphaned on {name}", partial(index_agrees, replicas[name], agent_id)
        )
        assert report.sql_vectors == report.index_vectors, name


# --- visibility ---------------------------------------------------------------------------


async def test_a_digest_made_through_one_replica_is_recalled_by_search_and_build_context_on_the_others(
    replicas: Replicas,
) -> None:
    a = replicas["A"]
    agent_id = await semantic_agent(a)
    lisbon = await converse(a, agent_id, "mary", LISBON)

    for name in ("B", "C"):
        other = replicas[name]
        await eventually(
            f"SearchEpisodes on {name} finds the digest made on A",
            partial(finds_episode, other, agent_id, "mary", "flight to Lisbon", lisbon),
        )
        probe = await other.open_episode(agent_id, user_id="mary")
        await eventually(
            f"BuildContext on {name} recalls the digest made on A",
            partial(recalls, other, probe, "When is my Lisbon flight?", lisbon),
        )
    await assert_index_agrees_everywhere(replicas, agent_id)


async def test_a_memory_created_through_one_replica_is_found_on_the_others(replicas: Replicas) -> None:
    agent_id = await replicas["A"].create_agent()
    memory_id = await remember(replicas["A"], agent_id, "mary", "Mary plays the cello on Sundays")

    for name in ("B", "C"):
        await eventually(
            f"SearchMemories on {name} finds the memory created on A",
            partial(finds_memory, replicas[name], agent_id, "mary", "cello", memory_id),
        )


async def test_a_user_erased_through_one_replica_is_gone_from_the_others_and_from_every_index(
    replicas: Replicas,
) -> None:
    a, c = replicas["A"], replicas["C"]
    agent_id = await semantic_agent(a)
    erased = [await converse(a, agent_id, "erin", lines) for lines in (LISBON, VET)]
    memory_id = await remember(a, agent_id, "erin", "Erin is allergic to peanuts")
    kept = await converse(a, agent_id, "otto", VET)
    for name in NAMES:  # every replica holds the vectors before the erasure
        await eventually(
            f"{name} finds erin's episode before the erasure",
            partial(finds_episode, replicas[name], agent_id, "erin", "vet appointment", erased[1]),
        )

    receipt = (await c.episodes.EraseUser(es.EraseUserRequest(user_id="erin", agent_id=agent_id))).receipt
    assert receipt.episodes == 2 and receipt.memories >= 1  # closing extracted some too

    for name in ("A", "B"):
        other = replicas[name]
        assert not await searched(other, agent_id, "erin", "vet appointment flight Lisbon"), name
        assert memory_id not in await memories_found(other, agent_id, "erin", "peanuts"), name
        assert kept in await searched(other, agent_id, "otto", "vet appointment"), name
        gone = other.episodes.GetEpisode(es.GetEpisodeRequest(episode_id=erased[0]), timeout=10)
        await expect_code(gone, grpc.StatusCode.NOT_FOUND)
    await assert_index_agrees_everywhere(replicas, agent_id)


async def test_an_agent_deleted_through_one_replica_is_not_found_on_the_others(replicas: Replicas) -> None:
    a, b, c = replicas["A"], replicas["B"], replicas["C"]
    agent_id = await create_agent(a)
    await remember(a, agent_id, "erin", "Erin is allergic to peanuts")
    document = ks.DocumentInput(document_id="care", text="# Care\n\nBasil likes sun.")
    create = ks.CreateDocumentsRequest(agent_id=agent_id, documents=[document])
    await b.knowledge.CreateDocuments(create, timeout=CALL_TIMEOUT_SECONDS)  # B knows the agent exists
    await memories_found(b, agent_id, "erin", "peanuts")
    search = ks.SearchKnowledgeRequest(agent_id=agent_id, mode=es.SEARCH_MODE_RECENCY)

    delete = agent_service_pb2.DeleteAgentRequest(agent_id=agent_id, erase_data=True)
    receipt = (await c.agents.DeleteAgent(delete, timeout=CALL_TIMEOUT_SECONDS)).receipt
    assert (receipt.users, receipt.memories, receipt.documents) == (1, 1, 1)

    async def refused_on_b() -> bool:  # B forgets the agent it knew when the feed brings the change
        try:
            await b.knowledge.SearchKnowledge(search, timeout=CALL_TIMEOUT_SECONDS)
        except grpc.aio.AioRpcError as err:
            return err.code() == grpc.StatusCode.NOT_FOUND
        return False

    await eventually("SearchKnowledge on B is NOT_FOUND for the agent deleted on C", refused_on_b)
    for name in NAMES:
        users = replicas[name].episodes.ListUsers(es.ListUsersRequest(agent_id=agent_id))
        await expect_code(users, grpc.StatusCode.NOT_FOUND)


# --- watching -----------------------------------------------------------------------------


class Watcher:
    """The events of a WatchEpisode stream, read one at a time under the deadline;
    heartbeats skipped."""

    def __init__(self, client: Client, episode_id: str) -> None:
        request = es.WatchEpisodeRequest(episode_id=episode_id, after_seq=0)
        self.call = client.episodes.WatchEpisode(request, timeout=4 * VISIBILITY_DEADLINE_SECONDS)
        self.events = aiter(self.call)

    async def next(self) -> es.WatchEpisodeResponse:
        while True:
            event = await asyncio.wait_for(anext(self.events), VISIBILITY_DEADLINE_SECONDS)
            if event.WhichOneof("event") != "heartbeat":
                return event

    async def draft_until(self, draft_id: str, text: str) -> None:
        """Reads draft text (placed at its offsets) until the draft reads `text`."""
        seen = ""
        while seen != text:
            event = await self.next()
            assert event.WhichOneof("event") == "draft_text", event
            assert event.draft_text.draft_id == draft_id
            seen = seen[: event.draft_text.offset] + event.draft_text.text


async def test_a_watcher_on_one_replica_sees_text_pushed_through_another(replicas: Replicas) -> None:
    a, b = replicas["A"], replicas["B"]
    episode_id = await a.open_episode(await a.create_agent(), user_id="mary")
    await a.add(episode_id, user_message("Is Lisbon nice in May?"))
    watcher = Watcher(b, episode_id)
    replayed = await watcher.next()
    assert replayed.message_appended.seq == 1  # the replay: B's watch is in place

    for offset, text in ((0, "Lisbon is "), (10, "lovely in May.")):
        push = es.PushAssistantDeltaRequest(
            episode_id=episode_id, draft_id="reply-1", offset=offset, text=text
        )
        await a.episodes.PushAssistantDelta(push, timeout=CALL_TIMEOUT_SECONDS)
    await watcher.draft_until("reply-1", "Lisbon is lovely in May.")

    finalize = es.FinalizeAssistantMessageRequest(episode_id=episode_id, draft_id="reply-1", length=24)
    await a.episodes.FinalizeAssistantMessage(finalize, timeout=CALL_TIMEOUT_SECONDS)
    appended, finalized = await watcher.next(), await watcher.next()
    assert (appended.message_appended.seq, appended.message_appended.content) == (
        2,
        "Lisbon is lovely in May.",
    )
    assert (finalized.draft_finalized.draft_id, finalized.draft_finalized.seq) == ("reply-1", 2)

    await a.episodes.CloseEpisode(es.CloseEpisodeRequest(episode_id=episode_id), timeout=CALL_TIMEOUT_SECONDS)
    assert (await watcher.next()).WhichOneof("event") == "episode_closed"
    assert await watcher.call.code() == grpc.StatusCode.OK


# --- load through the round-robin client --------------------------------------------------

WORKERS = 8
PROGRESS_DEADLINE_SECONDS = 60.0


@dataclass
class Load:
    """Idempotent calls through the round-robin client: AddMessage with a client message
    id, then a read. What was sent and acknowledged is kept by client message id."""

    agent_id: str
    episodes: list[str]
    sent: dict[str, str] = field(default_factory=dict)  # -> its episode
    acknowledged: dict[str, int] = field(default_factory=dict)  # -> the acknowledged seq
    calls: int = 0
    failures: list[str] = field(default_factory=list)
    stopping: bool = False

    async def progress(self, calls: int) -> None:
        """Waits until `calls` more calls have succeeded."""
        wanted, deadline = self.calls + calls, time.monotonic() + PROGRESS_DEADLINE_SECONDS
        while self.calls < wanted:
            assert time.monotonic() < deadline, f"{self.calls} calls, waiting for {wanted}: {self.failures}"
            await asyncio.sleep(0.02)

    async def call(self, method: str, call: Awaitable[T]) -> T | None:
        try:
            answer = await call
        except grpc.aio.AioRpcError as err:
            self.failures.append(f"{method}: {err.code().name} {err.details()}")
            return None
        self.calls += 1
        return answer


async def keep_calling(client: Client, load: Load, worker: int) -> None:
    for n in itertools.count():
        if load.stopping:
            return
        episode_id = load.episodes[(worker + n) % len(load.episodes)]
        key = f"w{worker}-m{n}"
        await add_one(client, load, episode_id, key, TOPICS[n % len(TOPICS)])
        await read_one(client, load, episode_id, n, key)


async def add_one(client: Client, load: Load, episode_id: str, message_id: str, topic: str) -> None:
    load.sent[message_id] = episode_id
    message = user_message(f"A note about {topic}.", message_id)
    request = es.AddMessageRequest(episode_id=episode_id, message=message)
    reply = await load.call("AddMessage", client.episodes.AddMessage(request, timeout=CALL_TIMEOUT_SECONDS))
    if reply is not None:
        load.acknowledged[message_id] = reply.message.seq


async def read_one(client: Client, load: Load, episode_id: str, n: int, key: str) -> None:
    if n % 3 == 0:
        request = es.GetEpisodeRequest(episode_id=episode_id)
        await load.call("GetEpisode", client.episodes.GetEpisode(request, timeout=CALL_TIMEOUT_SECONDS))
    elif n % 3 == 1:
        search = searched(client, load.agent_id, "user-0", TOPICS[n % len(TOPICS)])
        await load.call("SearchEpisodes", search)
    else:
        await load.call("BuildContext", build_again_if_cut(client, episode_id, key))


async def build_again_if_cut(client: Client, episode_id: str, request_id: str) -> Built:
    """A stream cut once it has begun (its replica died) is past what a retry policy may
    replay: the client asks again with the same request_id, which returns the stored call."""
    try:
        return await build(client, episode_id, user_message="And then?", request_id=request_id)
    except grpc.aio.AioRpcError as err:
        if err.code() != grpc.StatusCode.UNAVAILABLE:
            raise
    return await build(client, episode_id, user_message="And then?", request_id=request_id)


@dataclass
class RunningLoad:
    load: Load
    workers: list[asyncio.Task[None]]

    async def finish(self) -> Load:
        self.load.stopping = True
        await asyncio.gather(*self.workers)
        return self.load


async def start_load(client: Client, agent_id: str, episodes: int) -> RunningLoad:
    opened = [await client.open_episode(agent_id, user_id=f"user-{i % 3}") for i in range(episodes)]
    load = Load(agent_id, opened)
    return RunningLoad(load, [asyncio.create_task(keep_calling(client, load, w)) for w in range(WORKERS)])


async def stored_log(client: Client, episode_id: str) -> list[episode_pb2.Message]:
    messages: list[episode_pb2.Message] = []
    token = ""
    while True:
        request = es.ListMessagesRequest(episode_id=episode_id, page_size=1000, page_token=token)
        page = await client.episodes.ListMessages(request, timeout=CALL_TIMEOUT_SECONDS)
        messages.extend(page.messages)
        token = page.next_page_token
        if not token:
            return sorted(messages, key=lambda m: m.seq)


async def assert_every_acknowledged_write_stored(client: Client, load: Load) -> None:
    """Each log dense, each message stored once, in the episode it was sent to, and every
    acknowledged one with the seq it was acknowledged with."""
    stored: dict[str, int] = {}
    for episode_id in load.episodes:
        log = await stored_log(client, episode_id)
        assert [m.seq for m in log] == list(range(1, len(log) + 1)), f"{episode_id}: seqs are not dense"
        ids = [m.client_message_id for m in log]
        assert len(set(ids)) == len(ids), f"{episode_id}: a message is stored twice"
        assert all(load.sent[i] == episode_id for i in ids), f"{episode_id}: holds a message never sent to it"
        stored |= {m.client_message_id: m.seq for m in log}
    lost = {i: (seq, stored.get(i)) for i, seq in load.acknowledged.items() if stored.get(i) != seq}
    assert not lost, f"acknowledged (seq) -> stored (seq): {lost}"


async def close_and_wait(client: Client, episode_ids: list[str]) -> dict[str, int]:
    """Closes each episode (a no-op for a closed one) and waits for its digest; returns
    the digest states that are not READY."""
    unsettled: dict[str, int] = {}
    for episode_id in episode_ids:
        episode = await client.close_digested(episode_id)
        if episode.digest.state != episode_pb2.DIGEST_STATE_READY:
            unsettled[episode_id] = episode.digest.state
    return unsettled


# --- failures -----------------------------------------------------------------------------


async def test_a_replica_killed_under_load_loses_no_acknowledged_write_and_its_digests_are_taken_over(
    replicas: Replicas,
) -> None:
    cluster, victim, any_replica = replicas.cluster, replicas.cluster["B"], replicas.any
    agent_id = await semantic_agent(any_replica)
    to_digest = [await filled(any_replica, agent_id, f"user-{i}") for i in range(4)]
    running = await start_load(any_replica, agent_id, episodes=6)
    try:
        await running.load.progress(40)
        for episode_id in to_digest:  # B's digester is woken and claims them
            request = es.CloseEpisodeRequest(episode_id=episode_id, wait_for_digest=False)
            await replicas["B"].episodes.CloseEpisode(request, timeout=CALL_TIMEOUT_SECONDS)
        await victim.kill()
        served_before = {n: cluster[n].served("AddMessage") for n in ("A", "C")}
        await running.load.progress(80)
    finally:
        load = await running.finish()

    assert load.failures == [], load.failures[:10]
    for name in ("A", "C"):
        assert cluster[name].served("AddMessage") > served_before[name], f"{name} stopped serving"
        await assert_serving(replicas[name].channel)
    leased = await expire_digest_leases(cluster.database_url, agent_id)
    assert await close_and_wait(replicas["A"], [*to_digest, *load.episodes]) == {}
    await assert_every_acknowledged_write_stored(replicas["C"], load)
    await assert_index_agrees_everywhere(replicas, agent_id, ("A", "C"))
    await cluster.serving()  # B again, on its port, its caches loaded from SQL
    await assert_index_agrees_everywhere(replicas, agent_id)
    print(f"\nacknowledged {len(load.acknowledged)}, calls {load.calls}, digests B still held {leased}")


async def filled(client: Client, agent_id: str, user: str) -> str:
    episode_id = await client.open_episode(agent_id, user_id=user)
    await client.add(episode_id, *(user_message(line) for line in VET))
    return episode_id


@pytest.mark.slow  # three server processes restarted one after another under load
async def test_a_rolling_restart_fails_no_call_of_a_client_that_retries_unavailable(
    replicas: Replicas,
) -> None:
    cluster = replicas.cluster
    agent_id = await semantic_agent(replicas.any)
    await converse(replicas.any, agent_id, "user-0", LISBON)  # something for the searches to find
    running = await start_load(replicas.any, agent_id, episodes=4)
    try:
        await running.load.progress(20)
        for replica in cluster.replicas:
            assert await replica.stop() == 0, replica.log_tail()
            replica.start()
            await replica.wait_serving()
            await eventually(f"the client uses {replica.name} again", partial(_served_again, replica))
            await running.load.progress(20)
    finally:
        load = await running.finish()

    assert load.failures == [], load.failures[:10]
    await assert_every_acknowledged_write_stored(replicas.any, load)
    print(f"\nacknowledged {len(load.acknowledged)}, calls {load.calls}")


async def _served_again(replica: Replica) -> bool:
    return replica.served("AddMessage") > 0
