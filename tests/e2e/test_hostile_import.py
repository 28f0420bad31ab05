"""ImportUser trusts nothing in the file: an export whose records were edited and whose
parts were hashed again (so the manifest matches) is refused INVALID_ARGUMENT naming the
part and record when a value could not be stored or would break a later read, and nothing
of the refused episode is written. Each case imports under its own user."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import cast

import grpc
import pytest
from google.protobuf import struct_pb2

from episodic.v1 import episode_service_pb2, memory_pb2, memory_service_pb2
from tests.conftest import unique
from tests.e2e.context_helpers import build, create_agent
from tests.e2e.helpers import (
    Client,
    describe,
    expect_code,
    tool_call_message,
    tool_result_message,
    user_message,
)
from tests.server_harness import KEY_A, RunningServer

pb = episode_service_pb2
EPISODE = "episodes/000001.jsonl"
MEMORIES = "memories.jsonl"
Record = dict[str, object]


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


@dataclass
class Export:
    """An export as parts of decoded records, sent again with fresh hashes."""

    manifest: pb.ExportManifest
    parts: dict[str, list[Record]]

    def edited(self, part: str, kind: str, change: Callable[[Record], None], nth: int = 0) -> Export:
        parts = {name: [dict(r) for r in records] for name, records in self.parts.items()}
        change([r for r in parts[part] if r["type"] == kind][nth])
        return Export(self.manifest, parts)

    def repeated(self, part: str, kind: str) -> Export:
        parts = {name: [dict(r) for r in records] for name, records in self.parts.items()}
        parts[part].append(next(r for r in parts[part] if r["type"] == kind))
        return Export(self.manifest, parts)

    def memories_only(self) -> Export:
        """The memories part alone: a refused memory leaves no episode imported before it."""
        return Export(self.manifest, {MEMORIES: [dict(r) for r in self.parts[MEMORIES]]})

    def requests(self, user_id: str) -> list[pb.ImportUserRequest]:
        manifest = pb.ExportManifest()
        manifest.CopyFrom(self.manifest)
        del manifest.parts[:]
        lines = {name: [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
                 for name, records in self.parts.items()}  # fmt: skip
        for name, text in lines.items():
            digest = hashlib.sha256("".join(f"{t}\n" for t in text).encode()).hexdigest()
            manifest.parts.add(name=name, records=len(text), sha256=digest)
        first = pb.ImportUserRequest(manifest=manifest, user_id=user_id)
        return [first] + [
            pb.ImportUserRequest(part=name, records=text) for name, text in lines.items() if text
        ]


async def exported(client: Client) -> Export:
    """One open episode with a tool round, session data and a model call; one memory."""
    agent_id = await create_agent(client)
    user = unique("mary")
    episode = await client.open_episode(agent_id, user_id=user)
    await client.add(episode, user_message("Look up the tram times?"), tool_call_message("call_1"),
                     tool_result_message("call_1"))  # fmt: skip
    data = struct_pb2.Struct()
    data.update({"city": "Lisbon"})
    await client.memories.UpdateSessionData(
        memory_service_pb2.UpdateSessionDataRequest(episode_id=episode, data=data), metadata=client.auth
    )
    await build(client, episode, user_message="Thanks!", append_user_message=True)
    memory = memory_service_pb2.MemoryInput(
        memory_id=unique("pet"), text="Mary has a cat called Zanzibar.", kind=memory_pb2.MEMORY_KIND_FACT
    )
    await client.memories.CreateMemories(
        memory_service_pb2.CreateMemoriesRequest(agent_id=agent_id, user_id=user, memories=[memory]),
        metadata=client.auth,
    )
    stream = client.episodes.ExportUser(pb.ExportUserRequest(user_id=user), metadata=client.auth)
    parts: dict[str, list[Record]] = {}
    manifest = pb.ExportManifest()
    async for response in stream:
        parts.setdefault(response.part, []).extend(json.loads(r) for r in response.records)
        if response.HasField("manifest"):
            manifest.CopyFrom(response.manifest)
    parts.pop("", None)
    parts.setdefault(MEMORIES, [])
    await client.episodes.EraseUser(pb.EraseUserRequest(user_id=user), metadata=client.auth)
    return Export(manifest, parts)


async def send(client: Client, export: Export, user_id: str) -> pb.ImportUserResponse:
    async def stream() -> AsyncIterator[pb.ImportUserRequest]:
        for request in export.requests(user_id):
            yield request

    response: pb.ImportUserResponse = await client.episodes.ImportUser(
        stream(), metadata=client.auth, timeout=60
    )
    return response


async def refused(client: Client, export: Export, *named: str) -> str:
    """INVALID_ARGUMENT whose message names each of `named`, and the user holds nothing."""
    user = unique("target")
    err = await expect_code(send(client, export, user), grpc.StatusCode.INVALID_ARGUMENT)
    for words in named:
        assert words in describe(err), f"{words!r} is not named in {describe(err)}"
    listed = await client.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=user), metadata=client.auth)
    assert not listed.episodes, "nothing of a refused part is written"
    return describe(err)


def setter(name: str, value: object) -> Callable[[Record], None]:
    return lambda record: record.__setitem__(name, value)


async def test_an_unedited_export_imports(client: Client) -> None:
    export = await exported(client)
    done = await send(client, export, unique("target"))
    assert done.episodes_imported == 1 and done.memories_imported == 1


async def test_values_that_cannot_be_stored_are_refused_by_field_not_internal(client: Client) -> None:
    export = await exported(client)
    for seconds, nanos in ((-62135596801, 0), (253402300800, 0), (0, -1)):
        out_of_range = Export(pb.ExportManifest(), export.parts)
        out_of_range.manifest.CopyFrom(export.manifest)
        out_of_range.manifest.export_time.seconds, out_of_range.manifest.export_time.nanos = seconds, nanos
        await refused(client, out_of_range, "manifest.export_time")
    for edge in ("0001-01-01T00:30:00+05:00", "9999-12-31T23:30:00-05:00"):
        await refused(
            client, export.edited(EPISODE, "episode", setter("started_at", edge)), "record 1.started_at"
        )
    await refused(client, export.edited(EPISODE, "tool_call", setter("duration_seconds", float("inf"))),
                  "duration_seconds")  # fmt: skip
    await refused(
        client, export.edited(EPISODE, "message", setter("token_count", 2**63)), "record 2.token_count"
    )
    await refused(
        client, export.edited(EPISODE, "episode", setter("token_count", 2**63)), "record 1.token_count"
    )
    for kind in ("tool_call", "model_call", "session_data", "summary"):
        if any(r["type"] == kind for r in export.parts[EPISODE]):
            await refused(client, export.repeated(EPISODE, kind), "repeats the", EPISODE)
    await refused(client, export.memories_only().repeated(MEMORIES, "memory"), "repeats the", MEMORIES)


async def test_values_that_would_break_later_reads_are_refused(client: Client) -> None:
    export = await exported(client)
    for data in ([1, 2, 3], "a string", 5):
        await refused(client, export.edited(EPISODE, "session_data", setter("data", data)), "data must be")
    await refused(client, export.edited(EPISODE, "message", setter("token_count", -(10**9))), "token_count")
    await refused(client, export.edited(EPISODE, "episode", setter("metadata", [1])), "metadata must be")


async def test_token_counts_are_the_servers_not_the_files(client: Client) -> None:
    export = await exported(client)
    truthful = {
        cast(int, r["seq"]): cast(int, r["token_count"])
        for r in export.parts[EPISODE]
        if r["type"] == "message"
    }
    lying = Export(
        export.manifest, {name: [dict(r) for r in records] for name, records in export.parts.items()}
    )
    for record in lying.parts[EPISODE]:
        if record["type"] in ("message", "episode", "summary"):
            record["token_count"] = 1
    user = unique("target")
    await send(client, lying, user)
    listed = await client.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=user), metadata=client.auth)
    (episode,) = listed.episodes
    log = await client.log_of(episode.episode_id)
    assert {m.seq: m.token_count for m in log} == truthful
    assert episode.token_count == sum(truthful.values())


async def test_records_the_write_path_would_refuse_are_refused_by_field(client: Client) -> None:
    export = await exported(client)
    big = "x" * (3 * 1024 * 1024)
    await refused(client, export.edited(EPISODE, "message", setter("content", big)), "record 2.content")
    await refused(
        client, export.edited(EPISODE, "episode", setter("metadata", {"x": big})), "record 1.metadata"
    )
    await refused(
        client, export.edited(EPISODE, "episode", setter("token_encoding", "rot13")), "token_encoding"
    )
    memories = export.memories_only()
    await refused(client, memories.edited(MEMORIES, "memory", setter("text", big)), "record 1.text")
    await refused(client, memories.edited(MEMORIES, "memory", setter("memory_id", "")), "record 1.memory_id")
    tool_input = setter("input", {"q": big})
    await refused(client, export.edited(EPISODE, "tool_call", tool_input), ".input")
