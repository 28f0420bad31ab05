"""LangGraph's long-term memory store over Episodic's memories (`pip install
"episodic-client[langgraph]"`): `EpisodicStore` is a `langgraph` `BaseStore`, so a graph
compiled with `store=EpisodicStore(...)` and its nodes (`store: BaseStore`) keep what they
put in Episodic, isolated per user, searchable by meaning, and seen by the agent's own
recall (Known Facts) too.

What maps to what (the store is bound to one agent):
- a namespace is (user_id, *topic path): its first label is the Episodic user (every memory
  call names agent and user, so users never see each other's items), the rest a path inside
  that user's items; an item is one memory of (agent, user);
- the memory's id is derived from (agent, namespace, key): "lg-" + SHA-256 hex, so get,
  put and delete address it directly (GetMemory, UpdateMemory, DeleteMemory);
- the item's value is kept whole in the memory's metadata, with its namespace and key;
  the memory's text is what a query searches: the value's fields named by `index=`
  (the put's, else the store's `index={"fields": [...]}`), else its "text" or "content"
  string, else the value as JSON; its kind is the value's "kind" when that names one
  (fact, preference, event), else FACT;
- each memory carries one topic per prefix of its topic path, "ns:" + a hash of that prefix
  (hashed: any label fits the 64-character topic rule and no PII redaction rewrites it), so
  a search or listing under a prefix is filtered by the server (ListMemories and
  SearchMemories `topics`); the exact prefix is checked again on the metadata;
- put is CreateMemories with `keep_separate` (no merging into a repeat, no superseding) for
  a key this store has not seen stored, or UpdateMemory (text, kind, topics, metadata,
  expiry) for one it has (read, listed, searched or written by it: it remembers the latest
  4096 such ids). There is no upsert RPC, so each falls back to the other: a create that
  finds the id taken (ALREADY_EXISTS, `MEMORY_ID_CONFLICT`: another writer's key) updates,
  an update that finds none (NOT_FOUND: deleted or expired meanwhile) creates. A new key is
  one call that succeeds, as is a key read before it is put; a value None deletes; a batch's
  reads see the store as it was before the batch's writes, as in `InMemoryStore`, and every
  write of a batch is checked before any is sent;
- search with a query is SearchMemories (hybrid by default: meaning fused with word
  matches), best first with the server's scores; without one it lists the prefix's items,
  most recently updated first; `filter` is applied to the values here (exact match, nested
  objects and lists, $eq $ne $gt $gte $lt $lte), then offset and limit;
- TTL (minutes, `TTLConfig` or put's `ttl=`) is the memory's expire_time: the server hides
  and deletes expired memories itself, so `sweep_interval_minutes` needs no sweeper here; a
  read that refreshes (get/search, `refresh_on_read`) moves expire_time on, which also moves
  the item's updated_at (UpdateMemory stamps the memory);
- superseded memories are still this store's items (a memory extracted from a conversation
  may contradict one): searches and listings include them.

Limits, each refused with a ValueError naming it: the namespace's first label must be a
valid Episodic user id and searches and listings must name it (there is no "list users"
RPC: ListEpisodes would miss users who have items but no episodes); a namespace has at most
16 labels (16 topics per memory); a value must be JSON (string keys; str, finite float,
int within +-2**53, bool, None, list, dict; a tuple reads back as a list) and at most 16 KiB
as JSON with its namespace and key, nested at most 31 deep; a query search ranks the 100
best matches (SearchMemories' top_k), so offset + limit must be at most 100; TTLs are
positive and at most 100 years. The searched text is the first 2000 characters of the
indexed fields (the value is kept whole); an item with no indexed text (`index=False`) is
searched by its key. Numbers read back as JSON numbers: an integral one as an int. An
agent-restricted API key renames the ids it creates (docs/api.md), so the store needs a
key of the whole tenant. A key whose TTL ran out can be put again at once (the server frees
an expired memory's id when a create names it)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from google.protobuf import json_format, struct_pb2
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    validate_op_namespace,
)

from episodic_client import values
from episodic_client.errors import AlreadyExistsError, NotFoundError
from episodic_client.memory_requests import memory_input, memory_kind
from episodic_client.sync_client import EpisodicClient
from episodic_client.v1 import memory_pb2, memory_service_pb2
from episodic_client.values import MAX_EXACT_INT, integral_numbers

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")  # the server's rule for ids
MAX_LABELS = 16  # Episodic keeps up to 16 topics per memory: one per prefix of the path
MAX_TEXT_CHARS = 2000  # a memory's text
MAX_METADATA_BYTES = 16 * 1024  # a memory's metadata, as JSON
MAX_JSON_DEPTH = 32  # the server's nesting limit of JSON payloads
MAX_RANKED = 100  # SearchMemories' top_k
MAX_TTL_MINUTES = 100 * 366 * 24 * 60
MAX_BATCH = 100  # CreateMemories
KNOWN_IDS = 4096  # memory ids seen stored, which a put updates rather than creates
PAGE = 1000  # ListMemories' largest page
_KINDS = ("fact", "preference", "event")
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_MASK = ("text", "kind", "topics", "metadata", "expire_time")


@dataclass(frozen=True, slots=True)
class _Write:
    """One put, checked and shaped as the memory it writes (value None: a delete)."""

    namespace: tuple[str, ...]
    key: str
    user_id: str
    memory_id: str
    text: str = ""
    kind: str = "fact"
    topics: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    expire_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Stored:
    """One memory read as this store's item."""

    memory: memory_pb2.Memory
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    ttl_minutes: float | None


class EpisodicStore(BaseStore):
    """A LangGraph store over the long-term memories of one Episodic agent.

    `index={"fields": [...]}`: the value fields a query searches (the server embeds them
    with the agent's embedder, so `embed` and `dims` are not taken). `ttl`: LangGraph's
    TTLConfig (default_ttl and refresh_on_read; the server sweeps expired memories).
    `search_mode`: "hybrid" (meaning and words) or "semantic" (meaning, cosine scores)."""

    supports_ttl = True

    def __init__(
        self,
        client: EpisodicClient,
        agent_id: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        search_mode: str = "hybrid",
    ) -> None:
        if not _ID.fullmatch(agent_id):
            raise ValueError(
                f"agent_id {agent_id!r} is not a valid Episodic id (1-128 of A-Z a-z 0-9 . _ : @ -)"
            )
        if search_mode not in ("hybrid", "semantic"):
            raise ValueError(f"search_mode {search_mode!r} is not supported (hybrid or semantic)")
        self._client = client
        self.agent_id = agent_id
        self.index_config = _checked_index(index)
        self.ttl_config = ttl
        self._mode = search_mode
        self._known = _KnownIds(KNOWN_IDS)

    # --- the BaseStore contract -----------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Runs the reads, then the writes (the last put of a key wins), after checking all."""
        ops = list(ops)
        writes = self._checked(ops)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                results.append(None)
        self._write(writes)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` on a worker thread: one code path, and the event loop never waits on gRPC."""
        return await asyncio.to_thread(self.batch, list(ops))

    # --- checks ---------------------------------------------------------------------------

    def _checked(self, ops: Sequence[Op]) -> list[_Write]:
        """Every op is checked before anything is sent: a refused op writes nothing."""
        writes: dict[tuple[tuple[str, ...], str], _Write] = {}
        for op in ops:
            if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
                raise ValueError(
                    f"{type(op).__name__} is not supported (GetOp, PutOp, SearchOp, ListNamespacesOp)"
                )
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                writes[(op.namespace, op.key)] = self._shaped(op)
            elif isinstance(op, SearchOp):
                _check_search(op)
        return list(writes.values())

    def _shaped(self, op: PutOp) -> _Write:
        user_id, path = _split(op.namespace, "namespace")
        key = _checked_text(op.key, "key")
        memory_id = self.memory_id(op.namespace, key)
        if op.value is None:
            return _Write(op.namespace, key, user_id, memory_id)
        if len(op.namespace) > MAX_LABELS:
            raise InvalidNamespaceError(
                f"namespace {op.namespace!r} has {len(op.namespace)} labels: at most {MAX_LABELS} "
                "(a memory carries at most 16 topics, one per prefix of the path after the user)"
            )
        value = _json_object(op.value, "value")
        metadata: dict[str, Any] = {"namespace": list(op.namespace), "key": key, "value": value}
        if op.ttl is not None:
            metadata["ttl_minutes"] = _checked_ttl(op.ttl)
        _check_size(metadata, op.namespace, key)
        fields = op.index if op.index is not None else self.index_config.get("fields")
        return _Write(
            op.namespace,
            key,
            user_id,
            memory_id,
            text=_searched_text(value, fields, key),
            kind=_kind(value),
            topics=tuple(_topic(path[:depth]) for depth in range(len(path) + 1)),
            metadata=metadata,
            expire_time=_expiry(op.ttl),
        )

    def memory_id(self, namespace: tuple[str, ...], key: str) -> str:
        """The id of the memory holding (namespace, key): memory ids are unique per tenant,
        so the agent is part of it."""
        body = json.dumps([self.agent_id, list(namespace), key])
        return "lg-" + hashlib.sha256(body.encode()).hexdigest()

    # --- reads ----------------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        user_id, _ = _split(op.namespace, "namespace")
        try:
            memory = self._client.get_memory(self.memory_id(op.namespace, op.key)).memory
        except NotFoundError:
            return None
        stored = self._read(memory, user_id)
        if stored is None or stored.namespace != op.namespace or stored.key != op.key:
            return None
        if op.refresh_ttl:
            self._refresh([stored])
        return _item(stored)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user_id, path = _split(op.namespace_prefix, "namespace_prefix (its first label is the user)")
        found: list[tuple[_Stored, float | None]]
        if op.query:
            found = list(self._ranked(user_id, path, op))
        else:
            found = [(s, None) for s in self._newest_first(self._under(user_id, path))]
        kept = [
            (s, score) for s, score in found if s.namespace[: len(op.namespace_prefix)] == op.namespace_prefix
        ]
        if op.filter:
            kept = [(s, score) for s, score in kept if _matches(s.value, op.filter)]
        page = kept[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            self._refresh([s for s, _ in page])
        return [_search_item(s, score) for s, score in page]

    def _ranked(self, user_id: str, path: tuple[str, ...], op: SearchOp) -> list[tuple[_Stored, float]]:
        """The best matches under the prefix; with a filter, all 100 (the filter is applied
        here, and may leave few of them)."""
        hits = self._client.search_memories(
            self.agent_id,
            user_id,
            op.query or "",
            mode=self._mode,
            top_k=MAX_RANKED if op.filter else op.offset + op.limit,
            topics=[_topic(path)],
            include_superseded=True,
        ).hits
        found = [(self._read(h.memory, user_id), float(h.score)) for h in hits]
        return [(s, score) for s, score in found if s is not None]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefixes = [c.path for c in op.match_conditions or () if c.match_type == "prefix"]
        named = [p for p in prefixes if p and p[0] != "*"]
        if not named:
            raise ValueError(
                "list_namespaces needs a prefix naming the user (its first label): Episodic has no "
                "listing of an agent's users"
            )
        user_id, path = _split(tuple(named[0]), "prefix (its first label is the user)")
        leading = tuple(path[: path.index("*")] if "*" in path else path)
        found = {s.namespace for s in self._under(user_id, leading)}
        matching = [ns for ns in found if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            matching = list({ns[: op.max_depth] for ns in matching})
        return sorted(matching)[op.offset : op.offset + op.limit]

    def _under(self, user_id: str, path: tuple[str, ...]) -> Iterator[_Stored]:
        """Every item of the user whose topic path starts with `path`, newest created first."""
        token = ""
        while True:
            page = self._client.list_memories(
                self.agent_id,
                user_id,
                topics=[_topic(path)],
                include_superseded=True,
                page_size=PAGE,
                page_token=token,
            )
            for memory in page.memories:
                stored = self._read(memory, user_id)
                if stored is not None and stored.namespace[1 : len(path) + 1] == path:
                    yield stored
            token = page.next_page_token
            if not token:
                return

    @staticmethod
    def _newest_first(items: Iterable[_Stored]) -> list[_Stored]:
        def updated(s: _Stored) -> tuple[datetime, str]:
            return (s.memory.update_time.ToDatetime(tzinfo=UTC), s.memory.memory_id)

        return sorted(items, key=updated, reverse=True)

    def _read(self, memory: memory_pb2.Memory, user_id: str) -> _Stored | None:
        """The memory as an item of this store, or None when it is not one (another
        agent's or user's, or a memory the store did not write)."""
        if memory.agent_id != self.agent_id or memory.user_id != user_id or not memory.HasField("metadata"):
            return None
        fields = json_format.MessageToDict(memory.metadata)
        namespace, key, value = fields.get("namespace"), fields.get("key"), fields.get("value")
        if not (isinstance(namespace, list) and isinstance(key, str) and isinstance(value, dict)):
            return None
        if (
            not namespace
            or namespace[0] != user_id
            or memory.memory_id != self.memory_id(tuple(namespace), key)
        ):
            return None
        ttl = fields.get("ttl_minutes")
        self._known.add(memory.memory_id)
        return _Stored(
            memory, tuple(namespace), key, integral_numbers(value), ttl if isinstance(ttl, float) else None
        )

    # --- writes ---------------------------------------------------------------------------

    def _write(self, writes: Sequence[_Write]) -> None:
        for w in writes:
            if w.metadata is None:
                self._delete(w)
        puts = [w for w in writes if w.metadata is not None]
        new = [w for w in puts if w.memory_id not in self._known or not self._update(w)]
        for user_id in dict.fromkeys(w.user_id for w in new):
            mine = [w for w in new if w.user_id == user_id]
            for start in range(0, len(mine), MAX_BATCH):
                self._create(user_id, mine[start : start + MAX_BATCH])

    def _delete(self, w: _Write) -> None:
        self._known.discard(w.memory_id)
        with contextlib.suppress(NotFoundError):  # deleting what is not there is done
            self._client.delete_memory(w.memory_id)

    def _update(self, w: _Write) -> bool:
        """Overwrites the key's memory; False when there is none (any more)."""
        memory = memory_pb2.Memory(
            memory_id=w.memory_id,
            text=w.text,
            kind=memory_kind(w.kind),
            topics=w.topics,
            metadata=values.struct(w.metadata),
            expire_time=values.timestamp(w.expire_time),
        )
        try:
            self._client.update_memory(memory, _MASK)
        except NotFoundError:
            self._known.discard(w.memory_id)
            return False
        self._known.add(w.memory_id)
        return True

    def _create(self, user_id: str, writes: Sequence[_Write]) -> None:
        """Creates the keys' memories; one whose id is taken (another writer's key) is updated."""
        try:
            results = self._create_memories(user_id, writes)
        except AlreadyExistsError as exc:
            self._after_conflict(user_id, writes, exc)
            return
        self._check_ids(writes, [r.memory.memory_id for r in results])
        for w, result in zip(writes, results, strict=True):
            self._known.add(w.memory_id)
            if result.outcome == memory_service_pb2.MEMORY_OUTCOME_UNCHANGED:
                self._update(w)  # the same value put again: it is still an update (updated_at)

    def _after_conflict(self, user_id: str, writes: Sequence[_Write], exc: AlreadyExistsError) -> None:
        """A create found an id taken: another writer stored that key (it is updated now)."""
        if len(writes) > 1:
            for w in writes:  # which of them: one at a time
                self._create(user_id, [w])
            return
        w = writes[0]
        if self._update(w):
            return
        self._create_again(user_id, w, exc)

    def _create_again(self, user_id: str, w: _Write, exc: AlreadyExistsError) -> None:
        """Taken when created, gone when updated: deleted (or expired) in between."""
        try:
            self._create_memories(user_id, [w])
        except AlreadyExistsError as again:
            raise AlreadyExistsError(
                again.code, f"key {w.key!r} of {w.namespace!r}: {again.message}", again.reason
            ) from exc
        self._known.add(w.memory_id)

    def _create_memories(
        self, user_id: str, writes: Sequence[_Write]
    ) -> list[memory_service_pb2.MemoryResult]:
        inputs = [
            memory_input(
                w.text,
                w.kind,
                memory_id=w.memory_id,
                topics=w.topics,
                expire_time=w.expire_time,
                metadata=w.metadata,
            )
            for w in writes
        ]
        created = self._client.create_memories(
            inputs, agent_id=self.agent_id, user_id=user_id, placement="eager", keep_separate=True
        )
        return list(created.results)

    def _check_ids(self, writes: Sequence[_Write], stored: Sequence[str]) -> None:
        renamed = [(w, got) for w, got in zip(writes, stored, strict=True) if w.memory_id != got]
        if not renamed:
            return
        for _, got in renamed:  # nothing the store cannot address again is left behind
            self._client.delete_memory(got)
        w, got = renamed[0]
        raise ValueError(
            f"the server stored key {w.key!r} as memory {got!r}, not {w.memory_id!r}: an API key "
            "restricted to some agents renames the ids it creates (docs/api.md), so the store "
            "could not find its items again; use a key of the whole tenant"
        )

    def _refresh(self, items: Sequence[_Stored]) -> None:
        """Moves the expiry of items with a TTL on (refresh on read)."""
        for s in items:
            if s.ttl_minutes is None:
                continue
            memory = memory_pb2.Memory(
                memory_id=s.memory.memory_id, expire_time=values.timestamp(_expiry(s.ttl_minutes))
            )
            with contextlib.suppress(NotFoundError):  # expired or deleted since it was read
                self._client.update_memory(memory, ["expire_time"])


class _KnownIds:
    """Memory ids seen stored, the latest `size` of them (the store is used from threads)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, memory_id: object) -> bool:
        with self._lock:
            return memory_id in self._ids

    def add(self, memory_id: str) -> None:
        with self._lock:
            self._ids[memory_id] = None
            self._ids.move_to_end(memory_id)
            while len(self._ids) > self._size:
                self._ids.popitem(last=False)

    def discard(self, memory_id: str) -> None:
        with self._lock:
            self._ids.pop(memory_id, None)


# --- namespaces and topics ----------------------------------------------------------------


def _split(namespace: tuple[str, ...], what: str) -> tuple[str, tuple[str, ...]]:
    """(user id, topic path) of a namespace or prefix."""
    if not namespace:
        raise InvalidNamespaceError(f"{what} is empty: its first label must be the Episodic user id")
    user_id = namespace[0]
    if not isinstance(user_id, str) or not _ID.fullmatch(user_id):
        raise InvalidNamespaceError(
            f"{what} {namespace!r}: its first label {user_id!r} is not a valid Episodic user id "
            "(1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit)"
        )
    for label in namespace:
        _checked_text(label, f"{what} label")
    return user_id, tuple(namespace[1:])


def _topic(path: tuple[str, ...]) -> str:
    """The topic every item under `path` carries: hashed, so any labels fit 64 characters."""
    return "ns:" + hashlib.sha256(json.dumps(list(path)).encode()).hexdigest()[:32]


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix match, "*" matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"match type {condition.match_type!r} is not supported (prefix, suffix)")
    return all(want in ("*", have) for have, want in pairs)


# --- values -------------------------------------------------------------------------------


def _checked_index(index: IndexConfig | None) -> IndexConfig:
    if index is None:
        return {}
    other = sorted(set(index) - {"fields"})
    if other:
        raise ValueError(
            f"index option(s) {other} are not supported: the server embeds with the agent's "
            "embedder; EpisodicStore takes index={'fields': [...]} only"
        )
    return {"fields": list(index.get("fields") or [])}


def _check_search(op: SearchOp) -> None:
    if op.limit < 0 or op.offset < 0:
        raise ValueError(f"search limit and offset must be >= 0, got limit={op.limit} offset={op.offset}")
    if op.query and op.offset + op.limit > MAX_RANKED:
        raise ValueError(
            f"a query search ranks the {MAX_RANKED} best matches (SearchMemories' top_k): "
            f"offset + limit is {op.offset + op.limit}"
        )
    if op.filter:
        _check_filter(op.filter, "filter")


def _check_filter(filter_value: Mapping[str, Any], where: str) -> None:
    for name, want in filter_value.items():
        if name.startswith("$") and name not in _OPERATORS:
            raise ValueError(f"{where}: operator {name!r} is not supported ({', '.join(_OPERATORS)})")
        if isinstance(want, Mapping):
            _check_filter(want, f"{where}.{name}")


def _checked_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{what} {text!r} is a {type(text).__name__}, not a string")
    if "\x00" in text:
        raise ValueError(f"{what} {text!r} contains a NUL character, which cannot be stored")
    if re.search("[\ud800-\udfff]", text):
        raise ValueError(f"{what} {text!r} contains a lone surrogate, which is not valid Unicode text")
    return text


def _json_object(value: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The value as plain JSON (dicts, lists), refusing by path what JSON cannot hold."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} is a {type(value).__name__}: a value must be a dict (a JSON object)")
    return {_json_key(k, where): _json(v, f"{where}[{k!r}]") for k, v in value.items()}


def _json_key(key: object, where: str) -> str:
    if not isinstance(key, str):
        raise ValueError(f"{where}: key {key!r} is a {type(key).__name__}; JSON object keys are strings")
    return _checked_text(key, f"{where} key")


def _json(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_EXACT_INT:
            raise ValueError(
                f"{where}: {value} is beyond +-2**53, which a JSON number (a double) cannot hold exactly"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not valid JSON (NaN or Infinity)")
        return value
    if isinstance(value, str):
        return _checked_text(value, where)
    if isinstance(value, Mapping):
        return _json_object(value, where)
    if isinstance(value, list | tuple):
        return [_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ValueError(
        f"{where}: a {type(value).__name__} is not JSON-serialisable (str, number, bool, None, list, dict)"
    )


def _check_size(metadata: dict[str, Any], namespace: tuple[str, ...], key: str) -> None:
    """Measured as the server measures it: the Struct read back (numbers as doubles)."""
    as_server_reads = json_format.MessageToDict(values.struct(metadata) or struct_pb2.Struct())
    if _depth(as_server_reads) > MAX_JSON_DEPTH:
        raise ValueError(
            f"value of {namespace!r} / {key!r} nests too deeply: at most {MAX_JSON_DEPTH - 1} levels "
            "(the server's JSON limit, less the store's wrapper)"
        )
    size = len(json.dumps(as_server_reads, ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"value of {namespace!r} / {key!r} is {size} bytes as JSON with its namespace and key, "
            f"over Episodic's limit of {MAX_METADATA_BYTES} bytes of memory metadata"
        )


def _depth(value: Any) -> int:
    """The server's depth: an object's keys and values, a list's items, one level down."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in [*item.keys(), *item.values()])
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _checked_ttl(ttl: float) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL_MINUTES:
        raise ValueError(
            f"ttl {ttl!r} must be a number of minutes > 0 and at most {MAX_TTL_MINUTES} (100 years)"
        )
    return float(ttl)


def _expiry(ttl: float | None) -> datetime | None:
    return None if ttl is None else datetime.now(UTC) + timedelta(minutes=ttl)


def _searched_text(value: dict[str, Any], fields: Sequence[str] | Literal[False] | None, key: str) -> str:
    """What a query finds the item by (see the module docstring); never blank."""
    if fields is False:
        texts: list[str] = []
    elif fields:
        texts = [text for path in fields for text in get_text_at_path(value, path)]
    elif isinstance(value.get("text"), str) and value["text"].strip():
        texts = [value["text"]]
    elif isinstance(value.get("content"), str) and value["content"].strip():
        texts = [value["content"]]
    else:
        texts = get_text_at_path(value, "$")
    text = "\n".join(t for t in texts if t.strip())[:MAX_TEXT_CHARS].strip()
    return text or key.strip()[:MAX_TEXT_CHARS] or "(unindexed item)"


def _kind(value: dict[str, Any]) -> str:
    given = value.get("kind")
    return given.lower() if isinstance(given, str) and given.lower() in _KINDS else "fact"


# --- filters ------------------------------------------------------------------------------


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(_compare(value.get(name), want) for name, want in wanted.items())


def _compare(have: Any, want: Any) -> bool:
    """InMemoryStore's rules: a dict of $operators compares, any other dict matches nested
    fields, a list matches item by item, anything else by equality (a bool is not a number)."""
    if isinstance(want, Mapping):
        if any(name.startswith("$") for name in want):
            return all(_operator(have, name, operand) for name, operand in want.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v) for k, v in want.items())
    if isinstance(want, list | tuple):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(_compare(h, w) for h, w in zip(have, want, strict=True))
        )
    return _same(have, want)


def _same(have: Any, want: Any) -> bool:
    return isinstance(have, bool) == isinstance(want, bool) and bool(have == want)


def _operator(have: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return _compare(have, operand)
    if name == "$ne":
        return not _compare(have, operand)
    if not (_number(have) and _number(operand)) and not (isinstance(have, str) and isinstance(operand, str)):
        return False  # numbers with numbers, strings with strings; anything else never matches
    if name == "$gt":
        return bool(have > operand)
    if name == "$gte":
        return bool(have >= operand)
    if name == "$lt":
        return bool(have < operand)
    if name == "$lte":
        return bool(have <= operand)
    raise ValueError(f"filter operator {name!r} is not supported ({', '.join(_OPERATORS)})")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- items --------------------------------------------------------------------------------


def _item(s: _Stored) -> Item:
    return Item(
        value=s.value,
        key=s.key,
        namespace=s.namespace,
        created_at=s.memory.create_time.ToDatetime(tzinfo=UTC),
        updated_at=s.memory.update_time.ToDatetime(tzinfo=UTC),
    )


def _search_item(s: _Stored, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=s.namespace,
        key=s.key,
        value=s.value,
        created_at=s.memory.create_time.ToDatetime(tzinfo=UTC),
        updated_at=s.memory.update_time.ToDatetime(tzinfo=UTC),
        score=score,
    )
