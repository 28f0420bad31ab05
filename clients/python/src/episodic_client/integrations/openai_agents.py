"""The OpenAI Agents SDK's `Session` over Episodic (`pip install "episodic-client[openai-agents]"`):
`Runner.run(agent, text, session=EpisodicSession(...))` keeps the conversation in Episodic's
durable log, and `EpisodicContextSession` gives the model Episodic's budgeted context instead
of the raw log (summary, tail, recalled past conversations, known facts).

What maps to what:
- a session is one episode of (agent, user) at a time (see "session ids" below); each
  Responses input item is one log message, so `pop_item` takes back exactly one item;
- a message item (`{"role": "user", "content": "..."}`, an output message with `output_text`
  or `refusal` parts) is a user / assistant / system message (role "developer" too is a
  system message) whose content is its text, its parts' texts joined;
- `function_call` is an assistant message with one tool call (`call_id`, `name`, the
  arguments as a JSON object when they are one); `function_call_output` is a tool message
  whose result answers that call (succeeded: the SDK's outputs carry no status), its output
  text as the content;
- the item itself rides along in the message's metadata (`openai_agents.item`, as JSON text,
  so every number, id and status comes back exactly; its one text field is taken from the
  log's content instead of being stored twice, `openai_agents.text_at` says where), so
  `get_items` returns the items `add_items` was given. Messages other clients wrote read as
  the items their role and tool calls say.

Session ids: the first episode's id is `session_id` (so it must be a valid Episodic id of at
most 120 characters, unique in the tenant), later ones are `session_id:2`, `:3`, ... The log
is append-only, so `clear_session` closes the episode and the session continues in the next
one. It waits for the episode's digest (at most the client's timeout, and 30 s on the server),
so the user's next session recalls it at once; `wait_for_digest=False` returns at the close
(recall finds the episode once the digest is made, a moment later). An episode the server closed (the agent's
idle timeout) ends the same way: the session's next write opens the next episode. A new
`EpisodicSession` of a session id finds its current episode (a few GetEpisode calls).

`pop_item` retracts the newest message not retracted (RetractMessage) and returns its item:
the message stays in the log (scrollback and audit show what was said), but no projection
uses it again (the context's tail, compaction, the digest and memories at close). The server
refuses (FailedPreconditionError) a message a compaction summary already covers. A retracted
call frees its call_id and a retracted output leaves its call unanswered, so a popped
function_call and its output can be added again (the SDK does when it undoes a rewind).

Refused with a ValueError naming what, never dropped: item types other than messages,
`function_call` and `function_call_output` (reasoning, hosted tool calls, computer and shell
calls, MCP items, item references, ...), content parts other than text (images, files, audio),
a message without text, and call ids or tool names that are not Episodic ids."""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit
from agents.run_context import RunContextWrapper
from google.protobuf import json_format

from episodic_client.aio_client import AsyncEpisodicClient
from episodic_client.chat import to_chat_messages
from episodic_client.context import BuiltContext
from episodic_client.errors import FailedPreconditionError, NotFoundError
from episodic_client.requests import message_input, tool_call, tool_result
from episodic_client.v1 import context_pb2, episode_pb2
from episodic_client.values import integral_numbers

Item = dict[str, Any]
Wrapper = RunContextWrapper[Any]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")  # the server's rule for ids
MAX_SESSION_ID = 120  # leaves room for the generation suffix (":2", ...) in 128 characters
METADATA_KEY = "openai_agents"
SESSION_LABEL = "openai_agents_session"  # the episode's metadata: which session it belongs to
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_SUPPORTED = "messages, function_call and function_call_output"
_PAGE = 1000  # the server's largest page of messages


class EpisodicSession:
    """The Agents SDK session `session_id` of (agent_id, user_id), kept in Episodic episodes;
    the agent must exist (`create_agent`). `session_settings.limit` (or `get_items(limit)`)
    reads the latest items only, as in the SDK's SQLiteSession. `wait_for_digest`:
    `clear_session` returns once the closed episode's digest is made (READY or FAILED; at most
    the client's timeout, 30 s on the server), so the user's next session recalls it; False
    returns at the close."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        client: AsyncEpisodicClient,
        agent_id: str,
        user_id: str,
        *,
        session_settings: SessionSettings | None = None,
        wait_for_digest: bool = True,
    ) -> None:
        if not _ID.fullmatch(session_id) or len(session_id) > MAX_SESSION_ID:
            raise ValueError(
                f"session_id {session_id!r} is not usable as an episode id: 1-{MAX_SESSION_ID} "
                "letters, digits and . _ : @ -, starting with a letter or digit"
            )
        self.session_id = session_id
        self.session_settings = session_settings
        self.wait_for_digest = wait_for_digest
        self._client = client
        self._agent_id = agent_id
        self._user_id = user_id
        self._generation = 0  # 0: not looked up yet
        self._opened = False  # the current generation is known to be open
        self._lock = asyncio.Lock()

    @property
    def episode_id(self) -> str:
        """The episode the session is in (before its first call: the first episode's id)."""
        return generation_id(self.session_id, max(self._generation, 1))

    # --- the Session protocol ---------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: Wrapper | None = None
    ) -> list[TResponseInputItem]:
        """The items of the current episode, oldest first; with a limit, the latest `limit`."""
        wanted = resolve_session_limit(limit, self.session_settings)
        return cast(list[TResponseInputItem], await self._log_items(wanted))

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: Wrapper | None = None) -> None:
        """Appends them in one call (all or none), after checking every one."""
        await self._append(items)

    async def pop_item(self, *, wrapper: Wrapper | None = None) -> TResponseInputItem | None:
        """Retracts the newest item and returns it; None when there is none (or the episode was
        closed meanwhile: its log is final, and the session goes on in a new, empty one)."""
        episode_id = await self._episode()
        newest = await self._newest(episode_id, 8, lambda _: True)
        if newest is None:
            return None
        items = to_items(newest)
        if len(items) != 1:
            raise ValueError(
                f"message {newest.seq} reads as {len(items)} items (another client wrote it): "
                "pop_item takes back one item at a time"
            )
        try:
            await self._client.retract_message(episode_id, newest.seq)
        except FailedPreconditionError as error:
            if error.reason != "EPISODE_CLOSED":
                raise
            await self._advance(episode_id)
            return None
        return cast(TResponseInputItem, items[0])

    async def clear_session(self, *, wrapper: Wrapper | None = None) -> None:
        """Closes the episode (the log keeps it, and recall finds it once digested: with
        `wait_for_digest`, this returns once it is); the session continues in the next
        episode, empty."""
        async with self._lock:
            if self._generation == 0:
                self._generation = await self._latest_generation()
            try:
                await self._client.close_episode(self.episode_id, wait_for_digest=self.wait_for_digest)
            except NotFoundError:
                return  # never opened: nothing to close, and no gap in the generations
            self._generation += 1
            self._opened = False

    # --- the episode of the session ------------------------------------------------------------

    async def _episode(self) -> str:
        """The current episode, opened (once per session object; opening is idempotent)."""
        async with self._lock:
            if not self._opened:
                if self._generation == 0:
                    self._generation = await self._latest_generation()
                await self._open_current()
                self._opened = True
            return self.episode_id

    async def _open_current(self) -> None:
        label = {SESSION_LABEL: self.session_id}
        while True:
            try:
                await self._client.open_episode(
                    self._agent_id, self._user_id, episode_id=self.episode_id, metadata=label
                )
                return
            except FailedPreconditionError as error:
                if error.reason != "EPISODE_CLOSED":
                    raise
                self._generation += 1

    async def _advance(self, closed_episode_id: str) -> None:
        """The session goes on in the next episode, unless another call moved it already."""
        async with self._lock:
            if self.episode_id == closed_episode_id:
                self._generation += 1
                self._opened = False

    async def _latest_generation(self) -> int:
        """The highest generation that exists (1 when none does). Generations are made in
        order, so they are found by doubling, then bisecting: a few GetEpisode calls."""
        if not await self._exists(1):
            return 1
        low, high = 1, 2
        while await self._exists(high):
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            if await self._exists(middle):
                low = middle
            else:
                high = middle
        return low

    async def _exists(self, generation: int) -> bool:
        episode_id = generation_id(self.session_id, generation)
        try:
            episode = (await self._client.get_episode(episode_id)).episode
        except NotFoundError:
            return False
        if (episode.agent_id, episode.user_id) != (self._agent_id, self._user_id):
            raise ValueError(
                f"episode {episode_id!r} belongs to another agent or user: "
                f"session_id {self.session_id!r} is taken in this tenant"
            )
        return True

    # --- reading and writing the log --------------------------------------------------------

    async def _append(self, items: Sequence[TResponseInputItem]) -> list[episode_pb2.Message]:
        """Stores the items (all checked first); a closed episode moves the session on."""
        inputs = [to_message_input(i, item) for i, item in enumerate(items)]
        if not inputs:
            return []
        episode_id = await self._episode()
        try:
            return list((await self._client.add_messages(episode_id, inputs)).messages)
        except FailedPreconditionError as error:
            if error.reason != "EPISODE_CLOSED":
                raise
        await self._advance(episode_id)
        episode_id = await self._episode()
        return list((await self._client.add_messages(episode_id, inputs)).messages)

    async def _log_items(self, wanted: int | None) -> list[Item]:
        """The latest `wanted` items of the log (all for None or a negative limit, as
        SQLiteSession reads them), oldest first, retracted messages left out."""
        if wanted == 0:
            return []
        count = None if wanted is None or wanted < 0 else wanted
        episode_id = await self._episode()
        newest_first: list[Item] = []

        def collect(message: episode_pb2.Message) -> bool:
            newest_first.extend(reversed(to_items(message)))
            return count is not None and len(newest_first) >= count

        page = _PAGE if count is None else min(count + 8, _PAGE)  # a few retracted ones too
        await self._newest(episode_id, page, collect)
        kept = newest_first[:count] if count is not None else newest_first
        kept.reverse()
        return kept

    async def _newest(
        self, episode_id: str, page_size: int, stop: Callable[[episode_pb2.Message], bool]
    ) -> episode_pb2.Message | None:
        """Pages the log newest first, retracted messages skipped, until `stop` says so;
        returns that message (None when the log ran out first)."""
        token = ""
        while True:
            page = await self._client.list_messages(episode_id, page_size=page_size, page_token=token)
            for message in page.messages:
                if not message.HasField("retract_time") and stop(message):
                    return message
            if not page.next_page_token or page.next_page_token == token:
                return None
            token = page.next_page_token


@dataclass(frozen=True, slots=True)
class _ContextCall:
    """A BuildContext render waiting for the model's reply to be logged."""

    model_call_id: str
    episode_id: str
    input_tokens: int  # the run's usage when the context was built
    output_tokens: int


class EpisodicContextSession(EpisodicSession):
    """An `EpisodicSession` whose `get_items()` is the server's budgeted context of the next
    model call (BuildContext: the agent's system prompt, known facts, recalled past
    conversations, the summary of compacted history and the recent tail) as Responses items,
    so long sessions stay under the agent's budget and earlier sessions are remembered.

    Each render is stored as a model call; the first reply `add_items` brings after it (an
    assistant message or function call) is attached to it with RecordModelReply, with the
    tokens the run's usage grew by meanwhile. The SDK asks for the history before it adds the
    turn's input, so recall searches with the newest user message of the log (in a new
    session: the latest conversations); set `recall_query` before a run to search with the
    new input instead (used once). `get_items(limit)` with a limit (or session_settings.limit)
    reads the raw log, as EpisodicSession does: the SDK compares those with what it added."""

    def __init__(
        self,
        session_id: str,
        client: AsyncEpisodicClient,
        agent_id: str,
        user_id: str,
        *,
        session_settings: SessionSettings | None = None,
        wait_for_digest: bool = True,
    ) -> None:
        super().__init__(
            session_id,
            client,
            agent_id,
            user_id,
            session_settings=session_settings,
            wait_for_digest=wait_for_digest,
        )
        self.recall_query = ""
        self.last_context: BuiltContext | None = None  # the latest render, as the server sent it
        self._waiting: _ContextCall | None = None

    async def get_items(
        self, limit: int | None = None, *, wrapper: Wrapper | None = None
    ) -> list[TResponseInputItem]:
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None:
            return cast(list[TResponseInputItem], await self._log_items(wanted))
        episode_id = await self._episode()
        query = self.recall_query or await self._newest_user_text(episode_id)
        self.recall_query = ""
        built = await self._client.build_context(episode_id, recall_query=query)
        self.last_context = built
        usage = wrapper.usage if wrapper is not None else None
        self._waiting = _ContextCall(
            built.report.model_call_id,
            episode_id,
            usage.input_tokens if usage is not None else 0,
            usage.output_tokens if usage is not None else 0,
        )
        return cast(list[TResponseInputItem], context_items(built.messages))

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: Wrapper | None = None) -> None:
        stored = await self._append(items)
        replies = [m for item, m in zip(items, stored, strict=True) if _is_reply(item)]
        if replies and self._waiting is not None:
            waiting, self._waiting = self._waiting, None
            await self._record_reply(waiting, replies[0], wrapper)

    async def _record_reply(
        self, call: _ContextCall, reply: episode_pb2.Message, wrapper: Wrapper | None
    ) -> None:
        """The reply's seq only when it landed in the render's episode (not after a close)."""
        usage = wrapper.usage if wrapper is not None else None
        await self._client.record_model_reply(
            call.model_call_id,
            input_tokens=max(usage.input_tokens - call.input_tokens, 0) if usage is not None else 0,
            output_tokens=max(usage.output_tokens - call.output_tokens, 0) if usage is not None else 0,
            assistant_message_seq=reply.seq if reply.episode_id == call.episode_id else 0,
        )

    async def _newest_user_text(self, episode_id: str) -> str:
        found = await self._newest(episode_id, 20, lambda m: m.role == episode_pb2.ROLE_USER)
        return found.content if found is not None else ""


def generation_id(session_id: str, generation: int) -> str:
    """The id of a session's `generation`-th episode: session_id, then session_id:2, ..."""
    return session_id if generation == 1 else f"{session_id}:{generation}"


# --- items -> messages ----------------------------------------------------------------------


def to_message_input(index: int, item: object) -> episode_pb2.MessageInput:
    """One Responses input item as a message to append; `index` names it in errors."""
    if not isinstance(item, Mapping):
        raise ValueError(
            f"item {index}: a {type(item).__name__} is not a Responses input item (a dict; "
            "an SDK model converts with .model_dump(exclude_unset=True))"
        )
    try:
        return _message_input(index, item)
    except UnicodeEncodeError:  # protobuf strings are UTF-8
        raise ValueError(
            f"item {index}: contains a lone surrogate (U+D800-U+DFFF), which is not valid Unicode text"
        ) from None


def _message_input(index: int, item: Mapping[str, Any]) -> episode_pb2.MessageInput:
    kind = item.get("type")
    if kind is None and "role" not in item:
        raise ValueError(f"item {index}: an item without a type or role is not supported ({_SUPPORTED})")
    if kind in (None, "message"):
        return _message(index, item)
    if kind == "function_call":
        return _function_call(index, item)
    if kind == "function_call_output":
        return _function_call_output(index, item)
    raise ValueError(f"item {index}: items of type {kind!r} are not supported ({_SUPPORTED})")


def _message(index: int, item: Mapping[str, Any]) -> episode_pb2.MessageInput:
    role = item.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise ValueError(
            f"item {index}: a message of role {role!r} is not supported (user, assistant, system, developer)"
        )
    text, text_at = _text(index, item, "content")
    if not text:
        raise ValueError(f"item {index}: a message without text cannot be stored (a log message has text)")
    return message_input(_ROLES[role], text, metadata=_metadata(index, item, text_at))


def _function_call(index: int, item: Mapping[str, Any]) -> episode_pb2.MessageInput:
    call_id, name, arguments = _id(index, item, "call_id"), _id(index, item, "name"), item.get("arguments")
    if not isinstance(arguments, str):
        raise ValueError(f"item {index}: function_call arguments must be a JSON string")
    try:
        call = tool_call(call_id, name, _json_object(arguments))
    except (OverflowError, ValueError, TypeError):  # a number no double holds: the item keeps it
        call = tool_call(call_id, name)
    return message_input("assistant", tool_calls=[call], metadata=_metadata(index, item, ""))


def _function_call_output(index: int, item: Mapping[str, Any]) -> episode_pb2.MessageInput:
    call_id = _id(index, item, "call_id")
    text, text_at = _text(index, item, "output")
    return message_input(
        "tool", text, tool_result=tool_result(call_id), metadata=_metadata(index, item, text_at)
    )


def _id(index: int, item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ValueError(
            f"item {index}: {item.get('type')} {key} {value!r} is not an Episodic id "
            "(1-128 letters, digits and . _ : @ -, starting with a letter or digit)"
        )
    return value


def _text(index: int, item: Mapping[str, Any], key: str) -> tuple[str, str]:
    """The item's text under `key` (a string, or text parts joined) and the JSON pointer of
    that text when it is one string ("" when the parts are several)."""
    value = item.get(key)
    if isinstance(value, str):
        return value, f"/{key}"
    if not isinstance(value, list):
        raise ValueError(f"item {index}: {key} must be text or a list of parts, not {type(value).__name__}")
    texts: list[str] = []
    pointer = ""
    for j, part in enumerate(value):
        kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
        field = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
        if field is None or not isinstance(part.get(field), str):
            raise ValueError(
                f"item {index}: a content part of type {kind!r} is not supported "
                "(text parts only: input_text, output_text, refusal)"
            )
        texts.append(part[field])
        pointer = f"/{key}/{j}/{field}"
    return "".join(texts), pointer if len(texts) == 1 else ""


def _metadata(index: int, item: Mapping[str, Any], text_at: str) -> dict[str, Any]:
    """The item as JSON text, its text (at `text_at`) left to the log's content."""
    skeleton = copy.deepcopy(dict(item))
    if text_at:
        _put(skeleton, text_at, None)
    try:
        text = json.dumps(skeleton, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"item {index}: not JSON ({error})") from None
    return {METADATA_KEY: {"item": text, "text_at": text_at}}


def _json_object(text: str) -> dict[str, Any] | None:
    """The arguments as a JSON object, when they are one (NaN and the like are not JSON)."""
    try:
        value = json.loads(text, parse_constant=_not_json)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _is_reply(item: TResponseInputItem) -> bool:
    """What the model answered with: an assistant message or a function call."""
    raw = cast(Mapping[str, Any], item)
    return raw.get("type") == "function_call" or (
        raw.get("type") in (None, "message") and raw.get("role") == "assistant"
    )


# --- messages -> items ----------------------------------------------------------------------


def to_items(message: episode_pb2.Message) -> list[Item]:
    """A logged message as the item it was added as, or (written by another client, or its
    stored item unreadable) as the items its role, content and tool calls say."""
    stored = _stored_item(message)
    return [stored] if stored is not None else _log_items_of(message)


def _stored_item(message: episode_pb2.Message) -> Item | None:
    if METADATA_KEY not in message.metadata.fields:
        return None
    saved = json_format.MessageToDict(message.metadata).get(METADATA_KEY)
    if not isinstance(saved, dict) or not isinstance(saved.get("item"), str):
        return None
    try:
        item = json.loads(saved["item"])
        if not isinstance(item, dict):
            return None
        text_at = saved.get("text_at")
        if isinstance(text_at, str) and text_at:
            _put(item, text_at, message.content)
    except (ValueError, LookupError, TypeError):  # e.g. reshaped by PII redaction
        return None
    return item


def _put(item: Item, pointer: str, value: str | None) -> None:
    """Sets the value at a JSON pointer of ours ("/content", "/output/0/text", ...)."""
    *path, last = pointer.split("/")[1:]
    target: Any = item
    for step in path:
        target = target[int(step)] if isinstance(target, list) else target[step]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


def _log_items_of(message: episode_pb2.Message) -> list[Item]:
    if message.role == episode_pb2.ROLE_USER:
        return [{"role": "user", "content": message.content}]
    if message.role == episode_pb2.ROLE_TOOL:
        call_id = message.tool_result.tool_call_id
        return [{"type": "function_call_output", "call_id": call_id, "output": message.content}]
    if message.role == episode_pb2.ROLE_ASSISTANT:
        said: list[Item] = [{"role": "assistant", "content": message.content}] if message.content else []
        return said + [
            _function_call_item(c.tool_call_id, c.tool_name, _arguments(c)) for c in message.tool_calls
        ]
    return [{"role": "system", "content": message.content}]  # system, and the log's context messages


def _function_call_item(call_id: str, name: str, arguments: Any) -> Item:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": text}


def _arguments(call: episode_pb2.ToolCall) -> Any:
    return integral_numbers(json_format.MessageToDict(call.input)) if call.HasField("input") else {}


# --- the rendered context -> items ----------------------------------------------------------


def context_items(messages: Sequence[context_pb2.ContextMessage]) -> list[Item]:
    """BuildContext's messages as Responses input items: system and context sections as
    system messages where they were rendered, the tail's turns, tool calls and results. A
    result whose call is not rendered (parallel calls cut by the start of the tail) is left
    out, as the SDK leaves it out of limited history: the Responses API refuses it."""
    items: list[Item] = []
    for chat in to_chat_messages(messages, "openai").messages:
        items.extend(_responses_items(chat))
    calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
    return [i for i in items if i.get("type") != "function_call_output" or i["call_id"] in calls]


def _responses_items(chat: Mapping[str, Any]) -> list[Item]:
    role = chat["role"]
    if role == "tool":
        return [{"type": "function_call_output", "call_id": chat["tool_call_id"], "output": chat["content"]}]
    if role != "assistant":  # an empty system prompt (none set) tells the model nothing
        return [{"role": role, "content": chat["content"]}] if chat["content"] else []
    said: list[Item] = [{"role": "assistant", "content": chat["content"]}] if chat.get("content") else []
    calls = [
        _function_call_item(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in chat.get("tool_calls", [])
    ]
    return said + calls
