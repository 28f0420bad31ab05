"""ExportUser and ImportUser: everything held about one user, out as an export and back in.

Export streams the user's records part by part (one per episode, then the memories), hashing
each part as it goes; the manifest comes last. It reads one snapshot, so writes during the
export are not in it; an erasure of the user during the export ends it ABORTED before the
manifest is sent, so no complete export exists of data erased meanwhile (the CLI discards
what it received).

Import checks the manifest (format, version, part order), then each part whole against its
count and sha256 and each record by the normal write path's rules (domain/transfer_rules.py:
token counts are made here) before writing any of it; an episode's part is written in one transaction
through the change owner. Memories are embedded by this server; closed episodes get a
pending digest the digester makes again. Held episodes and memories are left as they are,
so running an import again (after a crash) completes it and changes nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from episodic.domain.access import require_agent
from episodic.domain.changes import ScopeChanged
from episodic.domain.erasure import user_hash
from episodic.domain.model import Caller
from episodic.domain.ports.changes import ChangeOwner
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.digests import DigestWaiter
from episodic.domain.ports.models import TokenCounter
from episodic.domain.ports.shares import ImportMeter, ImportQuota
from episodic.domain.ports.users import UserTransfer
from episodic.domain.recall import Scope
from episodic.domain.shares import Unmetered
from episodic.domain.transfer import (
    MEMORIES_PART,
    ErasureWatch,
    ImportTally,
    IncomingPart,
    Manifest,
    Part,
    PartHasher,
    check_manifest,
    check_part,
    decode,
    encode,
    episode_part,
)
from episodic.domain.transfer_rules import check_imported, check_imported_memories, recount
from episodic.domain.validation import Limits, Violations, check_id
from episodic.errors import Aborted, FailedPrecondition, InvalidArgument
from episodic.service.memories import MemoryService

CHUNK_BYTES = 1024 * 1024  # records per response: well under gRPC's message size


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records of one part; the last chunk of an export carries only the manifest."""

    part: str
    records: list[str] = field(default_factory=list)
    manifest: Manifest | None = None


@dataclass(kw_only=True)
class TransferService:
    transfer: UserTransfer
    memories: MemoryService
    changes: ChangeOwner
    digests: DigestWaiter
    clock: Clock
    tokens: TokenCounter  # imported token counts are made here, as AddMessages makes them
    limits: Limits
    quota: ImportQuota = field(default_factory=Unmetered)  # each import's bytes: metered

    # --- export ------------------------------------------------------------------------

    async def export_user(self, caller: Caller, user_id: str, agent_id: str = "") -> AsyncIterator[Chunk]:
        v = Violations()
        check_id(v, "user_id", user_id)
        check_id(v, "agent_id", agent_id, required=False)
        v.raise_if_any()
        if agent_id:
            require_agent(caller, agent_id)
        agents = [agent_id] if agent_id else (sorted(caller.agents) if caller.agents is not None else None)
        tenant, since = caller.tenant_id, self.clock()
        hashed = user_hash(tenant, user_id)
        # before the snapshot: an erasure not among these commits after it was taken
        watch = ErasureWatch(hashed, await self.transfer.erasures_of(tenant, hashed))
        parts: list[Part] = []
        current: PartHasher | None = None
        batch: list[str] = []
        size, episodes = 0, 0
        async for kind, record in self.transfer.export(tenant, user_id, agents):
            starts = kind == "episode" or (
                kind == "memory" and (current is None or current.name != MEMORIES_PART)
            )
            if starts:
                if batch:
                    yield await self._checked(Chunk(current.name if current else "", batch), tenant, watch)
                    batch, size = [], 0
                if current is not None:
                    parts.append(current.part())
                episodes += kind == "episode"
                current = PartHasher(episode_part(episodes) if kind == "episode" else MEMORIES_PART)
            assert current is not None
            line = encode(record)
            current.add(line)
            batch.append(line)
            size += len(line)
            if size >= CHUNK_BYTES:
                yield await self._checked(Chunk(current.name, batch), tenant, watch)
                batch, size = [], 0
        if batch:
            assert current is not None
            yield await self._checked(Chunk(current.name, batch), tenant, watch)
        if current is None or current.name != MEMORIES_PART:
            if current is not None:
                parts.append(current.part())
            current = PartHasher(MEMORIES_PART)  # always present, maybe empty
        parts.append(current.part())
        manifest = Manifest(user_id, agent_id, since, tuple(parts))
        yield await self._checked(Chunk("", manifest=manifest), tenant, watch)

    async def _checked(self, chunk: Chunk, tenant_id: str, watch: ErasureWatch) -> Chunk:
        """Nothing leaves after the user's erasure committed: the snapshot would still hold
        what the erasure removed. Known by the erasure's id, not its time: one stamped before
        the export began may commit after its snapshot."""
        if await self.transfer.erasures_of(tenant_id, watch.user_hash) - watch.known:
            raise Aborted(
                "the user was erased while the export ran: discard what was received", reason="USER_ERASED"
            )
        return chunk

    # --- import ------------------------------------------------------------------------

    async def import_user(
        self, caller: Caller, manifest: Manifest, user_id: str, chunks: AsyncIterator[Chunk]
    ) -> ImportTally:
        """`chunks`: the parts' records in the manifest's order, each part in one or more
        chunks. A part is checked whole, then written; what came before a refused part stays
        imported (running the import again skips it)."""
        check_manifest(manifest)
        user = user_id or manifest.user_id
        v = Violations()
        check_id(v, "user_id" if user_id else "manifest.user_id", user)
        v.raise_if_any()
        hashed = user_hash(caller.tenant_id, user)
        watch = ErasureWatch(hashed, await self.transfer.erasures_of(caller.tenant_id, hashed))
        tally = ImportTally()
        async with self.quota.importing(caller.tenant_id) as meter:
            await self._import_parts(caller, list(manifest.parts), user, watch, tally, chunks, meter)
        if tally.digests_pending:
            self.digests.wake()
        return tally

    async def _import_parts(
        self,
        caller: Caller,
        expected: list[Part],
        user: str,
        watch: ErasureWatch,
        tally: ImportTally,
        chunks: AsyncIterator[Chunk],
        meter: ImportMeter,
    ) -> None:
        """Each chunk's bytes are the tenant's import share's (its rate, and what its imports
        hold at once) until its part is written."""
        part: IncomingPart | None = None  # the part being read
        async for chunk in chunks:
            if part is None or chunk.part != part.name:
                if part is not None:
                    await self._write_part(caller, part, user, watch, tally)
                    meter.written()
                if not expected or chunk.part != expected[0].name:
                    wanted = expected[0].name if expected else "nothing more"
                    raise InvalidArgument.of(
                        "part", f"got part {chunk.part!r} where the manifest has {wanted}"
                    )
                part = IncomingPart(expected.pop(0))
            await meter.received(sum(len(text) + 1 for text in chunk.records))
            for text in chunk.records:
                part.add(text)
        if part is not None:
            await self._write_part(caller, part, user, watch, tally)
            meter.written()
        while expected and expected[0].records == 0:  # an empty part may be sent as nothing
            check_part(expected[0], PartHasher(expected.pop(0).name).part())
        if expected:
            raise InvalidArgument.of(
                "records", f"the import ended before part {expected[0].name}: the export is truncated"
            )

    async def _write_part(
        self, caller: Caller, part: IncomingPart, user: str, watch: ErasureWatch, tally: ImportTally
    ) -> None:
        expected = part.expected
        records = [decode(expected.name, i, text) for i, text in enumerate(part.checked(), start=1)]
        part.lines = []  # the records are held as rows from here on, not twice
        if expected.name == MEMORIES_PART:
            memories = self.transfer.memories(expected.name, records, caller.tenant_id, user)
            check_imported_memories(expected.name, memories)
            await self._require_agents(caller, {m.agent_id for m in memories})
            imported, unchanged = await self.memories.restore(caller.tenant_id, memories, watch)
            tally.memories_imported += imported
            tally.memories_unchanged += unchanged
            return
        rows = self.transfer.episode_rows(expected.name, records, user)
        check_imported(rows.records, self.limits, self.tokens.supported_encodings())
        await asyncio.to_thread(recount, rows.records, self.tokens.count)  # up to a part's size of text
        await self._require_agents(caller, {rows.agent_id})
        tenant, now = caller.tenant_id, self.clock()
        scope = Scope(tenant, rows.agent_id, user)
        committed = await self.changes.commit(
            lambda declared: self.transfer.import_episode(tenant, rows, now, watch, declared),
            lambda done: [ScopeChanged(scope)] if done.digest_pending else [],
            exclusive=False,  # touches no index: the digest is made later
        )
        done = committed.result
        tally.episodes_imported += done.created
        tally.episodes_unchanged += not done.created
        tally.messages_imported += done.messages
        tally.model_calls_imported += done.model_calls
        tally.digests_pending += done.digest_pending

    async def _require_agents(self, caller: Caller, agent_ids: set[str]) -> None:
        for agent_id in sorted(agent_ids):
            require_agent(caller, agent_id)
        missing = await self.transfer.missing_agents(caller.tenant_id, agent_ids)
        if missing:
            raise FailedPrecondition(
                f"agent {missing[0]!r} does not exist in this tenant: create it before importing",
                reason="AGENT_NOT_FOUND",
            )
