"""Tenant isolation, property-based, on a live server (SQLite and PostgreSQL).

Hypothesis draws *worlds*: 2-4 tenants, each with 1-3 agents, 1-3 users shared by all
tenants and agents, and 1 to MAX_EPISODES episodes of 1-4 messages, some closed (with
their digest awaited). Agent ids always collide across tenants (tenant 0's "agent0" and
tenant 1's "agent0" are two agents), and so do client-chosen episode ids. Every message
of an episode carries that episode's marker word, and every agent's system prompt its
own marker, so any text that leaks out of its scope is caught by the marker it carries.

The world is built through the API, then every tenant reads everything it could ask for:
each episode id, each agent id, each (agent, user) scope, each model call. The expected
answer of every read comes from the Ledger, the model of everything created on this
test's server (across examples: tenants are fixed by the server's key configuration, so
earlier worlds are part of what a tenant owns). A read is one probe; the visibility rules
are the Ledger's methods, so a new kind of credential (a key restricted to some agents)
or a new operation (EraseUser, then every read again) is a new rule or a new probe."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from itertools import product

import grpc
from hypothesis import example, given, settings
from hypothesis import strategies as st

from episodic.config import Settings
from episodic.edges.keys import config_line
from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    context_service_pb2,
    episode_pb2,
    episode_service_pb2,
    memory_pb2,
    memory_service_pb2,
)
from tests.conftest import unique
from tests.e2e.context_helpers import Built, build, get_call, list_calls
from tests.e2e.helpers import Client, expect_code
from tests.server_harness import running_server, settings_for

pb = episode_service_pb2
MAX_TENANTS = 4
MAX_EPISODES = 10
# 6 drawn worlds (and the crowded one) per backend in the default run, ~10 s on PostgreSQL;
# more in a long run, e.g. EPISODIC_ISOLATION_WORLDS=100.
WORLDS_PER_BACKEND = int(os.environ.get("EPISODIC_ISOLATION_WORLDS", "6"))
PAGE_SIZE = 4  # small pages, so every list is also read through its page tokens
MARKER = re.compile(r"mk[0-9a-f]{12}q")
SEARCH_MODES = (pb.SEARCH_MODE_RECENCY, pb.SEARCH_MODE_SEMANTIC, pb.SEARCH_MODE_HYBRID)
RECALL_MODES = (agent_pb2.RECALL_MODE_RECENCY, agent_pb2.RECALL_MODE_SEMANTIC, agent_pb2.RECALL_MODE_HYBRID)
NOT_FOUND = grpc.StatusCode.NOT_FOUND

Scope = tuple[str, str, str]  # tenant, agent, user


def new_marker() -> str:
    return f"mk{uuid.uuid4().hex[:12]}q"


def markers_in(texts: Iterable[str]) -> set[str]:
    return {found for text in texts for found in MARKER.findall(text)}


# --- what Hypothesis draws --------------------------------------------------------------


@dataclass(frozen=True)
class EpisodePlan:
    tenant: int
    agent: int
    user: int
    messages: int
    closed: bool
    chosen_id: bool  # a client-chosen id, the same as the same-numbered one of other tenants
    recall_mode: agent_pb2.RecallMode.ValueType  # how its contexts recall past episodes


@dataclass(frozen=True)
class WorldPlan:
    agents_per_tenant: tuple[int, ...]
    users: int
    episodes: tuple[EpisodePlan, ...]


def episode_plans(agents_per_tenant: tuple[int, ...], users: int) -> st.SearchStrategy[EpisodePlan]:
    def in_tenant(tenant: int) -> st.SearchStrategy[EpisodePlan]:
        return st.builds(
            EpisodePlan,
            tenant=st.just(tenant),
            agent=st.integers(0, agents_per_tenant[tenant] - 1),
            user=st.integers(0, users - 1),
            messages=st.integers(1, 4),
            closed=st.booleans(),
            chosen_id=st.booleans(),
            recall_mode=st.sampled_from(RECALL_MODES),
        )

    return st.integers(0, len(agents_per_tenant) - 1).flatmap(in_tenant)


@st.composite
def worlds(draw: st.DrawFn) -> WorldPlan:
    agents = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=MAX_TENANTS)))
    users = draw(st.integers(1, 3))
    episodes = draw(st.lists(episode_plans(agents, users), min_size=1, max_size=MAX_EPISODES))
    return WorldPlan(agents, users, tuple(episodes))


def plan(tenant: int, agent: int, user: int, *, closed: bool, chosen_id: bool = True) -> EpisodePlan:
    return EpisodePlan(tenant, agent, user, 2, closed, chosen_id, agent_pb2.RECALL_MODE_HYBRID)


# Always run: user 0 talks to agents 0 and 1 of tenant 0 and to agent 0 of tenant 1, with
# the same episode ids in both tenants, and an open episode next to closed ones.
CROWDED_WORLD = WorldPlan(
    agents_per_tenant=(2, 1, 1),
    users=2,
    episodes=(
        plan(0, 0, 0, closed=True),
        plan(0, 0, 0, closed=True, chosen_id=False),
        plan(0, 1, 0, closed=True),
        plan(0, 0, 1, closed=True),
        plan(1, 0, 0, closed=True),
        plan(1, 0, 0, closed=False),
        plan(2, 0, 1, closed=True),
    ),
)


# --- the model --------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentRecord:
    tenant_id: str
    agent_id: str
    marker: str  # in its system prompt


@dataclass(frozen=True)
class EpisodeRecord:
    tenant_id: str
    episode_id: str
    agent_id: str
    user_id: str
    marker: str  # in every one of its messages
    messages: int
    closed: bool  # closed with its digest READY, so recallable
    recall_mode: agent_pb2.RecallMode.ValueType
    memory_id: str  # a memory carrying its marker: PENDING while open, PROMOTED once closed

    @property
    def scope(self) -> Scope:
        return (self.tenant_id, self.agent_id, self.user_id)


@dataclass(frozen=True)
class CallRecord:
    tenant_id: str
    model_call_id: str
    episode_id: str


@dataclass
class Ledger:
    """Everything created on this test's server, and who may see it: a tenant sees exactly
    its own agents, episodes and model calls; recall sees the closed episodes of one scope."""

    agents: dict[tuple[str, str], AgentRecord] = field(default_factory=dict)
    episodes: dict[tuple[str, str], EpisodeRecord] = field(default_factory=dict)
    calls: dict[str, CallRecord] = field(default_factory=dict)

    def agent(self, tenant_id: str, agent_id: str) -> AgentRecord | None:
        return self.agents.get((tenant_id, agent_id))

    def episode(self, tenant_id: str, episode_id: str) -> EpisodeRecord | None:
        return self.episodes.get((tenant_id, episode_id))

    def call(self, tenant_id: str, model_call_id: str) -> CallRecord | None:
        found = self.calls.get(model_call_id)
        return found if found is not None and found.tenant_id == tenant_id else None

    def agent_ids_of(self, tenant_id: str) -> set[str]:
        return {a.agent_id for a in self.agents.values() if a.tenant_id == tenant_id}

    def listed(self, tenant_id: str, agent_id: str, user_id: str) -> set[str]:
        """ListEpisodes: the tenant's episodes matching the filter ("" matches any)."""
        return {
            e.episode_id
            for e in self.episodes.values()
            if e.tenant_id == tenant_id and agent_id in ("", e.agent_id) and user_id in ("", e.user_id)
        }

    def recallable(self, scope: Scope) -> dict[str, EpisodeRecord]:
        return {e.episode_id: e for e in self.episodes.values() if e.scope == scope and e.closed}

    def memory(self, tenant_id: str, memory_id: str) -> EpisodeRecord | None:
        """The episode whose memory has this id in this tenant."""
        found = [e for e in self.episodes.values() if e.tenant_id == tenant_id and e.memory_id == memory_id]
        return found[0] if found else None

    def memories_of(self, scope: Scope) -> dict[str, EpisodeRecord]:
        """ListMemories: every memory of the scope, pending or promoted."""
        return {e.memory_id: e for e in self.episodes.values() if e.scope == scope}

    def calls_of(self, tenant_id: str, episode_id: str) -> set[str]:
        return {
            c.model_call_id
            for c in self.calls.values()
            if c.tenant_id == tenant_id and c.episode_id == episode_id
        }


@dataclass(frozen=True)
class Caller:
    tenant_id: str
    client: Client


@dataclass
class World:
    """The ids one example made: every tenant probes all of them."""

    agent_ids: list[str]
    user_ids: list[str]
    request_id: str  # of every BuildContext: the same in every tenant, like the episode ids
    episode_ids: list[str] = field(default_factory=list)  # distinct; shared ones appear once
    call_ids: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)

    @property
    def lure(self) -> str:
        """A query naming every episode of the world: any search that looked outside its
        scope would find them."""
        return " ".join(self.markers) or "anything"

    def scopes(self) -> list[tuple[str, str]]:
        return list(product(self.agent_ids, self.user_ids))


# --- building a world through the API --------------------------------------------------


async def create_agent(caller: Caller, agent_id: str) -> AgentRecord:
    marker = new_marker()
    agent = agent_pb2.Agent(agent_id=agent_id, system_prompt=f"You are agent {marker}.", model="gpt-4")
    request = agent_service_pb2.CreateAgentRequest(agent=agent)
    await caller.client.agents.CreateAgent(request, metadata=caller.client.auth)
    return AgentRecord(caller.tenant_id, agent_id, marker)


def message(marker: str, i: int) -> episode_pb2.MessageInput:
    role = episode_pb2.ROLE_USER if i % 2 == 0 else episode_pb2.ROLE_ASSISTANT
    return episode_pb2.MessageInput(role=role, content=f"Note {i} on {marker}: the {marker} plan holds.")


async def converse(
    caller: Caller, p: EpisodePlan, agent_id: str, user_id: str, episode_id: str
) -> EpisodeRecord:
    """Opens an episode, logs its messages and, if planned, closes it and waits for its digest."""
    client, marker = caller.client, new_marker()
    episode_id = await client.open_episode(agent_id, user_id, episode_id)
    await client.add(episode_id, *(message(marker, i) for i in range(p.messages)))
    memory_id = f"{episode_id}-memory"  # the same in every tenant, like the episode ids
    remember = memory_service_pb2.MemoryInput(
        memory_id=memory_id, text=f"The user follows the {marker} plan.", kind=memory_pb2.MEMORY_KIND_FACT
    )
    request = memory_service_pb2.CreateMemoriesRequest(episode_id=episode_id, memories=[remember])
    await client.memories.CreateMemories(request, metadata=client.auth)
    if p.closed:
        closed = await client.close_digested(episode_id)
        assert closed.digest.state == episode_pb2.DIGEST_STATE_READY, closed.digest
    fields = (agent_id, user_id, marker, p.messages, p.closed, p.recall_mode, memory_id)
    return EpisodeRecord(caller.tenant_id, episode_id, *fields)


async def build_world(callers: Sequence[Caller], world_plan: WorldPlan, ledger: Ledger) -> World:
    prefix = unique("w")
    agent_ids = [f"{prefix}-agent{j}" for j in range(max(world_plan.agents_per_tenant))]
    world = World(agent_ids, [f"{prefix}-user{k}" for k in range(world_plan.users)], f"{prefix}-turn")
    for caller, count in zip(callers, world_plan.agents_per_tenant, strict=False):
        for agent_id in agent_ids[:count]:
            created = await create_agent(caller, agent_id)
            ledger.agents[(caller.tenant_id, agent_id)] = created
    chosen = Counter[int]()
    for p in world_plan.episodes:
        episode_id = f"{prefix}-ep{chosen[p.tenant]}" if p.chosen_id else ""
        chosen[p.tenant] += p.chosen_id
        made = await converse(callers[p.tenant], p, agent_ids[p.agent], world.user_ids[p.user], episode_id)
        ledger.episodes[(made.tenant_id, made.episode_id)] = made
        world.markers.append(made.marker)
        if made.episode_id not in world.episode_ids:
            world.episode_ids.append(made.episode_id)
    return world


# --- BuildContext: recall stays in the episode's scope ---------------------------------


async def build_context(
    caller: Caller,
    episode_id: str,
    world: World,
    recall_mode: agent_pb2.RecallMode.ValueType = agent_pb2.RECALL_MODE_HYBRID,
) -> Built:
    """Recall lured with every marker of the world, and the world's one request id."""
    memory = agent_pb2.MemoryConfig(recall_mode=recall_mode, recall_top_k=20)
    return await build(
        caller.client,
        episode_id,
        recall_query=world.lure,
        memory_config=memory,
        request_id=world.request_id,
    )


def assert_context_isolated(built: Built, own: EpisodeRecord, ledger: Ledger) -> None:
    """Recalled ⊆ the scope's closed episodes; no text but the agent's prompt, the episode's
    history and what it recalled."""
    recallable = ledger.recallable(own.scope)
    recalled = {r.episode_id for r in built.report.recalled_episodes}
    assert recalled <= set(recallable) - {own.episode_id}, f"recalled outside {own.scope}: {recalled}"
    agent = ledger.agent(own.tenant_id, own.agent_id)
    assert agent is not None
    expected = {own.marker, agent.marker}
    seen = markers_in(m.content for m in built.messages)
    assert expected <= seen, f"the context lost its own prompt or history: {expected - seen}"
    facts = {m.memory_id for m in built.report.recalled_memories}
    remembered = {e.memory_id: e for e in recallable.values()} | {own.memory_id: own}
    assert facts <= set(remembered), f"known facts outside {own.scope}: {facts - set(remembered)}"
    allowed = expected | {recallable[i].marker for i in recalled} | {remembered[m].marker for m in facts}
    assert seen <= allowed, f"context of {own.episode_id} shows text of other episodes: {seen - allowed}"


async def probe_contexts(caller: Caller, world: World, ledger: Ledger) -> None:
    """BuildContext on each episode id: the caller's own one recalls only its scope and makes
    a new model call (never a replay of another tenant's call under the same episode and
    request ids); another tenant's is NOT_FOUND."""
    for episode_id in world.episode_ids:
        own = ledger.episode(caller.tenant_id, episode_id)
        if own is None:
            await expect_code(build_context(caller, episode_id, world), NOT_FOUND)
            continue
        built = await build_context(caller, episode_id, world, own.recall_mode)
        assert_context_isolated(built, own, ledger)
        call_id = built.report.model_call_id
        assert call_id not in ledger.calls, f"BuildContext replayed {ledger.calls[call_id]}"
        ledger.calls[call_id] = CallRecord(caller.tenant_id, call_id, episode_id)
        world.call_ids.append(call_id)


# --- read probes: each asks as one caller and checks against the ledger ----------------


async def probe_episodes_by_id(caller: Caller, world: World, ledger: Ledger) -> None:
    """GetEpisode and ListMessages: the caller's own episode under that id, or NOT_FOUND."""
    client = caller.client
    for episode_id in world.episode_ids:
        own = ledger.episode(caller.tenant_id, episode_id)
        if own is None:
            await expect_code(client.get_episode(episode_id), NOT_FOUND)
            listing = pb.ListMessagesRequest(episode_id=episode_id)
            await expect_code(client.episodes.ListMessages(listing, metadata=client.auth), NOT_FOUND)
            continue
        got = await client.get_episode(episode_id)
        assert (got.agent_id, got.user_id) == (own.agent_id, own.user_id)
        assert markers_in([got.digest.summary, *got.digest.key_facts]) <= {own.marker}
        log = await client.log_of(episode_id)
        assert len(log) == own.messages and markers_in(m.content for m in log) == {own.marker}


async def listed_episodes(client: Client, agent_id: str, user_id: str) -> list[str]:
    found: list[str] = []
    token = ""
    while True:
        request = pb.ListEpisodesRequest(
            agent_id=agent_id, user_id=user_id, page_size=PAGE_SIZE, page_token=token
        )
        page = await client.episodes.ListEpisodes(request, metadata=client.auth)
        found.extend(e.episode_id for e in page.episodes)
        token = page.next_page_token
        if not token:
            return found


async def probe_episode_lists(caller: Caller, world: World, ledger: Ledger) -> None:
    """ListEpisodes, unfiltered, by agent, by user and by both: exactly the tenant's matches."""
    filters = [("", ""), *((a, "") for a in world.agent_ids), *(("", u) for u in world.user_ids)]
    for agent_id, user_id in [*filters, *world.scopes()]:
        found = await listed_episodes(caller.client, agent_id, user_id)
        assert len(found) == len(set(found)), f"a page repeated an episode: {found}"
        assert set(found) == ledger.listed(caller.tenant_id, agent_id, user_id), (agent_id, user_id)


async def listed_agents(client: Client) -> list[str]:
    found: list[str] = []
    token = ""
    while True:
        request = agent_service_pb2.ListAgentsRequest(page_size=PAGE_SIZE, page_token=token)
        page = await client.agents.ListAgents(request, metadata=client.auth)
        found.extend(a.agent_id for a in page.agents)
        token = page.next_page_token
        if not token:
            return found


async def probe_agents(caller: Caller, world: World, ledger: Ledger) -> None:
    """ListAgents: the tenant's agents; GetAgent: the tenant's own agent under a shared id."""
    client = caller.client
    found = await listed_agents(client)
    assert sorted(found) == sorted(ledger.agent_ids_of(caller.tenant_id))
    for agent_id in world.agent_ids:
        own = ledger.agent(caller.tenant_id, agent_id)
        call = client.agents.GetAgent(
            agent_service_pb2.GetAgentRequest(agent_id=agent_id), metadata=client.auth
        )
        if own is None:
            await expect_code(call, NOT_FOUND)
            continue
        assert markers_in([(await call).agent.system_prompt]) == {own.marker}


async def search(
    client: Client, agent_id: str, user_id: str, mode: pb.SearchMode.ValueType, query: str
) -> pb.SearchEpisodesResponse:
    request = pb.SearchEpisodesRequest(agent_id=agent_id, user_id=user_id, mode=mode, query=query, top_k=100)
    return await client.episodes.SearchEpisodes(request, metadata=client.auth)


async def probe_searches(caller: Caller, world: World, ledger: Ledger) -> None:
    """SearchEpisodes(agent, user), every mode, lured with every marker of the world: exactly
    the closed episodes of (tenant, agent, user), each snippet with its own text only. An
    agent the tenant lacks is NOT_FOUND, even if another tenant has one of that id."""
    for (agent_id, user_id), mode in product(world.scopes(), SEARCH_MODES):
        query = world.lure if mode != pb.SEARCH_MODE_RECENCY else ""
        if ledger.agent(caller.tenant_id, agent_id) is None:
            await expect_code(search(caller.client, agent_id, user_id, mode, query), NOT_FOUND)
            continue
        recallable = ledger.recallable((caller.tenant_id, agent_id, user_id))
        reply = await search(caller.client, agent_id, user_id, mode, query)
        found = [s.episode_id for s in reply.snippets]
        assert sorted(found) == sorted(recallable), (caller.tenant_id, agent_id, user_id, mode)
        for s in reply.snippets:
            text = markers_in([s.summary, *s.key_facts])
            assert text <= {recallable[s.episode_id].marker}, f"snippet {s.episode_id} shows {text}"


async def probe_model_calls(caller: Caller, world: World, ledger: Ledger) -> None:
    """GetModelCall: only the tenant's calls (and RecordModelReply refuses another's);
    ListModelCalls: exactly the calls of the tenant's episode under that id, or NOT_FOUND."""
    client = caller.client
    for call_id in world.call_ids:
        own = ledger.call(caller.tenant_id, call_id)
        if own is None:
            await expect_code(get_call(client, call_id), NOT_FOUND)
            reply = context_service_pb2.RecordModelReplyRequest(model_call_id=call_id, input_tokens=1)
            await expect_code(client.context.RecordModelReply(reply, metadata=client.auth), NOT_FOUND)
            continue
        assert (await get_call(client, call_id)).episode_id == own.episode_id
    for episode_id in world.episode_ids:
        if ledger.episode(caller.tenant_id, episode_id) is None:
            request = context_service_pb2.ListModelCallsRequest(episode_id=episode_id)
            await expect_code(client.context.ListModelCalls(request, metadata=client.auth), NOT_FOUND)
            continue
        calls = {c.model_call_id for c in await list_calls(client, episode_id, page_size=1)}
        assert calls == ledger.calls_of(caller.tenant_id, episode_id)


async def listed_memories(client: Client, agent_id: str, user_id: str) -> list[memory_pb2.Memory]:
    found: list[memory_pb2.Memory] = []
    token = ""
    while True:
        request = memory_service_pb2.ListMemoriesRequest(
            agent_id=agent_id, user_id=user_id, page_size=PAGE_SIZE, page_token=token
        )
        page = await client.memories.ListMemories(request, metadata=client.auth)
        found.extend(page.memories)
        token = page.next_page_token
        if not token:
            return found


async def probe_memories(caller: Caller, world: World, ledger: Ledger) -> None:
    """GetMemory by an id every tenant uses: the tenant's own or NOT_FOUND. ListMemories and
    SearchMemories (every mode, lured with every marker) per (agent, user): exactly the
    scope's memories (search: the promoted ones), each with its own episode's marker."""
    client = caller.client
    for episode_id in world.episode_ids:
        memory_id = f"{episode_id}-memory"
        own = ledger.memory(caller.tenant_id, memory_id)
        by_id = memory_service_pb2.GetMemoryRequest(memory_id=memory_id)
        if own is None:
            await expect_code(client.memories.GetMemory(by_id, metadata=client.auth), NOT_FOUND)
            continue
        got = (await client.memories.GetMemory(by_id, metadata=client.auth)).memory
        assert markers_in([got.text]) == {own.marker} and (got.agent_id, got.user_id) == own.scope[1:]
    for (agent_id, user_id), mode in product(world.scopes(), SEARCH_MODES):
        query = world.lure if mode != pb.SEARCH_MODE_RECENCY else ""
        request = memory_service_pb2.SearchMemoriesRequest(
            agent_id=agent_id, user_id=user_id, mode=mode, query=query, top_k=100
        )
        scope = (caller.tenant_id, agent_id, user_id)
        if ledger.agent(caller.tenant_id, agent_id) is None:
            await expect_code(client.memories.SearchMemories(request, metadata=client.auth), NOT_FOUND)
            continue
        hits = (await client.memories.SearchMemories(request, metadata=client.auth)).hits
        promoted = {m: e for m, e in ledger.memories_of(scope).items() if e.closed}
        assert {h.memory.memory_id for h in hits} <= set(promoted), (scope, mode)
        if mode == pb.SEARCH_MODE_RECENCY:
            assert {h.memory.memory_id for h in hits} == set(promoted), scope
        for h in hits:
            assert markers_in([h.memory.text]) == {promoted[h.memory.memory_id].marker}
    for agent_id, user_id in world.scopes():
        if ledger.agent(caller.tenant_id, agent_id) is None:
            continue
        listed = await listed_memories(client, agent_id, user_id)
        expected = ledger.memories_of((caller.tenant_id, agent_id, user_id))
        assert {m.memory_id for m in listed} == set(expected), (agent_id, user_id)
        assert all(markers_in([m.text]) == {expected[m.memory_id].marker} for m in listed)


Probe = Callable[[Caller, World, Ledger], Awaitable[None]]
READ_PROBES: tuple[Probe, ...] = (
    probe_episodes_by_id,
    probe_episode_lists,
    probe_agents,
    probe_searches,
    probe_model_calls,
    probe_memories,
)


async def build_and_probe(callers: Sequence[Caller], world_plan: WorldPlan, ledger: Ledger) -> None:
    world = await build_world(callers, world_plan, ledger)
    for caller in callers:  # every tenant, including ones this world gave nothing
        await probe_contexts(caller, world, ledger)
    for probe, caller in product(READ_PROBES, callers):
        await probe(caller, world, ledger)


# --- the test ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    key: str


def fresh_tenants() -> list[Tenant]:
    """Tenants of this test only: the PostgreSQL database is shared by the whole run."""
    tag = unique("iso")
    return [Tenant(f"{tag}-t{i}", f"epk_{uuid.uuid4().hex}{uuid.uuid4().hex}") for i in range(MAX_TENANTS)]


def server_settings(database_url: str, tenants: Sequence[Tenant]) -> Settings:
    keys = ",".join(config_line(t.tenant_id, t.key) for t in tenants)
    return settings_for(database_url, api_keys=keys)


async def start(stack: AsyncExitStack, database_url: str, tenants: Sequence[Tenant]) -> list[Caller]:
    server = await stack.enter_async_context(running_server(server_settings(database_url, tenants)))
    channel = await stack.enter_async_context(server.channel())
    return [Caller(t.tenant_id, Client.of(channel, t.key)) for t in tenants]


def test_every_read_returns_only_the_callers_tenant_and_recall_only_the_callers_scope(
    database_url: str,
) -> None:
    """One server for all examples, on an event loop this test owns: each example (a world
    built and probed) runs on it in turn, from a synchronous Hypothesis property. The ledger
    lives as long as the server, since every world lands in the same tenants."""
    ledger = Ledger()
    with asyncio.Runner() as runner:
        stack = AsyncExitStack()
        callers = runner.run(start(stack, database_url, fresh_tenants()))
        try:

            @settings(max_examples=WORLDS_PER_BACKEND, deadline=None, database=None)
            @example(CROWDED_WORLD)
            @given(worlds())
            def every_world_is_isolated(world_plan: WorldPlan) -> None:
                runner.run(build_and_probe(callers, world_plan, ledger))

            every_world_is_isolated()
        finally:
            runner.run(stack.aclose())
