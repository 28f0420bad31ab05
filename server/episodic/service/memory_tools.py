"""The memory tools a client's model can call (OpenAI function-calling shape), and running
one call: a gateway in any language hands `TOOLS` to its model and forwards each call it
makes to CallMemoryTool with the episode it is working in."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from episodic.domain.access import require_visible
from episodic.domain.json_text import nested_deeper_than
from episodic.domain.memories import MemoryKind, Placement
from episodic.domain.memory_rules import CreateRequest, MemoryDraft
from episodic.domain.model import Caller, JsonObject, JsonValue
from episodic.domain.ports.episodes import EpisodeStore
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import SearchMode
from episodic.domain.validation import Limits, Violations, check_json, check_time
from episodic.errors import InvalidArgument
from episodic.service.memories import MemoryService
from episodic.service.memory_search import MemoryQuery, MemorySearch

_KINDS = [k.value for k in MemoryKind]
ADD_MEMORY: JsonObject = {
    "type": "function",
    "function": {
        "name": "add_memory",
        "description": (
            "Remember one durable statement about the user for future conversations: a fact, a "
            "preference, or an event with its date. One statement per call; do not store "
            "greetings, questions or anything the user asked you not to keep."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The statement, in the third person."},
                "kind": {"type": "string", "enum": _KINDS},
                "topics": {"type": "array", "items": {"type": "string"}},
                "entities": {"type": "array", "items": {"type": "string"}},
                "event_time": {"type": "string", "description": "EVENT: ISO 8601 date or time."},
                "long_term": {
                    "type": "boolean",
                    "description": "true: store now; false (default): keep with this conversation "
                    "and store when it ends.",
                },
            },
            "required": ["text", "kind"],
        },
    },
}
SEARCH_MEMORY: JsonObject = {
    "type": "function",
    "function": {
        "name": "search_memory",
        "description": "Search what you remember about the user (facts, preferences, events).",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
                "kinds": {"type": "array", "items": {"type": "string", "enum": _KINDS}},
            },
            "required": ["query"],
        },
    },
}
TOOLS = {"add_memory": ADD_MEMORY, "search_memory": SEARCH_MEMORY}  # by the function name the model calls
MAX_ARGUMENT_DEPTH = 64  # the tools' arguments are flat; this only keeps hostile nesting out
_ARGUMENT_LIMITS = Limits(max_json_depth=MAX_ARGUMENT_DEPTH, max_json_bytes=4 * 1024 * 1024)
MAX_TOP_K = 20
DEFAULT_TOP_K = 5


@dataclass(kw_only=True)
class MemoryTools:
    memories: MemoryService
    search: MemorySearch
    episodes: EpisodeStore

    async def call(self, caller: Caller, episode_id: str, name: str, arguments: str) -> str:
        args = _arguments(arguments)
        if name == "add_memory":
            return json.dumps(await self._add(caller, episode_id, args), ensure_ascii=False)
        if name == "search_memory":
            return json.dumps(await self._search(caller, episode_id, args), ensure_ascii=False)
        raise InvalidArgument.of("name", f"unknown tool {name!r}; the tools are add_memory and search_memory")

    async def _add(self, caller: Caller, episode_id: str, args: JsonObject) -> JsonObject:
        draft = MemoryDraft(
            text=_text(args, "text"),
            kind=_kind(args.get("kind")),
            topics=_strings(args, "topics"),
            entities=_strings(args, "entities"),
            event_time=_time(args.get("event_time")),
        )
        placement = Placement.EAGER if _flag(args, "long_term") else Placement.LAZY
        (made,) = await self.memories.create(
            caller, CreateRequest([draft], episode_id=episode_id, placement=placement)
        )
        return {
            "memory_id": made.memory.memory_id,
            "outcome": made.outcome.value,
            "state": made.memory.state.value,
        }

    async def _search(self, caller: Caller, episode_id: str, args: JsonObject) -> JsonObject:
        episode = await self.episodes.get_episode(caller.tenant_id, episode_id)
        require_visible(caller, episode.agent_id, "episode", episode_id)
        top_k = _count(args, "top_k", DEFAULT_TOP_K, MAX_TOP_K)
        kinds = frozenset(k for k in (_kind(x) for x in _strings(args, "kinds")) if k is not None)
        query = MemoryQuery(
            episode.agent_id, episode.user_id, SearchMode.HYBRID, _text(args, "query"),
            top_k, None, MemoryFilter(kinds=kinds, episode_id=episode_id),
        )  # fmt: skip
        hits = await self.search.search(caller, query)
        return {
            "memories": [
                {"text": h.memory.text, "kind": h.memory.kind.value, "score": round(h.score, 4)} for h in hits
            ]
        }


def _arguments(text: str) -> JsonObject:
    if nested_deeper_than(text, MAX_ARGUMENT_DEPTH):
        raise InvalidArgument.of("arguments", f"is nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    try:
        value = json.loads(text or "{}")
    except ValueError:
        raise InvalidArgument.of(
            "arguments", "is not JSON (the tool call's arguments as the model wrote them)"
        ) from None
    if not isinstance(value, dict):
        raise InvalidArgument.of("arguments", "must be a JSON object")
    v = Violations()  # NaN, lone surrogates (JSON escapes allow both), NUL, anywhere inside
    for key, item in value.items():
        check_json(v, f"arguments.{key}", [key, item], _ARGUMENT_LIMITS)
    v.raise_if_any()
    return value


def _count(args: JsonObject, key: str, default: int, high: int) -> int:
    """A JSON integer literal in [1, high] (not 5.0, not true: as strict as the MCP tools'
    arguments); absent: the default."""
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidArgument.of(f"arguments.{key}", f"must be an integer between 1 and {high}")
    return value


def _flag(args: JsonObject, key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument.of(f"arguments.{key}", "must be true or false")
    return value


def _text(args: JsonObject, key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise InvalidArgument.of(f"arguments.{key}", "is required (a string)")
    return value


def _strings(args: JsonObject, key: str) -> tuple[str, ...]:
    value: JsonValue = args.get(key) or []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise InvalidArgument.of(f"arguments.{key}", "must be a list of strings")
    return tuple(str(x) for x in value)


def _kind(value: JsonValue) -> MemoryKind | None:
    try:
        return MemoryKind(str(value).lower())
    except ValueError:
        return None


def _time(value: JsonValue) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise InvalidArgument.of("arguments.event_time", "must be an ISO 8601 date or time") from None
    v = Violations()
    check_time(v, "arguments.event_time", parsed)
    v.raise_if_any()
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
