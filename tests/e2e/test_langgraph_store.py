"""LangGraph's BaseStore over Episodic's long-term memories (clients/python's [langgraph]
extra), against a live server and the real langgraph: a graph's second thread finds what
the user said in its first; put/get/search/delete/list_namespaces, sync and async, agree
with LangGraph's InMemoryStore on the same ops; TTLs become expiry times; values round-trip;
what cannot be stored is refused by name and writes nothing; the example runs."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import re
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item, PutOp, SearchItem
from langgraph.store.memory import InMemoryStore
from pydantic import Field
from typing_extensions import TypedDict

from episodic.edges.keys import config_line
from episodic_client import EpisodicClient
from episodic_client.integrations.langgraph import EpisodicStore
from episodic_client.v1 import memory_pb2
from tests.conftest import unique
from tests.e2e.helpers import run_process
from tests.server_harness import KEY_A, TENANT_A, RunningServer, running_server, settings_for

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "clients/python/examples/integrations/langgraph.py"


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


async def in_thread(server: RunningServer, work: Callable[[EpisodicStore], T], **options: Any) -> T:
    """Runs `work` with a store of a new agent off the loop (the server runs on it)."""

    def run() -> T:
        with EpisodicClient(server.address, api_key=KEY_A, timeout=10.0) as client:
            agent_id = client.create_agent(unique("agent")).agent.agent_id
            return work(EpisodicStore(client, agent_id, **options))

    return await asyncio.to_thread(run)


def shown(items: list[SearchItem] | list[Item]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return [(i.namespace, i.key, i.value) for i in items]


# --- a graph ------------------------------------------------------------------------------


class RecordingModel(BaseChatModel):
    """A scripted chat model: answers "noted" and keeps every prompt it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("noted"))])


class Turn(TypedDict, total=False):
    said: str
    answer: str


def chat_graph(model: BaseChatModel, store: BaseStore) -> Any:
    """remember: a statement goes to the user's memories; respond: the memories the store
    finds for what was said go to the model with it. Both get the store injected."""

    def remember(state: Turn, config: RunnableConfig, *, store: BaseStore) -> Turn:
        if not state["said"].endswith("?"):
            user_id = config["configurable"]["user_id"]
            store.put((user_id, "memories"), uuid.uuid4().hex, {"text": state["said"]})
        return {}

    def respond(state: Turn, config: RunnableConfig, *, store: BaseStore) -> Turn:
        user_id = config["configurable"]["user_id"]
        found = store.search((user_id, "memories"), query=state["said"], limit=3)
        known = "\n".join(f"- {hit.value['text']}" for hit in found)
        prompt = [SystemMessage(f"What you know about the user:\n{known}"), HumanMessage(state["said"])]
        return {"answer": str(model.invoke(prompt).content)}

    graph = StateGraph(Turn)
    graph.add_node("remember", remember)
    graph.add_node("respond", respond)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "respond")
    graph.add_edge("respond", END)
    return graph.compile(checkpointer=InMemorySaver(), store=store)


async def test_a_new_thread_of_the_user_shows_the_model_what_the_user_said_in_the_first(
    server: RunningServer,
) -> None:
    model = RecordingModel(seen=[])

    def work(store: EpisodicStore) -> list[Any]:
        graph = chat_graph(model, store)
        for thread, said in (("t-1", "My cat is called Zanzibar."), ("t-2", "What is my cat called?")):
            config = {"configurable": {"thread_id": thread, "user_id": "mary"}}
            graph.invoke({"said": said}, config)
        other = {"configurable": {"thread_id": "t-3", "user_id": "bob"}}
        graph.invoke({"said": "What is my cat called?"}, other)
        return store.search(("mary",))

    stored = await in_thread(server, work)

    first_thread, second_thread, bob = (m[0].content for m in model.seen)
    assert "- My cat is called Zanzibar." in str(first_thread), "stored before the model is asked"
    assert "- My cat is called Zanzibar." in str(second_thread), second_thread
    assert "Zanzibar" not in str(bob), "another user's memories stay his own"
    assert [(i.namespace, i.value) for i in stored] == [
        (("mary", "memories"), {"text": "My cat is called Zanzibar."})
    ]


# --- the contract ---------------------------------------------------------------------------


async def test_put_get_overwrite_and_delete_address_one_item_per_user_and_agent(
    server: RunningServer,
) -> None:
    def work(store: EpisodicStore) -> dict[str, Any]:
        ns = ("mary", "prefs")
        store.put(ns, "food", {"text": "vegetarian", "since": 2019, "tags": ["veg", {"strict": True}]})
        first = store.get(ns, "food")
        store.put(ns, "food", {"text": "vegan", "since": 2021})
        second = store.get(ns, "food")
        other_user = store.get(("bob", "prefs"), "food")
        other_agent = EpisodicStore(store._client, store._client.create_agent(unique("agent")).agent.agent_id)
        store.delete(ns, "food")
        store.delete(ns, "food")  # deleting what is gone is done
        return {
            "first": first,
            "second": second,
            "other_user": other_user,
            "other_agent": other_agent.get(ns, "food"),
            "deleted": store.get(ns, "food"),
            "missing": store.get(ns, "never"),
        }

    got = await in_thread(server, work)

    first, second = got["first"], got["second"]
    assert first.value == {"text": "vegetarian", "since": 2019, "tags": ["veg", {"strict": True}]}
    assert (first.namespace, first.key) == (("mary", "prefs"), "food")
    assert second.value == {"text": "vegan", "since": 2021}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert got["other_user"] is None and got["other_agent"] is None
    assert got["deleted"] is None and got["missing"] is None


async def test_a_query_search_ranks_by_meaning_under_the_prefix_with_filters_and_paging(
    server: RunningServer,
) -> None:
    def work(store: EpisodicStore) -> dict[str, Any]:
        store.put(("mary", "pets"), "cat", {"text": "My cat Zanzibar sleeps all day", "legs": 4})
        store.put(("mary", "pets"), "bird", {"text": "My parrot talks about cats", "legs": 2})
        store.put(("mary", "work"), "job", {"text": "I am a nurse", "legs": 0})
        store.put(("mary", "pets", "old"), "dog", {"text": "My dog Rex chased the cat", "legs": 4})
        store.put(("bob", "pets"), "cat", {"text": "My cat Tom", "legs": 4})
        return {
            "all": store.search(("mary",), query="cat Zanzibar"),
            "pets": store.search(("mary", "pets"), query="cat"),
            "four_legs": store.search(("mary",), query="cat", filter={"legs": {"$gte": 4}}),
            "page": store.search(("mary",), query="cat Zanzibar", limit=1, offset=1),
            "deep": store.search(("mary", "pets", "old"), query="cat"),
        }

    got = await in_thread(server, work)

    best = got["all"][0]
    assert (best.namespace, best.key) == (("mary", "pets"), "cat") and best.score is not None
    assert all(isinstance(i.score, float) for i in got["all"])
    assert [i.score for i in got["all"]] == sorted((i.score or 0.0 for i in got["all"]), reverse=True)
    assert {i.key for i in got["all"]} <= {"cat", "bird", "job", "dog"} and "Tom" not in str(
        shown(got["all"])
    )
    assert {(i.namespace, i.key) for i in got["pets"]} == {
        (("mary", "pets"), "cat"),
        (("mary", "pets"), "bird"),
        (("mary", "pets", "old"), "dog"),
    }
    assert {i.key for i in got["four_legs"]} == {"cat", "dog"}
    assert shown(got["page"]) == shown(got["all"][1:2])
    assert [i.key for i in got["deep"]] == ["dog"]


async def test_the_indexed_fields_are_what_a_query_finds_and_the_value_may_name_the_kind(
    server: RunningServer,
) -> None:
    def work(store: EpisodicStore) -> dict[str, Any]:
        ns = ("mary", "notes")
        store.put(ns, "sky", {"about": "astronomy telescopes", "text": "cooking pasta"})
        store.put(
            ns, "food", {"about": "cooking pasta", "text": "astronomy telescopes", "kind": "preference"}
        )
        store.put(ns, "override", {"about": "gardening", "body": "telescopes astronomy"}, index=["body"])
        store.put(ns, "hidden", {"about": "astronomy telescopes"}, index=False)
        kinds = {
            key: store._client.get_memory(store.memory_id(ns, key)).memory.kind for key in ("sky", "food")
        }
        texts = {
            key: store._client.get_memory(store.memory_id(ns, key)).memory.text
            for key in ("sky", "override", "hidden")
        }
        return {
            "found": store.search(ns, query="telescopes astronomy", limit=2),
            "kinds": kinds,
            "texts": texts,
        }

    got = await in_thread(server, work, index={"fields": ["about"]})

    assert {i.key for i in got["found"]} == {"sky", "override"}
    assert got["kinds"] == {"sky": memory_pb2.MEMORY_KIND_FACT, "food": memory_pb2.MEMORY_KIND_PREFERENCE}
    assert got["texts"] == {
        "sky": "astronomy telescopes",
        "override": "telescopes astronomy",
        "hidden": "hidden",
    }


async def test_a_search_without_query_lists_the_most_recently_updated_first(server: RunningServer) -> None:
    def work(store: EpisodicStore) -> dict[str, Any]:
        for n in range(5):
            store.put(("mary", "notes"), f"n{n}", {"n": n, "even": n % 2 == 0})
        store.put(("mary", "notes"), "n1", {"n": 1, "even": False, "edited": True})
        return {
            "all": store.search(("mary", "notes")),
            "page": store.search(("mary", "notes"), limit=2, offset=1),
            "even": store.search(("mary",), filter={"even": True}, limit=2),
            "ne": store.search(("mary",), filter={"n": {"$ne": 0, "$lt": 3}}),
            "nested": store.search(("mary",), filter={"edited": True}),
        }

    got = await in_thread(server, work)

    assert [i.key for i in got["all"]] == ["n1", "n4", "n3", "n2", "n0"]
    assert all(i.score is None for i in got["all"])
    assert [i.key for i in got["page"]] == ["n4", "n3"]
    assert [i.key for i in got["even"]] == ["n4", "n2"], "limit counts matches, not the items read"
    assert [i.key for i in got["ne"]] == ["n1", "n2"]
    assert [i.value for i in got["nested"]] == [{"n": 1, "even": False, "edited": True}]


async def test_list_namespaces_needs_the_user_and_matches_prefix_suffix_and_depth(
    server: RunningServer,
) -> None:
    def work(store: EpisodicStore) -> dict[str, Any]:
        for ns in [("mary", "a", "b"), ("mary", "a", "c", "d"), ("mary", "x"), ("bob", "a", "b")]:
            store.put(ns, "k", {"text": "."})
        with pytest.raises(ValueError, match="needs a prefix naming the user") as refused:
            store.list_namespaces(suffix=("b",))
        return {
            "mary": store.list_namespaces(prefix=("mary",)),
            "depth": store.list_namespaces(prefix=("mary", "a"), max_depth=3),
            "suffix": store.list_namespaces(prefix=("mary",), suffix=("d",)),
            "wild": store.list_namespaces(prefix=("mary", "*", "b")),
            "page": store.list_namespaces(prefix=("mary",), limit=1, offset=1),
            "refused": refused.value,
        }

    got = await in_thread(server, work)

    assert got["mary"] == [("mary", "a", "b"), ("mary", "a", "c", "d"), ("mary", "x")]
    assert got["depth"] == [("mary", "a", "b"), ("mary", "a", "c")]
    assert got["suffix"] == [("mary", "a", "c", "d")]
    assert got["wild"] == [("mary", "a", "b")]
    assert got["page"] == [("mary", "a", "c", "d")]


async def test_the_async_methods_do_what_the_sync_ones_do(server: RunningServer) -> None:
    with EpisodicClient(server.address, api_key=KEY_A, timeout=10.0) as client:
        agent_id = (await asyncio.to_thread(client.create_agent, unique("agent"))).agent.agent_id
        store = EpisodicStore(client, agent_id)
        await store.aput(("mary", "pets"), "cat", {"text": "My cat is called Zanzibar"})
        await store.abatch([PutOp(("mary", "pets"), "dog", {"text": "My dog is called Rex"})])
        got = await store.aget(("mary", "pets"), "cat")
        found = await store.asearch(("mary",), query="Zanzibar", limit=1)
        spaces = await store.alist_namespaces(prefix=("mary",))
        await store.adelete(("mary", "pets"), "cat")
        gone = await store.aget(("mary", "pets"), "cat")
        left = await store.asearch(("mary", "pets"))

    assert got is not None and got.value == {"text": "My cat is called Zanzibar"}
    assert [i.key for i in found] == ["cat"]
    assert spaces == [("mary", "pets")]
    assert gone is None and [i.key for i in left] == ["dog"]


async def test_a_ttl_is_the_memorys_expiry_and_reads_move_it_on(server: RunningServer) -> None:
    ttl = {"default_ttl": 60.0, "refresh_on_read": True}

    def work(store: EpisodicStore) -> dict[str, Any]:
        client = store._client

        def expiry(key: str) -> datetime | None:
            memory = client.get_memory(store.memory_id(("mary", "s"), key)).memory
            return memory.expire_time.ToDatetime(tzinfo=UTC) if memory.HasField("expire_time") else None

        before = datetime.now(UTC)
        store.put(("mary", "s"), "default", {"text": "a"})
        store.put(("mary", "s"), "short", {"text": "b"}, ttl=5)
        store.put(("mary", "s"), "forever", {"text": "c"}, ttl=None)
        short = expiry("short")
        client.update_memory(  # as if 4 minutes had passed: 1 minute left
            _expiring(store.memory_id(("mary", "s"), "short"), datetime.now(UTC) + timedelta(minutes=1)),
            ["expire_time"],
        )
        store.get(("mary", "s"), "short", refresh_ttl=False)
        kept = expiry("short")
        store.get(("mary", "s"), "short")
        refreshed = expiry("short")
        store.search(("mary",), query="b")
        return {
            "before": before,
            "default": expiry("default"),
            "short": short,
            "kept": kept,
            "refreshed": refreshed,
            "forever": expiry("forever"),
        }

    got = await in_thread(server, work, ttl=ttl)

    start = got["before"]
    assert start + timedelta(minutes=59) < got["default"] < start + timedelta(minutes=61)
    assert start + timedelta(minutes=4) < got["short"] < start + timedelta(minutes=6)
    assert got["kept"] < start + timedelta(minutes=2), "refresh_ttl=False leaves the expiry"
    assert got["refreshed"] > start + timedelta(minutes=4), "a refreshing read moves it to now + ttl"
    assert got["forever"] is None


def _expiring(memory_id: str, at: datetime) -> memory_pb2.Memory:
    memory = memory_pb2.Memory(memory_id=memory_id)
    memory.expire_time.FromDatetime(at)
    return memory


# --- refusals -------------------------------------------------------------------------------


class Opaque:
    pass


REFUSED: list[tuple[str, Callable[[EpisodicStore], object], str]] = [
    ("a datetime", lambda s: s.put(("mary",), "k", {"at": datetime.now(UTC)}), r"value\['at'\]: a datetime"),
    ("an object", lambda s: s.put(("mary",), "k", {"x": [1, Opaque()]}), r"value\['x'\]\[1\]: a Opaque"),
    ("bytes", lambda s: s.put(("mary",), "k", {"b": b"\x00"}), "a bytes is not JSON"),
    ("a set", lambda s: s.put(("mary",), "k", {"s": {1}}), "a set is not JSON"),
    ("NaN", lambda s: s.put(("mary",), "k", {"f": math.nan}), "NaN or Infinity"),
    ("a big int", lambda s: s.put(("mary",), "k", {"i": 2**60}), r"beyond \+-2\*\*53"),
    ("an int key", lambda s: s.put(("mary",), "k", {"d": {1: "x"}}), "key 1 is a int"),
    ("a NUL", lambda s: s.put(("mary",), "k", {"t": "a\x00b"}), "NUL character"),
    (
        "a huge value",
        lambda s: s.put(("mary",), "k", {"text": "x" * 20_000}),
        "limit of 16384",
    ),
    ("a deep value", lambda s: s.put(("mary",), "k", _nested(40)), "nests too deeply"),
    ("a deep namespace", lambda s: s.put(("mary", *"abcdefghijklmnop"), "k", {}), "at most 16"),
    ("a bad user", lambda s: s.put(("mary smith", "a"), "k", {}), "not a valid Episodic user id"),
    ("no user", lambda s: s.search(()), "first label must be the Episodic user id"),
    ("a dotted label", lambda s: s.put(("mary", "a.b"), "k", {}), "cannot contain periods"),
    ("a deep page", lambda s: s.search(("mary",), query="x", offset=95, limit=10), "100 best matches"),
    ("an operator", lambda s: s.search(("mary",), filter={"n": {"$in": [1]}}), r"operator '\$in'"),
    ("a ttl", lambda s: s.put(("mary",), "k", {}, ttl=-1), "ttl -1 must be a number of minutes > 0"),
]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"v": value}
    return value


async def test_what_cannot_be_stored_is_refused_by_name_and_a_refused_batch_writes_nothing(
    server: RunningServer,
) -> None:
    def work(store: EpisodicStore) -> tuple[dict[str, str], list[SearchItem]]:
        messages: dict[str, str] = {}
        for name, call, _ in REFUSED:
            with pytest.raises(ValueError) as refused:  # noqa: PT011 - matched against REFUSED's patterns below
                call(store)
            messages[name] = str(refused.value)
        with pytest.raises(ValueError, match="a Opaque"):
            store.batch(
                [PutOp(("mary", "ok"), "good", {"text": "fine"}), PutOp(("mary",), "bad", {"o": Opaque()})]
            )
        with pytest.raises(ValueError, match="'embed'"):
            EpisodicStore(
                store._client, store.agent_id, index={"dims": 3, "embed": "fake", "fields": ["text"]}
            )
        return messages, store.search(("mary",))

    messages, left = await in_thread(server, work)

    for name, _, pattern in REFUSED:
        assert re.search(pattern, messages[name]), (name, messages[name])
    assert left == [], "nothing of a refused batch was written"
    assert issubclass(InvalidNamespaceError, ValueError)


async def test_an_agent_restricted_key_is_refused_by_name_and_leaves_nothing(database_url: str) -> None:
    """Such a key renames the memory ids it creates (docs/api.md): the store could not find
    its items again, so it says so and deletes what the server stored."""
    restricted = "epk_test_tenant_a_langgraph_only_0123456789"
    agent_id = unique("agent")
    keys = ",".join([config_line(TENANT_A, KEY_A), config_line(TENANT_A, restricted, [agent_id])])

    def work(address: str) -> tuple[str, int]:
        with (
            EpisodicClient(address, api_key=KEY_A) as tenant,
            EpisodicClient(address, api_key=restricted) as agent_only,
        ):
            tenant.create_agent(agent_id)
            with pytest.raises(ValueError, match="restricted to some agents renames the ids") as refused:
                EpisodicStore(agent_only, agent_id).put(("mary", "a"), "k", {"text": "hello"})
            return str(refused.value), len(tenant.list_memories(agent_id, "mary").memories)

    async with running_server(settings_for(database_url, api_keys=keys)) as server:
        message, left = await asyncio.to_thread(work, server.address)

    assert "key 'k'" in message and left == 0


class RacedStore(EpisodicStore):
    """Another writer deletes each key between our create (which found it taken) and our
    update: its first `misses` updates delete the memory and find nothing."""

    misses = 2

    def _update(self, w: Any) -> bool:
        if self.misses:
            self.misses -= 1
            self._client.delete_memory(w.memory_id)
        return super()._update(w)


async def test_a_key_another_writer_stored_is_updated_not_refused(server: RunningServer) -> None:
    """A store that has not seen the keys creates them, finds them taken, and updates; when
    they are deleted in between, it creates them again."""

    def work(store: EpisodicStore) -> list[Any]:
        store.put(("mary",), "a", {"v": 1})
        store.put(("mary",), "b", {"v": 1})
        EpisodicStore(store._client, store.agent_id).batch([PutOp(("mary",), "a", {"v": 2})])
        raced = RacedStore(store._client, store.agent_id)
        raced.batch([PutOp(("mary",), "a", {"v": 3}), PutOp(("mary",), "b", {"v": 3})])
        return [store.get(("mary",), "a"), store.get(("mary",), "b"), raced.misses]

    *got, misses = await in_thread(server, work)

    assert [i.value for i in got] == [{"v": 3}, {"v": 3}] and misses == 0


async def test_a_key_whose_ttl_ran_out_can_be_put_again_at_once(server: RunningServer) -> None:
    """By the store that wrote it (which updates first) and by one that never saw it."""

    def work(store: EpisodicStore) -> list[Any]:
        store.put(("mary",), "a", {"v": 1}, ttl=0.01)  # 0.6 s
        store.put(("mary",), "b", {"v": 1}, ttl=0.01)
        deadline = time.monotonic() + 10
        while any(store.get(("mary",), k, refresh_ttl=False) for k in "ab"):  # a refresh moves it on
            assert time.monotonic() < deadline, "the items did not expire"
            time.sleep(0.1)
        store.put(("mary",), "a", {"v": 2})
        EpisodicStore(store._client, store.agent_id).put(("mary",), "b", {"v": 2})
        return [store.get(("mary",), "a"), store.get(("mary",), "b")]

    got = await in_thread(server, work)

    assert [i.value for i in got] == [{"v": 2}, {"v": 2}]


# --- the same ops as InMemoryStore --------------------------------------------------------


def scenario_basic(s: BaseStore) -> list[Any]:
    s.put(("u1", "a"), "k1", {"text": "one", "n": 1})
    s.put(("u1", "a"), "k2", {"text": "two", "n": 2, "nested": {"x": [1, 2]}})
    s.put(("u1", "a"), "k1", {"text": "uno", "n": 1.5})
    s.put(("u1", "b", "c"), "k3", {"text": "three"})
    s.delete(("u1", "a"), "k2")
    return [
        s.get(("u1", "a"), "k1"),
        s.get(("u1", "a"), "k2"),
        s.get(("u1", "b", "c"), "k3"),
        s.get(("u1",), "k3"),
    ]


def scenario_filters(s: BaseStore) -> list[Any]:
    rows = [
        {"color": "red", "score": 4.5, "tags": ["a", "b"], "meta": {"size": "L", "n": 3}},
        {"color": "blue", "score": 3, "tags": ["a"], "meta": {"size": "S", "n": 1}},
        {"color": "red", "score": 2, "tags": ["b", "a"], "meta": {"size": "S", "n": 2}},
    ]
    for i, row in enumerate(rows):
        s.put(("u1", "items"), f"i{i}", row)
    filters: list[dict[str, Any]] = [
        {"color": "red"},
        {"score": {"$gt": 2.5}},
        {"score": {"$gte": 3, "$lte": 4.5}},
        {"color": {"$ne": "red"}},
        {"tags": ["a", "b"]},
        {"meta": {"size": "S"}},
        {"color": "red", "score": {"$lt": 3}},
        {"color": {"$eq": "green"}},
    ]
    return [sorted(shown(s.search(("u1",), filter=f))) for f in filters]


def scenario_prefixes(s: BaseStore) -> list[Any]:
    for ns in [("u1", "a"), ("u1", "a", "b"), ("u1", "ab"), ("u1", "b", "a"), ("u2", "a")]:
        s.put(ns, "k", {"where": "/".join(ns)})
    searches = [
        sorted(shown(s.search(p))) for p in [("u1",), ("u1", "a"), ("u1", "a", "b"), ("u1", "c"), ("u2",)]
    ]
    listings = [
        s.list_namespaces(prefix=("u1",)),
        s.list_namespaces(prefix=("u1", "a")),
        s.list_namespaces(prefix=("u1",), suffix=("a",)),
        s.list_namespaces(prefix=("u1", "*", "a")),
        s.list_namespaces(prefix=("u1",), max_depth=2),
        s.list_namespaces(prefix=("u1",), limit=2, offset=1),
    ]
    return [searches, listings]


def scenario_batch(s: BaseStore) -> list[Any]:
    """In one batch, reads see the store as it was before the batch's writes."""
    from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, SearchOp

    s.put(("u1", "x"), "old", {"v": 0})
    results = s.batch(
        [
            PutOp(("u1", "x"), "new", {"v": 1}),
            GetOp(("u1", "x"), "new"),
            PutOp(("u1", "x"), "old", None),
            SearchOp(("u1",), limit=10),
            ListNamespacesOp((MatchCondition("prefix", ("u1",)),)),
            PutOp(("u1", "x"), "new", {"v": 2}),
        ]
    )
    after = [s.get(("u1", "x"), "new"), s.get(("u1", "x"), "old")]
    return [results[0], results[1], shown(results[3]), results[4], after]  # type: ignore[arg-type]


SCENARIOS = [scenario_basic, scenario_filters, scenario_prefixes, scenario_batch]


def comparable(result: Any) -> Any:
    """Items without their times (each store stamps its own)."""
    if isinstance(result, Item):
        return ("item", result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [comparable(r) for r in result]
    if isinstance(result, tuple) and result and isinstance(result[0], tuple | str):
        return tuple(comparable(r) for r in result)
    return result


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_the_same_ops_give_what_in_memory_store_gives(
    server: RunningServer, scenario: Callable[[BaseStore], list[Any]]
) -> None:
    expected = comparable(scenario(InMemoryStore()))

    got = comparable(await in_thread(server, scenario))

    assert got == expected


# --- round trips ----------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=12)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=16,
)


async def test_any_json_value_reads_back_equal(server: RunningServer) -> None:
    def work(store: EpisodicStore) -> int:
        keys = itertools.cycle(["a", "b", "c"])  # a key is created, then overwritten
        tried = itertools.count()

        @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(st.dictionaries(_text, _json_values, max_size=6))
        def round_trip(value: dict[str, Any]) -> None:
            key = next(keys)
            next(tried)
            store.put(("mary", "ünï", "🐈"), key, value)
            item = store.get(("mary", "ünï", "🐈"), key)
            assert item is not None and item.value == value
            assert _types(item.value) == _types(value)

        round_trip()
        return next(tried)

    assert await in_thread(server, work) > 1


def _types(value: Any) -> Any:
    """Types as JSON has them: a number is a number (an integral float reads as an int)."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_types(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "number"
    return type(value).__name__


# --- the example --------------------------------------------------------------------------


async def test_the_example_shows_the_model_what_the_user_said_in_the_first_session(
    sqlite_server: RunningServer,
) -> None:
    env = {**os.environ, "EPISODIC_ADDRESS": sqlite_server.address, "EPISODIC_API_KEY": KEY_A}

    done = await run_process(sys.executable, str(EXAMPLE), env=env, timeout=60)

    assert done.returncode == 0, done.stderr
    assert "Zanzibar" in done.stdout.split("the model received")[-1], done.stdout
