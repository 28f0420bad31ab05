"""Google ADK's session and memory services over Episodic (`pip install "episodic-client[adk]"`):
`EpisodicSessionService` is a `google.adk.sessions.BaseSessionService` and
`EpisodicMemoryService` a `google.adk.memory.BaseMemoryService`, so an ADK `Runner` keeps its
conversations in Episodic's durable log and recalls what past sessions taught it.

What maps to what:
- an ADK app is an Episodic **agent** (`app_name` is its agent id: create it first, with its
  budgets and memory settings), an ADK user a **user**, a session an **episode**: the
  session id is the episode id (client-chosen ids are 1-128 characters of letters, digits
  and . _ : @ -; any other raises a ValueError naming it). Episode ids are unique in the
  tenant, not per (app, user) as ADK's are: a session id another user holds is taken. A key
  restricted to some agents gets another id than it named (docs/api.md): use the returned
  session's id.
- an event is one or more messages: user text a user message, model text an assistant
  message whose `function_call` parts are its tool calls (id, name, JSON arguments), each
  `function_response` part a tool message whose result answers its call. The first message's
  metadata keeps the rest of the event as JSON (id, author, invocation id, branch, actions,
  timestamp, thoughts, ...), so `get_session` rebuilds the event as it was appended; the
  event id is its `client_message_id`, so a retried append adds nothing. An event without
  text, calls or responses (a state change, a transfer) is a context message holding it.
- session state is the episode's session data (`"adk.state"`), written with the etag the
  session was read with: a session another writer changed since raises ADK's
  `StaleSessionError`. `temp:` state is never stored (the base class trims it).
- `app:` and `user:` state need storage wider than an episode, which Episodic does not have:
  they live in the session data of **holder episodes** of a second agent,
  `state_agent_id(app_name)` (`<app>.adk-state`), created on first write with a 30-day idle
  timeout, no retention limit, no recall and no memory extraction, so holders never show up
  in the app's recall or listings. User state is an episode of the real user there (so
  `erase_user` without an agent erases it), app state one of the user `adk.app-state`. A
  holder the server closes after 30 idle days is rolled over: the next one starts with its
  data.
- `delete_session` cannot delete from an append-only log: it records the session as deleted
  in its user's holder and closes its episode; `get_session`, `list_sessions` and
  `search_memory` no longer see it. Closing digests it, so `BuildContext` may still recall it;
  `erase_user` erases for real.
- `EpisodicMemoryService.add_session_to_memory` closes the session's episode: the server
  digests it and extracts long-term memories; the session then takes no more events
  (`SessionClosedError`). A session kept elsewhere, and `add_events_to_memory`, are copied into
  a new episode that is closed at once. `add_memory` writes memories directly;
  `search_memory` returns the user's memories and past episodes best first.

Limits: parts are text (thoughts too), function calls and function responses; any other
(inline or file data, code execution, multimodal tool output) raises a ValueError naming the
event, the part and the field, before anything is written. What the server refuses (a text
over its content limit, an event's JSON over 64 KiB) raises a ValueError naming the event;
the session-state write (which carries the etag check) comes first, so a refused event's
session-state delta may be stored without it.
JSON numbers are doubles: integers beyond 2**53 lose precision; an integral float reads
back as an int. Session state, and each holder's, is at most 64 KiB of JSON. A second
response to one call (a long-running tool's update) is kept in the metadata, not as a second
tool result. The key needs both agents, the app's and its state agent."""

from __future__ import annotations

import asyncio
import hashlib
import re
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, TypeVar

import grpc
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError as SessionExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from google.genai import types
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from pydantic_core import PydanticSerializationError, to_jsonable_python

from episodic_client.aio_client import AsyncEpisodicClient
from episodic_client.errors import (
    AlreadyExistsError,
    EpisodicClientError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from episodic_client.memory_requests import memory_input
from episodic_client.requests import message_input, tool_call, tool_result
from episodic_client.v1 import agent_pb2, episode_pb2, episode_service_pb2, memory_pb2, memory_service_pb2
from episodic_client.values import integral_numbers

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")  # the server's rule for ids
_ID_RULE = "1-128 characters of letters, digits and . _ : @ -, starting with a letter or digit"

KIND = "adk_kind"  # episode metadata: what the episode is to this adapter
_SESSION, _MEMORY, _USER_STATE, _APP_STATE = "session", "memory", "user_state", "app_state"
_GENERATION = "adk_generation"  # holder episodes: 0, 1, ... as the server closes them
APP_STATE_USER = "adk.app-state"  # the state agent's user whose holder keeps app: state

_EVENT = "adk_event"  # message metadata: the event as JSON, its carried payloads taken out
_EVENT_ID = "adk_event_id"  # the metadata of an event's later messages
_CARRIED = "adk_carried"  # in a part's JSON: "text", "call" or "response" lives in a message field
_LENGTH = "adk_length"  # a carried text's length, to split the message's content again
_NO_ARGS = "adk_no_args"  # a carried call whose args were None (not {})

_STATE = "adk.state"  # session data: {key: [value]} (a list, so a merge patch replaces it)
_DELETED = "adk.deleted"  # a user holder's session data: {session_id: true}
_LAST_EVENT = "adk.last_event"  # written by every append, so every append changes the etag

_SUPPORTED_PART_FIELDS = frozenset(
    {"text", "thought", "thought_signature", "function_call", "function_response"}
)
_PAYLOADS = ("text", "function_call", "function_response")
_SPOKEN = (episode_pb2.ROLE_USER, episode_pb2.ROLE_ASSISTANT)
_OPEN = episode_pb2.Episode.STATE_OPEN
_T = TypeVar("_T")
_STALE = "The session has been modified in storage since it was loaded. Please reload it."

# The state agent only keeps holder episodes: no recall, no extraction, kept forever, and the
# longest idle timeout the server takes (holders have no messages to keep them active).
_STATE_AGENT_CONFIG = agent_pb2.MemoryConfig(
    recall_mode=agent_pb2.RECALL_MODE_NONE,
    retention_days=0,
    extract_memories=False,
    known_facts=False,
    knowledge=False,
)
_STATE_AGENT_CONFIG.idle_timeout.FromTimedelta(timedelta(days=30))


class SessionClosedError(RuntimeError):
    """The session's episode is closed (added to memory, deleted, or closed by the server
    after its agent's idle timeout): its log is final, so it takes no more events."""


def state_agent_id(app_name: str) -> str:
    """The agent whose holder episodes keep `app_name`'s `app:` and `user:` state."""
    candidate = f"{app_name}.adk-state"
    return candidate if len(candidate) <= 128 else f"adk-state.{_digest(app_name)}"


# --- the session service -----------------------------------------------------------------


class EpisodicSessionService(BaseSessionService):
    """ADK sessions as Episodic episodes (see the module doc); `client` must belong to the
    event loop the runner uses."""

    def __init__(self, client: AsyncEpisodicClient) -> None:
        self._client = client
        self._scoped = _ScopedState(client)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        _require_ids(app_name, user_id, session_id)
        app_state, user_state, session_state = _split_state(state or {})
        patch = {_STATE: _wrapped(session_state, "state")}  # all checked before anything is written
        scoped_patches = _wrapped(app_state, "app: state"), _wrapped(user_state, "user: state")
        episode = await self._open(app_name, user_id, session_id)
        try:
            data = (await self._client.update_session_data(episode.episode_id, patch)).session_data
        except InvalidArgumentError as error:
            raise ValueError(
                f"session {episode.episode_id!r}: its state cannot be stored: {error.message}"
            ) from error
        await self._scoped.update(app_name, user_id, *scoped_patches)
        scoped = await self._scoped.read(app_name, user_id)
        return _session(episode, scoped, data, [])

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        _require_ids(app_name, user_id, session_id)
        episode = await _own_episode(self._client, app_name, user_id, session_id)
        if episode is None:
            return None
        scoped, data, events = await asyncio.gather(
            self._scoped.read(app_name, user_id),
            self._client.get_session_data(session_id),
            _read_events(self._client, session_id, app_name, config),
        )
        if session_id in scoped.deleted:
            return None
        return _session(episode, scoped, data.session_data, events)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """Sessions without events, least recently active first (as ADK's own services)."""
        _require_id("app_name", app_name)
        if user_id is not None:
            _require_id("user_id", user_id)
        episodes = [
            episode
            async for episode in self._client.iter_episodes(agent_id=app_name, user_id=user_id or "")
            if _kind(episode) != _MEMORY
        ]
        users = sorted({episode.user_id for episode in episodes})
        states = await _bounded([self._scoped.read(app_name, u) for u in users])
        scoped = dict(zip(users, states, strict=True))
        kept = [e for e in episodes if e.episode_id not in scoped[e.user_id].deleted]
        data = await _bounded([self._client.get_session_data(e.episode_id) for e in kept])
        sessions = [
            _session(e, scoped[e.user_id], d.session_data, []) for e, d in zip(kept, data, strict=True)
        ]
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Hides the session (a tombstone in its user's holder) and closes its episode; the
        log itself stays (append-only). A session that does not exist is a no-op."""
        _require_ids(app_name, user_id, session_id)
        episode = await _own_episode(self._client, app_name, user_id, session_id)
        if episode is None:
            return
        await self._scoped.patch(app_name, user_id, _USER_STATE, {_DELETED: {session_id: True}})
        if episode.state == _OPEN:
            await self._client.close_episode(session_id, note="deleted through ADK's delete_session")

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        _require_ids(app_name, user_id, None)
        return dict((await self._scoped.read(app_name, user_id)).user)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Stores the event as messages and its state delta (session state with the etag the
        session was read with), then applies it to `session` as the base class does."""
        if event.partial:
            return event
        async with self._locked(session.id):
            if any(e == event for e in session.events if e.id == event.id):
                return event  # delivered again: stored and applied already
            _check_event(event)  # what cannot be stored raises before anything changes
            app_delta, user_delta, session_delta = _split_state(event.actions.state_delta)
            where = f"event {event.id!r}"
            patch = {_STATE: _wrapped(session_delta, where), _LAST_EVENT: event.id}
            scoped_patches = _wrapped(app_delta, where), _wrapped(user_delta, where)
            self._apply_temp_state(session, event)
            event = self._trim_temp_delta_state(event)
            messages = event_messages(event, _Known.of(session.events))
            await self._update_session_data(session, event, patch)
            await self._add_messages(session, event, messages)
            await self._scoped.update(session.app_name, session.user_id, *scoped_patches)
            return await super().append_event(session, event)  # temp state is trimmed already

    async def _open(self, app_name: str, user_id: str, session_id: str | None) -> episode_pb2.Episode:
        try:
            opened = await self._client.open_episode(
                app_name, user_id, episode_id=session_id or "", metadata={KIND: _SESSION}
            )
        except NotFoundError as error:
            raise ValueError(f"app {app_name!r} has no Episodic agent: create the agent first") from error
        except (AlreadyExistsError, FailedPreconditionError) as error:
            raise SessionExistsError(f"Session with id {session_id} already exists.") from error
        if not opened.created:
            raise SessionExistsError(f"Session with id {session_id} already exists.")
        return opened.episode

    async def _update_session_data(self, session: Session, event: Event, patch: dict[str, Any]) -> None:
        """Writes the event's session state with the etag `session` was read with (none for a
        session not read from here): another writer's change since is ADK's stale session."""
        etag = session._storage_update_marker or ""
        try:
            reply = await self._client.update_session_data(session.id, patch, etag=etag)
        except EpisodicClientError as error:
            if error.code == grpc.StatusCode.ABORTED:
                raise StaleSessionError(_STALE) from error
            _raise_append_error(session, event, error)
        session._storage_update_marker = reply.session_data.etag

    async def _add_messages(
        self, session: Session, event: Event, messages: Sequence[episode_pb2.MessageInput]
    ) -> None:
        try:
            await self._client.add_messages(session.id, messages)
        except EpisodicClientError as error:
            _raise_append_error(session, event, error)

    @asynccontextmanager
    async def _locked(self, session_id: str) -> AsyncIterator[None]:
        """One append at a time per session in this process (parallel agents share a
        session): each needs the etag the previous one left."""
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        async with lock:
            yield


def _raise_append_error(session: Session, event: Event, error: EpisodicClientError) -> NoReturn:
    """Raises what an append's failed call means to ADK (others as they are)."""
    if isinstance(error, NotFoundError):
        raise SessionNotFoundError(f"Session {session.id} not found.") from error
    if isinstance(error, FailedPreconditionError) and error.reason == "EPISODE_CLOSED":
        raise SessionClosedError(f"session {session.id!r} is closed: it takes no more events") from error
    if isinstance(error, InvalidArgumentError | AlreadyExistsError | FailedPreconditionError):
        raise _refused(event, error) from error
    raise error


def _refused(event: Event, error: EpisodicClientError) -> ValueError:
    details = "; ".join(f"{name} {why}" for name, why in error.field_violations) or error.message
    return ValueError(f"event {event.id!r} (author {event.author!r}) cannot be stored in Episodic: {details}")


async def _own_episode(
    client: AsyncEpisodicClient, app_name: str, user_id: str, session_id: str
) -> episode_pb2.Episode | None:
    """The session's episode, or None when there is none of this app and user."""
    try:
        episode = (await client.get_episode(session_id)).episode
    except NotFoundError:
        return None
    if episode.agent_id != app_name or episode.user_id != user_id or _kind(episode) == _MEMORY:
        return None
    return episode


def _session(
    episode: episode_pb2.Episode,
    scoped: _Scoped,
    data: memory_pb2.SessionData,
    events: list[Event],
) -> Session:
    state = _unwrapped(_struct_dict(data.data))
    state.update({State.APP_PREFIX + key: value for key, value in scoped.app.items()})
    state.update({State.USER_PREFIX + key: value for key, value in scoped.user.items()})
    session = Session(
        id=episode.episode_id,
        app_name=episode.agent_id,
        user_id=episode.user_id,
        state=state,
        events=events,
        last_update_time=_seconds(episode.last_activity_time),
    )
    session._storage_update_marker = data.etag
    return session


def _require_ids(app_name: str, user_id: str, session_id: str | None) -> None:
    _require_id("app_name", app_name)
    _require_id("user_id", user_id)
    if session_id is not None:
        _require_id("session id", session_id)


def _require_id(what: str, value: str) -> None:
    if not _ID.fullmatch(value):
        raise ValueError(f"{what} {value!r} cannot be an Episodic id: it must be {_ID_RULE}")


# --- events -> messages ------------------------------------------------------------------


@dataclass
class _Known:
    """The tool calls a log holds as tool-call records, and those answered: a function
    response becomes a tool result only when it answers one of them, once (the server refuses
    a result without its call, or a second one); any other is kept whole in the metadata."""

    calls: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, events: Iterable[Event]) -> _Known:
        known = cls()
        for event in events:
            _carried_kinds(event, known)
        return known


def event_messages(event: Event, known: _Known | None = None) -> list[episode_pb2.MessageInput]:
    """The messages that keep `event`, after checking it (what cannot be stored raises a
    ValueError naming it). `known`: the calls of the log it goes to (updated)."""
    _check_event(event)
    kinds = _carried_kinds(event, known if known is not None else _Known())
    dumped = _dump(event)
    content = dumped.get("content") or {}
    texts: list[str] = []
    calls: list[episode_pb2.ToolCall] = []
    results: list[episode_pb2.MessageInput] = []
    for skeleton, kind in zip(content.get("parts") or [], kinds, strict=True):
        if kind == "text":
            texts.append(_take_text(skeleton))
        elif kind == "call":
            calls.append(_take_call(skeleton))
        elif kind == "response":
            results.append(_take_response(skeleton))
    text = "".join(texts)
    head = [message_input(_main_role(event), text, tool_calls=calls)] if text or calls else []
    return _labelled(event, dumped, head + results or [_marker(event)])


def _check_event(event: Event) -> None:
    if not event.id:
        raise ValueError("an event without an id cannot be stored (its id is its message's id)")
    for index, part in enumerate(_parts(event)):
        where = f"event {event.id!r}, part {index}"
        unsupported = [
            name
            for name in types.Part.model_fields
            if name not in _SUPPORTED_PART_FIELDS and getattr(part, name) is not None
        ]
        if unsupported:
            raise ValueError(
                f"{where}: {', '.join(unsupported)} cannot be stored in Episodic "
                "(text, thoughts, function calls and function responses only)"
            )
        payloads = [name for name in _PAYLOADS if getattr(part, name) is not None]
        if len(payloads) > 1:
            raise ValueError(f"{where}: a part holding both {' and '.join(payloads)} is not supported")
        if part.function_response is not None and part.function_response.parts:
            raise ValueError(f"{where}: function_response.parts (multimodal tool output) cannot be stored")


def _carried_kinds(event: Event, known: _Known) -> list[str | None]:
    """Per part: the message field that carries its payload ("text", "call", "response"),
    or None when the metadata keeps it whole. Updates `known`."""
    role = _main_role(event)
    return [_carried(part, role, known) for part in _parts(event)]


def _carried(part: types.Part, role: str, known: _Known) -> str | None:
    call, answer = part.function_call, part.function_response
    if call is not None:
        if role != "assistant" or not _is_id(call.id) or not _is_id(call.name) or call.id in known.calls:
            return None
        known.calls.add(str(call.id))
        return "call"
    if answer is not None:
        if (
            answer.id not in known.calls
            or answer.id in known.answered
            or not isinstance(answer.response, dict)
        ):
            return None
        known.answered.add(str(answer.id))
        return "response"
    return "text" if part.text is not None and not part.thought else None


def _is_id(value: str | None) -> bool:
    return value is not None and _ID.fullmatch(value) is not None


def _main_role(event: Event) -> str:
    role = event.content.role if event.content is not None else None
    if role in ("user", "model"):
        return "user" if role == "user" else "assistant"
    return "user" if event.author == "user" else "assistant"


def _parts(event: Event) -> list[types.Part]:
    return list(event.content.parts or []) if event.content is not None else []


def _dump(event: Event) -> dict[str, Any]:
    try:
        return event.model_dump(mode="json", exclude_none=True)
    except PydanticSerializationError as error:
        raise ValueError(f"event {event.id!r} cannot be stored: it is not JSON ({error})") from error


def _take_text(skeleton: dict[str, Any]) -> str:
    """Moves a carried part's payload out of its JSON (the metadata keeps the rest)."""
    text = str(skeleton.pop("text"))
    skeleton.update({_CARRIED: "text", _LENGTH: len(text)})
    return text


def _take_call(skeleton: dict[str, Any]) -> episode_pb2.ToolCall:
    call = skeleton["function_call"]
    args = call.pop("args", None)
    skeleton[_CARRIED] = "call"
    if args is None:
        skeleton[_NO_ARGS] = True
    return tool_call(call["id"], call["name"], args)


def _take_response(skeleton: dict[str, Any]) -> episode_pb2.MessageInput:
    answer = skeleton["function_response"]
    response: dict[str, Any] = answer.pop("response")
    skeleton[_CARRIED] = "response"
    error = response.get("error")  # ADK tools report failures as {"error": ...}
    result = tool_result(
        answer["id"], response, succeeded=error is None, error=error if isinstance(error, str) else ""
    )
    return message_input("tool", tool_result=result)


def _marker(event: Event) -> episode_pb2.MessageInput:
    """An event with nothing to say (a state change, a transfer) still needs a message."""
    return message_input(
        "context", f"(ADK event by {event.author or 'unknown'}: kept in this message's metadata)"
    )


def _labelled(
    event: Event, dumped: dict[str, Any], messages: list[episode_pb2.MessageInput]
) -> list[episode_pb2.MessageInput]:
    """Ids (the event's, then `<id>.1`, ...), the event's time, and the event's JSON on the first."""
    base = event.id if _ID.fullmatch(event.id) and len(event.id) <= 120 else f"adk-{_digest(event.id)}"
    try:
        when = datetime.fromtimestamp(event.timestamp, UTC)
    except (OverflowError, OSError, ValueError) as error:
        raise ValueError(f"event {event.id!r}: timestamp {event.timestamp!r} is out of range") from error
    for index, message in enumerate(messages):
        message.client_message_id = base if index == 0 else f"{base}.{index}"
        message.create_time.FromDatetime(when)
        message.metadata.update({_EVENT: dumped} if index == 0 else {_EVENT_ID: event.id})
    return messages


# --- messages -> events ------------------------------------------------------------------


async def _read_events(
    client: AsyncEpisodicClient, episode_id: str, app_name: str, config: GetSessionConfig | None
) -> list[Event]:
    """The session's events, oldest first. The log is read newest first and only as far as
    `num_recent_events` and `after_timestamp` need (as InMemorySessionService filters)."""
    limit = config.num_recent_events if config else None
    after = config.after_timestamp if config else None
    if limit == 0:
        return []
    groups: list[list[episode_pb2.Message]] = []
    names: dict[str, str] = {}
    tails: list[episode_pb2.Message] = []
    async for message in client.iter_messages(episode_id, page_size=100):
        names.update({c.tool_call_id: c.tool_name for c in message.tool_calls})
        for group in _grouped(message, tails):
            if after is not None and _group_time(group) < after:
                return _rebuilt(groups, app_name, names)
            groups.append(group)
            if limit is not None and len(groups) >= limit:
                return _rebuilt(groups, app_name, names)
    return _rebuilt(groups, app_name, names)


def _rebuilt(groups: list[list[episode_pb2.Message]], app_name: str, names: dict[str, str]) -> list[Event]:
    return [_event(group, app_name, names) for group in reversed(groups)]


def _grouped(
    message: episode_pb2.Message, tails: list[episode_pb2.Message]
) -> list[list[episode_pb2.Message]]:
    """Walking the log newest first: an event's later messages wait in `tails` for its first;
    a message not written by this adapter is an event of its own."""
    keys = message.metadata.fields
    if _EVENT_ID in keys:
        tails.append(message)
        return []
    # Later messages whose first is missing cannot be an event: each reads as plain.
    groups = [[message, *reversed(tails)]] if _EVENT in keys else [[t] for t in tails] + [[message]]
    tails.clear()
    return groups


def _group_time(group: list[episode_pb2.Message]) -> float:
    head = group[0]
    if _EVENT in head.metadata.fields:
        stamp = head.metadata.fields[_EVENT].struct_value.fields.get("timestamp")
        if stamp is not None:
            return stamp.number_value
    return _seconds(head.create_time)


def _event(group: list[episode_pb2.Message], app_name: str, names: dict[str, str]) -> Event:
    head = group[0]
    if _EVENT not in head.metadata.fields:
        return _plain_event(head, app_name, names)
    dumped = _struct_dict(head.metadata)[_EVENT]
    content = dumped.get("content")
    if isinstance(content, dict) and isinstance(content.get("parts"), list):
        main = head if head.role in _SPOKEN else None
        lengths = [p.get(_LENGTH, 0) for p in content["parts"] if p.get(_CARRIED) == "text"]
        texts = iter(_split_text(main.content if main else "", lengths))
        calls = iter(main.tool_calls if main else [])
        results = iter(m for m in group if m.role == episode_pb2.ROLE_TOOL)
        content["parts"] = [_filled(part, texts, calls, results) for part in content["parts"]]
    return Event.model_validate(dumped)


def _split_text(content: str, lengths: list[int]) -> list[str]:
    """The parts' texts again; if the server changed the text (PII redaction), the first
    text part holds all of it."""
    if sum(lengths) != len(content):
        return [content] + [""] * (len(lengths) - 1)
    out, start = [], 0
    for length in lengths:
        out.append(content[start : start + length])
        start += length
    return out


def _filled(
    part: dict[str, Any],
    texts: Iterator[str],
    calls: Iterator[episode_pb2.ToolCall],
    results: Iterator[episode_pb2.Message],
) -> dict[str, Any]:
    """A part's JSON with its carried payload put back from the message fields."""
    kind = part.pop(_CARRIED, None)
    part.pop(_LENGTH, None)
    if kind == "text":
        part["text"] = next(texts, "")
    elif kind == "call":
        call = next(calls, None)
        if not part.pop(_NO_ARGS, False):
            part["function_call"]["args"] = _struct_dict(call.input) if call is not None else {}
    elif kind == "response":
        message = next(results, None)
        output = _json(message.tool_result.output) if message is not None else {}
        part["function_response"]["response"] = output if isinstance(output, dict) else {"result": output}
    return part


def _plain_event(message: episode_pb2.Message, app_name: str, names: dict[str, str]) -> Event:
    """A message written by other means (another client, BuildContext) as an ADK event."""
    parts = [types.Part(text=message.content)] if message.content else []
    author, role = app_name, "model"
    if message.role == episode_pb2.ROLE_USER:
        author, role = "user", "user"
    elif message.role == episode_pb2.ROLE_TOOL:
        role, parts = "user", [types.Part(function_response=_plain_response(message, names))]
    elif message.role != episode_pb2.ROLE_ASSISTANT:  # system and context: another voice
        author, role = "episodic", "user"
    parts += [
        types.Part(
            function_call=types.FunctionCall(id=c.tool_call_id, name=c.tool_name, args=_struct_dict(c.input))
        )
        for c in message.tool_calls
    ]
    return Event(
        id=message.client_message_id or f"seq-{message.seq}",
        invocation_id="",
        author=author,
        content=types.Content(role=role, parts=parts),
        timestamp=_seconds(message.create_time),
    )


def _plain_response(message: episode_pb2.Message, names: dict[str, str]) -> types.FunctionResponse:
    result = message.tool_result
    output = _json(result.output) if result.HasField("output") else message.content
    return types.FunctionResponse(
        id=result.tool_call_id,
        name=names.get(result.tool_call_id),
        response=output if isinstance(output, dict) else {"result": output},
    )


# --- state -------------------------------------------------------------------------------


def _split_state(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(app, user, session) deltas, prefixes removed from the first two; temp: is dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return app, user, session


def _wrapped(delta: Mapping[str, Any], where: str) -> dict[str, list[Any]]:
    """State values as session data: each in a one-item list, so that a merge patch (RFC
    7396) replaces it whole (an object would merge, None would delete the key)."""
    out: dict[str, list[Any]] = {}
    for key, value in delta.items():
        try:
            out[key] = [to_jsonable_python(value)]
        except PydanticSerializationError as error:
            raise ValueError(
                f"{where}: state key {key!r} holds a {type(value).__name__}, which is not JSON"
            ) from error
    return out


def _unwrapped(data: Mapping[str, Any]) -> dict[str, Any]:
    stored = data.get(_STATE)
    if not isinstance(stored, dict):
        return {}
    return {key: value[0] for key, value in stored.items() if isinstance(value, list) and len(value) == 1}


@dataclass(frozen=True)
class _Scoped:
    app: dict[str, Any]
    user: dict[str, Any]
    deleted: frozenset[str]


class _ScopedState:
    """`app:` and `user:` state and deleted sessions, in the session data of holder episodes
    of the app's state agent: newest first, the first of its kind is the holder; one the
    server closed is followed by a new one holding its data."""

    def __init__(self, client: AsyncEpisodicClient) -> None:
        self._client = client
        self._ready: set[str] = set()

    async def read(self, app_name: str, user_id: str) -> _Scoped:
        app_data, user_data = await asyncio.gather(
            self._data(app_name, APP_STATE_USER, _APP_STATE), self._data(app_name, user_id, _USER_STATE)
        )
        deleted = user_data.get(_DELETED)
        return _Scoped(
            _unwrapped(app_data),
            _unwrapped(user_data),
            frozenset(deleted if isinstance(deleted, dict) else ()),
        )

    async def update(
        self, app_name: str, user_id: str, app_state: Mapping[str, Any], user_state: Mapping[str, Any]
    ) -> None:
        """Merges `_wrapped` state into the app's and the user's holders."""
        if app_state:
            await self.patch(app_name, APP_STATE_USER, _APP_STATE, {_STATE: app_state})
        if user_state:
            await self.patch(app_name, user_id, _USER_STATE, {_STATE: user_state})

    async def patch(self, app_name: str, holder_user: str, kind: str, patch: Mapping[str, Any]) -> None:
        agent = await self._state_agent(app_name)
        for attempt in range(3):  # a holder closed meanwhile (or a racing rollover): look again
            try:
                holder = await self._current(agent, app_name, holder_user, kind)
                await self._client.update_session_data(holder, patch)
                return
            except FailedPreconditionError:
                if attempt == 2:
                    raise

    async def _data(self, app_name: str, holder_user: str, kind: str) -> dict[str, Any]:
        holder = await self._find(state_agent_id(app_name), holder_user, kind)
        if holder is None:
            return {}
        return _struct_dict((await self._client.get_session_data(holder.episode_id)).session_data.data)

    async def _find(self, agent_id: str, holder_user: str, kind: str) -> episode_pb2.Episode | None:
        async for episode in self._client.iter_episodes(agent_id=agent_id, user_id=holder_user):
            if _kind(episode) == kind:
                return episode
        return None

    async def _current(self, agent_id: str, app_name: str, holder_user: str, kind: str) -> str:
        """The open holder: found, or opened (holding the closed one's data)."""
        found = await self._find(agent_id, holder_user, kind)
        if found is not None and found.state == _OPEN:
            return found.episode_id
        generation = 0 if found is None else int(_metadata(found).get(_GENERATION, 0)) + 1
        name = f"adk.{kind.replace('_', '-')}.{_digest(app_name, holder_user)}.{generation}"
        opened = await self._client.open_episode(
            agent_id, holder_user, episode_id=name, metadata={KIND: kind, _GENERATION: generation}
        )
        holder = opened.episode.episode_id
        if found is not None and opened.created:
            previous = _struct_dict((await self._client.get_session_data(found.episode_id)).session_data.data)
            if previous:
                await self._client.update_session_data(holder, previous)
        return holder

    async def _state_agent(self, app_name: str) -> str:
        agent_id = state_agent_id(app_name)
        if agent_id not in self._ready:
            with suppress(AlreadyExistsError):
                await self._client.create_agent(
                    agent_id,
                    display_name=f"ADK app and user state of {app_name}",
                    memory_config=_STATE_AGENT_CONFIG,
                )
            self._ready.add(agent_id)
        return agent_id


# --- the memory service ------------------------------------------------------------------


class EpisodicMemoryService(BaseMemoryService):
    """ADK memory as Episodic's recall (see the module doc). `memories_top_k` and
    `episodes_top_k`: how many long-term memories and past episodes a search returns at most;
    `wait_for_digest`: adding a session waits until its digest is made (at most the client's
    timeout), so a search right after finds it."""

    def __init__(
        self,
        client: AsyncEpisodicClient,
        *,
        memories_top_k: int = 5,
        episodes_top_k: int = 3,
        wait_for_digest: bool = True,
    ) -> None:
        self._client = client
        self._scoped = _ScopedState(client)
        self._memories_top_k = memories_top_k
        self._episodes_top_k = episodes_top_k
        self._wait = wait_for_digest

    async def add_session_to_memory(self, session: Session) -> None:
        """Closes the session's episode (digested, its memories extracted); a session kept
        elsewhere is copied into a new episode first."""
        _require_ids(session.app_name, session.user_id, None)
        episode = await _own_episode(self._client, session.app_name, session.user_id, session.id)
        if episode is None:
            await self._ingest(session.app_name, session.user_id, session.id, session.events)
            return
        await self._client.close_episode(
            session.id, note="added to memory by ADK", wait_for_digest=self._wait
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """The events (a delta) as an episode of their own, closed at once; adding the same
        events again adds nothing. `custom_metadata` is not used."""
        _require_ids(app_name, user_id, None)
        await self._ingest(app_name, user_id, session_id or "", events)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Each entry as a long-term memory (eager: searchable at once). Its text is the
        entry's text parts; `custom_metadata["kind"]` ("fact", "preference", "event") its
        kind, fact by default; its id, author, timestamp and custom_metadata come back from
        `search_memory`. Duplicates merge into the memory they repeat."""
        _require_ids(app_name, user_id, None)
        inputs = [_memory_input(index, entry) for index, entry in enumerate(memories)]
        if not inputs:
            return
        try:
            await self._client.create_memories(inputs, agent_id=app_name, user_id=user_id)
        except InvalidArgumentError as error:
            details = "; ".join(f"{name} {why}" for name, why in error.field_violations) or error.message
            raise ValueError(f"memories cannot be stored in Episodic: {details}") from error

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The user's long-term memories and past episodes (their digests) that match the
        query, best first (newest first without a query); deleted sessions are left out."""
        _require_ids(app_name, user_id, None)
        query = query.strip()
        mode = "hybrid" if query else "recency"
        memories, episodes, scoped = await asyncio.gather(
            self._client.search_memories(app_name, user_id, query, mode=mode, top_k=self._memories_top_k),
            self._client.search_episodes(app_name, user_id, query, mode=mode, top_k=self._episodes_top_k),
            self._scoped.read(app_name, user_id),
        )
        ranked = [
            (hit.score, _seconds(hit.memory.create_time), _memory_entry(hit))
            for hit in memories.hits
            if hit.memory.source.episode_id not in scoped.deleted
        ]
        ranked += [
            (snippet.score, _seconds(snippet.end_time), _episode_entry(snippet))
            for snippet in episodes.snippets
            if snippet.episode_id not in scoped.deleted and (snippet.summary or snippet.key_facts)
        ]
        ranked.sort(key=lambda item: (-item[0], -item[1]))
        return SearchMemoryResponse(memories=[entry for _, _, entry in ranked])

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Deletes a long-term memory `search_memory` returned; a past episode (`episode:` ids)
        cannot be deleted one by one (`erase_user` erases a user). Unknown ids are a no-op."""
        if not memory_id:
            return
        if memory_id.startswith("episode:"):
            raise ValueError(f"{memory_id!r} is a past conversation: Episodic's log is append-only")
        try:
            memory = (await self._client.get_memory(memory_id)).memory
            if memory.agent_id == app_name and memory.user_id == user_id:
                await self._client.delete_memory(memory_id)
        except NotFoundError:
            return

    async def _ingest(self, app_name: str, user_id: str, session_id: str, events: Sequence[Event]) -> None:
        kept = [e for e in events if not e.partial and e.content is not None and e.content.parts]
        if not kept:
            return
        known = _Known()
        messages = [message for event in kept for message in event_messages(event, known)]
        name = f"adk.memory.{_digest(app_name, user_id, session_id, *(e.id for e in kept))}"
        try:
            opened = await self._client.open_episode(
                app_name, user_id, episode_id=name, metadata={KIND: _MEMORY, "adk_session_id": session_id}
            )
        except FailedPreconditionError:
            return  # added before: that episode is closed already
        except NotFoundError as error:
            raise ValueError(f"app {app_name!r} has no Episodic agent: create the agent first") from error
        episode_id = opened.episode.episode_id
        for start in range(0, len(messages), 500):  # AddMessages takes at most 500
            await self._client.add_messages(episode_id, messages[start : start + 500])
        await self._client.close_episode(
            episode_id, note="added to memory by ADK", wait_for_digest=self._wait
        )


def _memory_input(index: int, entry: MemoryEntry) -> memory_service_pb2.MemoryInput:
    texts = []
    for part in entry.content.parts or []:
        if part.text is None:
            names = [n for n in types.Part.model_fields if getattr(part, n) is not None]
            raise ValueError(
                f"memory {index}: a part with {', '.join(names) or 'nothing'} is not supported (text)"
            )
        texts.append(part.text)
    text = "".join(texts).strip()
    if not text:
        raise ValueError(f"memory {index}: it has no text")
    if entry.id is not None:
        _require_id(f"memory {index}: id", entry.id)
    custom = dict(entry.custom_metadata)
    kept = {"custom_metadata": custom, "author": entry.author, "timestamp": entry.timestamp}
    try:
        metadata = {"adk": to_jsonable_python({k: v for k, v in kept.items() if v})}
    except PydanticSerializationError as error:
        raise ValueError(f"memory {index}: its custom_metadata is not JSON ({error})") from error
    return memory_input(text, str(custom.get("kind", "fact")), memory_id=entry.id or "", metadata=metadata)


def _memory_entry(hit: memory_service_pb2.MemoryHit) -> MemoryEntry:
    memory = hit.memory
    kept = _struct_dict(memory.metadata).get("adk") or {}
    custom = dict(kept.get("custom_metadata") or {})
    custom.update({"episodic_source": "memory", "episodic_score": hit.score})
    return MemoryEntry(
        id=memory.memory_id,
        content=types.Content(role="user", parts=[types.Part(text=memory.text)]),
        author=kept.get("author"),
        timestamp=kept.get("timestamp") or _iso(memory.create_time),
        custom_metadata=custom,
    )


def _episode_entry(snippet: episode_service_pb2.EpisodeSnippet) -> MemoryEntry:
    facts = "; ".join(snippet.key_facts)
    text = " ".join(t for t in (snippet.summary, f"Key facts: {facts}." if facts else "") if t)
    return MemoryEntry(
        id=f"episode:{snippet.episode_id}",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        timestamp=_iso(snippet.end_time),
        custom_metadata={"episodic_source": "episode", "episodic_score": snippet.score},
    )


# --- helpers -----------------------------------------------------------------------------


async def _bounded(calls: Sequence[Coroutine[Any, Any, _T]], limit: int = 8) -> list[_T]:
    """The calls' results in order, at most `limit` in flight (the tenant's share of RPCs in
    flight is bounded too)."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Coroutine[Any, Any, _T]) -> _T:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(call) for call in calls)))


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def _kind(episode: episode_pb2.Episode) -> str:
    return str(_metadata(episode).get(KIND, ""))


def _metadata(episode: episode_pb2.Episode) -> dict[str, Any]:
    return _struct_dict(episode.metadata)


def _struct_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    value = integral_numbers(json_format.MessageToDict(struct))
    return value if isinstance(value, dict) else {}


def _json(value: struct_pb2.Value) -> Any:
    return integral_numbers(json_format.MessageToDict(value))


def _seconds(stamp: timestamp_pb2.Timestamp) -> float:
    return stamp.seconds + stamp.nanos / 1e9


def _iso(stamp: timestamp_pb2.Timestamp) -> str:
    return stamp.ToDatetime(tzinfo=UTC).isoformat()
