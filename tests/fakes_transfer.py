"""A user's export and import in memory: the `UserTransfer` port over tests/fakes.py's
`Tables`, as SqlTransfer (store/transfer.py) keeps it.

An export is the user's rows as SQL would read them back: each held object is made a row
of its table by the store's own `*_values` functions (JSON columns through JSON, as a JSON
column stores them), then a record by store/transfer.py's `record_of`; episodes by
(started_at, episode_id), soft-deleted ones left out, each followed by its messages (by
seq), tool-call records (by call seq, id), summaries (by span end), digest, session data and
model calls (by made, id); then the memories (by made, id). It is read whole before the
first record is handed out: the snapshot SQL's export reads in one transaction.

`episode_rows` and `memories` are SqlTransfer's own: they check records with the schema's
column types and the domain's readers and touch no database, so a SqlTransfer without one
does them here (`_CHECKS`), and the fake holds the same records to the same rules.

An import writes what SQL writes (the checked rows, read back as SQL's readers read them),
all or nothing: an episode held already is SQL's `_same` (nothing to do, or ALREADY_EXISTS);
a model call the tenant holds is FAILED_PRECONDITION before anything is written; an erasure
of the watch's user (of every agent, or of the episode's) it does not know is ABORTED, as
store/erasure.py's `refuse_if_erased`. Cannot honour: an episode of an agent the tenant does
not have is written here, an IntegrityError (the agents' foreign key) in SQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import JSON, RowMapping

from episodic.domain.changes import Declared, Recorded
from episodic.domain.digests import pending_digest
from episodic.domain.memories import Memory, SessionData
from episodic.domain.model import Episode, EpisodeState
from episodic.domain.transfer import EpisodeImported, EpisodeRows, ErasureWatch
from episodic.errors import Aborted, FailedPrecondition
from episodic.store.context_rows import (
    model_call_from_row,
    model_call_values,
    summary_from_row,
    summary_values,
)
from episodic.store.database import Database
from episodic.store.memories import memory_values
from episodic.store.rows import (
    digest_values,
    episode_from_row,
    episode_values,
    message_from_row,
    message_values,
    tool_call_from_row,
    tool_call_values,
)
from episodic.store.transfer import TABLES, SqlTransfer, _same, record_of
from episodic.store.writer import GroupCommitWriter
from tests.fakes import EpisodeKey, Tables, recorded

# SqlTransfer's checks of an import's records, which need neither its database nor its writer.
_CHECKS = SqlTransfer(cast(Database, None), cast(GroupCommitWriter, None))

Record = tuple[str, dict[str, object]]


class FakeUserTransfer:
    """The `UserTransfer` port over the tables (see the module docstring)."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    # --- export ----------------------------------------------------------------------------

    async def export(
        self, tenant_id: str, user_id: str, agent_ids: Sequence[str] | None
    ) -> AsyncIterator[tuple[str, dict[str, object]]]:
        for item in self._snapshot(tenant_id, user_id, None if agent_ids is None else set(agent_ids)):
            yield item

    def _snapshot(self, tenant_id: str, user_id: str, agents: set[str] | None) -> list[Record]:
        t = self._t
        episodes = sorted(
            (
                e
                for key, e in t.episodes.items()
                if key[0] == tenant_id
                and e.user_id == user_id
                and key not in t.deleted_at
                and (agents is None or e.agent_id in agents)
            ),
            key=lambda e: (e.started_at, e.episode_id),
        )
        found: list[Record] = []
        for episode in episodes:
            found += self._episode_records(episode)
        memories = sorted(
            (
                s.memory
                for (tenant, _), s in t.memories.items()
                if tenant == tenant_id
                and s.memory.user_id == user_id
                and (agents is None or s.memory.agent_id in agents)
            ),
            key=lambda m: (m.created_at, m.memory_id),
        )
        return found + [_record("memory", memory_values(m)) for m in memories]

    def _episode_records(self, episode: Episode) -> list[Record]:
        t, key = self._t, (episode.tenant_id, episode.episode_id)
        tenant_id, episode_id = key
        found = [_record("episode", episode_values(episode))]
        for m in t.messages.get(key, []):
            row = message_values(tenant_id, m, t.fingerprints[(*key, m.seq)])
            found.append(_record("message", {**row, "retracted_at": m.retracted_at}))
        calls = sorted(t.tool_calls.get(key, {}).values(), key=lambda r: (r.call_seq, r.tool_call_id))
        found += [_record("tool_call", tool_call_values(tenant_id, episode_id, r)) for r in calls]
        summaries = sorted(t.summaries.get(key, []), key=lambda s: s.to_seq)
        found += [_record("summary", summary_values(s)) for s in summaries]
        digest = t.digests.get(key)
        if digest is not None:
            found.append(_record("digest", digest_values(digest)))
        data = t.session_data.get(key)
        if data is not None:
            found.append(_record("session_data", _session_values(data)))
        model_calls = sorted(
            (c for c in t.model_calls.values() if (c.tenant_id, c.episode_id) == key),
            key=lambda c: (c.created_at, c.model_call_id),
        )
        found += [_record("model_call", model_call_values(c)) for c in model_calls]
        return found

    async def erasures_of(self, tenant_id: str, user_hash: str) -> frozenset[str]:
        return frozenset(
            audit.erasure_id
            for tenant, audit, _ in self._t.erasures
            if (tenant, audit.user_hash) == (tenant_id, user_hash)
        )

    # --- import ----------------------------------------------------------------------------

    def episode_rows(self, part: str, records: Sequence[Mapping[str, object]], user_id: str) -> EpisodeRows:
        return _CHECKS.episode_rows(part, records, user_id)

    def memories(
        self, part: str, records: Sequence[Mapping[str, object]], tenant_id: str, user_id: str
    ) -> list[Memory]:
        return _CHECKS.memories(part, records, tenant_id, user_id)

    async def missing_agents(self, tenant_id: str, agent_ids: Iterable[str]) -> list[str]:
        return [a for a in sorted(set(agent_ids)) if (tenant_id, a) not in self._t.agents]

    async def import_episode(
        self,
        tenant_id: str,
        rows: EpisodeRows,
        now: datetime,
        watch: ErasureWatch,
        declared: Declared[EpisodeImported],
    ) -> Recorded[EpisodeImported]:
        self._refuse_if_erased(tenant_id, watch, rows.agent_id)
        episode = episode_from_row(_row(tenant_id, rows.episode))
        key = (tenant_id, rows.episode_id)
        held = self._t.episodes.get(key)  # soft-deleted ones too, as SQL's select
        if held is not None:
            return recorded(EpisodeImported(_same(held, episode), created=False), declared)
        calls = [model_call_from_row(_row(tenant_id, r)) for r in rows.of("model_call")]
        for call in calls:
            other = self._t.model_calls.get((tenant_id, call.model_call_id))
            if other is not None:
                raise FailedPrecondition(
                    f"model call {call.model_call_id!r} already exists in this tenant (episode "
                    f"{other.episode_id!r})",
                    reason="MODEL_CALL_EXISTS",
                )
        self._write(key, episode, rows)
        for call in calls:
            self._t.model_calls[(tenant_id, call.model_call_id)] = call
        closed = episode.state is EpisodeState.CLOSED
        if closed:  # the server makes the digest again
            self._t.digests[key] = pending_digest(episode, now)
        imported = EpisodeImported(episode, True, len(rows.of("message")), len(calls), closed)
        return recorded(imported, declared)

    def _refuse_if_erased(self, tenant_id: str, watch: ErasureWatch, agent_id: str) -> None:
        for tenant, audit, _ in self._t.erasures:
            if (
                tenant == tenant_id
                and audit.user_hash == watch.user_hash
                and audit.agent_id in ("", agent_id)
                and audit.erasure_id not in watch.known
            ):
                raise Aborted(
                    "the user was erased while this write was in flight: nothing of it is written",
                    reason="USER_ERASED",
                )

    def _write(self, key: EpisodeKey, episode: Episode, rows: EpisodeRows) -> None:
        t, tenant_id = self._t, key[0]
        t.episodes[key] = episode
        t.messages[key] = []
        for row in rows.of("message"):
            t.messages[key].append(message_from_row(_row(tenant_id, row)))
            t.fingerprints[(*key, row["seq"])] = row["fingerprint"]
        t.tool_calls[key] = {
            r["tool_call_id"]: tool_call_from_row(_row(tenant_id, r)) for r in rows.of("tool_call")
        }
        summaries = [summary_from_row(_row(tenant_id, r)) for r in rows.of("summary")]
        if summaries:
            t.summaries[key] = summaries
        for row in rows.of("session_data"):
            data, version, at, expires = row["data"], row["version"], row["updated_at"], row["expires_at"]
            t.session_data[key] = SessionData(tenant_id, episode.episode_id, data, version, at, expires)


def _record(kind: str, values: Mapping[str, Any]) -> Record:
    """The row as SQL reads it back (JSON columns as JSON keeps them), as an export record."""
    row = dict(values)
    for column in TABLES[kind].columns:
        if isinstance(column.type, JSON) and row.get(column.name) is not None:
            row[column.name] = json.loads(json.dumps(row[column.name]))
    return kind, record_of(kind, row)


def _session_values(d: SessionData) -> dict[str, Any]:
    """As store/session_data.py writes the row (the stored data always has its time)."""
    return {
        "tenant_id": d.tenant_id,
        "episode_id": d.episode_id,
        "data": dict(d.data),
        "version": d.version,
        "updated_at": d.updated_at,
        "expires_at": d.expires_at,
    }


def _row(tenant_id: str, row: Mapping[str, Any]) -> RowMapping:
    """An imported row as SQL's readers read it back: with the importer's tenant."""
    return cast(RowMapping, {"tenant_id": tenant_id, **row})
