"""What an import may write: each record of an export through the rules the normal write
path applies (ids, sizes, JSON, the encoding), and its token counts made here, never taken
from the file. Pure.

A file is the client's: an edited record whose part was hashed again passes the manifest,
so the manifest proves nothing about its values. A record that AddMessages, CreateMemories
or UpdateSessionData would refuse is refused by part and record, before the part is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from episodic.domain.context import Summary
from episodic.domain.log import countable_text
from episodic.domain.memories import Memory
from episodic.domain.memory_rules import MAX_SESSION_DATA_BYTES, MemoryDraft, check_draft
from episodic.domain.model import Episode, Message, NewMessage, ToolCallRecord
from episodic.domain.transfer import ImportedRecord
from episodic.domain.validation import (
    Limits,
    Violations,
    check_id,
    check_json,
    check_new_message,
    check_text,
    check_time,
)

# An exported memory may have expired since: the sweep removes it, the import need not refuse it.
_NO_FUTURE_NEEDED = datetime.min.replace(tzinfo=UTC)


def check_imported(records: Sequence[ImportedRecord], limits: Limits, encodings: frozenset[str]) -> None:
    """Refused at the first record that breaks a rule: one status stays small however many
    records of the file are wrong."""
    for record in records:
        v = Violations()
        _check_record(v, record, limits, encodings)
        v.raise_if_any()


def _check_record(v: Violations, record: ImportedRecord, limits: Limits, encodings: frozenset[str]) -> None:
    where, value = record.where, record.value
    if isinstance(value, Episode):
        _check_episode(v, where, value, limits, encodings)
    elif isinstance(value, Message):
        check_new_message(v, where, _as_new(value), limits)
    elif isinstance(value, ToolCallRecord):
        _check_tool_call(v, where, value, limits)
    elif isinstance(value, Summary):
        check_text(v, f"{where}.content", value.content, limits.max_content_bytes)
    elif record.kind == "session_data":
        session_limits = dataclasses.replace(limits, max_json_bytes=MAX_SESSION_DATA_BYTES)
        check_json(v, f"{where}.data", record.row["data"], session_limits)


def _check_episode(v: Violations, where: str, e: Episode, limits: Limits, encodings: frozenset[str]) -> None:
    check_id(v, f"{where}.episode_id", e.episode_id)
    check_id(v, f"{where}.agent_id", e.agent_id)
    check_json(v, f"{where}.metadata", e.metadata, limits)
    check_text(v, f"{where}.close_note", e.close_note or "", limits.max_text_field_bytes)
    if e.token_encoding not in encodings:
        v.add(f"{where}.token_encoding", f"must be one of {', '.join(sorted(encodings))}")


def _as_new(m: Message) -> NewMessage:
    return NewMessage(
        m.role, m.content, m.client_message_id, m.created_at, m.metadata, m.tool_calls, m.tool_result
    )


def _check_tool_call(v: Violations, where: str, r: ToolCallRecord, limits: Limits) -> None:
    check_id(v, f"{where}.tool_call_id", r.tool_call_id)
    check_id(v, f"{where}.tool_name", r.tool_name)
    check_json(v, f"{where}.input", r.input, limits)
    if r.result is not None:
        check_json(v, f"{where}.output", r.result.output, limits)
        check_text(v, f"{where}.error", r.result.error, limits.max_text_field_bytes)


def check_imported_memories(part: str, memories: Sequence[Memory]) -> None:
    """CreateMemories' rules, and an id: an imported memory keeps the one it was exported with."""
    for line, m in enumerate(memories, start=1):
        where, v = f"{part} record {line}", Violations()
        check_id(v, f"{where}.memory_id", m.memory_id)
        check_id(v, f"{where}.agent_id", m.agent_id)
        check_id(v, f"{where}.superseded_by", m.superseded_by, required=False)
        check_id(v, f"{where}.episode_id", m.episode_id, required=False)
        draft = MemoryDraft(
            m.text, m.kind, m.memory_id, m.topics, m.entities, m.event_time, None, 0, 0, m.metadata
        )
        check_draft(v, where, draft, _NO_FUTURE_NEEDED)
        check_time(v, f"{where}.expires_at", m.expires_at)
        v.raise_if_any()


def recount(records: Sequence[ImportedRecord], count: Callable[[str, str], int]) -> None:
    """Every token count of an episode made again with its encoding, as AddMessages would
    count: the messages, their sum on the episode, the summaries. `records` hold the rows
    the store writes, changed in place."""
    episode: dict[str, Any] | None = None
    encoding, total = "", 0
    for record in records:
        value, row = record.value, record.row
        if isinstance(value, Episode):
            episode, encoding = row, value.token_encoding
        elif isinstance(value, Message):
            row["token_count"], row["token_encoding"] = count(countable_text(value), encoding), encoding
            total += row["token_count"]
        elif isinstance(value, Summary):
            row["token_count"], row["token_encoding"] = count(value.content, encoding), encoding
    if episode is not None:
        episode["token_count"] = total
