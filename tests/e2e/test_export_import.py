"""ExportUser and ImportUser over the wire, on each backend, through the export file the CLI
writes: export -> erase -> import renders the same context for the same request; a second
import changes nothing; a tampered, truncated or newer file is refused by name, before any of
the refused part is written; an import names a missing agent; another tenant can import."""

from __future__ import annotations

import asyncio
import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import struct_pb2

from episodic.edges.grpc.transfer_client import read_export, write_export
from episodic.v1 import episode_pb2, episode_service_pb2, memory_pb2, memory_service_pb2
from episodic_client import EpisodicClient, message_input
from episodic_client.v1 import episode_service_pb2 as client_pb
from tests.conftest import unique
from tests.e2e.context_helpers import Built, build, create_agent
from tests.e2e.helpers import (
    DIGEST_SETTLE_SECONDS,
    Client,
    error_reason,
    expect_code,
    tool_call_message,
    tool_result_message,
    user_message,
)
from tests.polling import eventually
from tests.server_harness import KEY_A, KEY_B, RunningServer

pb = episode_service_pb2


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


def said(role: episode_pb2.Role.ValueType, text: str) -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=role, content=text)


async def history(client: Client, agent_id: str, user: str) -> tuple[str, str]:
    """A closed episode (tool round, session data, a model call, memories) and an open one."""
    past = await client.open_episode(agent_id, user_id=user)
    await client.add(
        past,
        user_message("I moved to Lisbon last spring and I adore sardines. 🐟"),
        said(episode_pb2.ROLE_ASSISTANT, "Lisbon is lovely in spring."),
        user_message("Look up the tram times?"),
        tool_call_message("call_1"),
        tool_result_message("call_1"),
        said(episode_pb2.ROLE_ASSISTANT, "Tram 28 runs every 10 minutes."),
    )
    data = struct_pb2.Struct()
    data.update({"city": "Lisbon", "n": [1, 2]})
    await client.memories.UpdateSessionData(
        memory_service_pb2.UpdateSessionDataRequest(episode_id=past, data=data), metadata=client.auth
    )
    await build(client, past, user_message="Thanks!", append_user_message=True)
    await client.close_digested(past)
    memory = memory_service_pb2.MemoryInput(
        memory_id=unique("pet"), text="Mary has a cat called Zanzibar.", kind=memory_pb2.MEMORY_KIND_FACT
    )
    await client.memories.CreateMemories(
        memory_service_pb2.CreateMemoriesRequest(agent_id=agent_id, user_id=user, memories=[memory]),
        metadata=client.auth,
    )
    live = await client.open_episode(agent_id, user_id=user)
    await client.add(
        live, user_message("Plan my weekend, please."), said(episode_pb2.ROLE_ASSISTANT, "Sure!")
    )
    return past, live


async def export_file(client: Client, path: Path, user_id: str) -> pb.ExportManifest:
    stream = client.episodes.ExportUser(pb.ExportUserRequest(user_id=user_id), metadata=client.auth)
    responses = [r async for r in stream]
    manifest, _ = await asyncio.to_thread(write_export, responses, path)
    return manifest


async def import_file(client: Client, path: Path, user_id: str = "") -> pb.ImportUserResponse:
    with zipfile.ZipFile(path) as archive:
        requests = list(read_export(archive, user_id))

    async def stream() -> AsyncIterator[pb.ImportUserRequest]:
        for request in requests:
            yield request

    return await client.episodes.ImportUser(stream(), metadata=client.auth, timeout=60)


def rendered(built: Built) -> list[tuple[int, int, str]]:
    return [(m.role, m.section, m.content) for m in built.messages]


async def digests_ready(client: Client, episode_id: str) -> None:
    async def ready() -> bool:
        return (await client.get_episode(episode_id)).digest.state == episode_pb2.DIGEST_STATE_READY

    assert await eventually(ready, DIGEST_SETTLE_SECONDS), f"the digest of {episode_id} was not made again"


async def test_export_erase_import_renders_the_same_context(client: Client, tmp_path: Path) -> None:
    agent_id = await create_agent(client)
    user = unique("mary")
    past, live = await history(client, agent_id, user)
    question = "Where did I move, and what is my cat called?"
    before = rendered(await build(client, live, user_message=question))
    manifest = await export_file(client, tmp_path / "mary.zip", user)
    assert [p.name for p in manifest.parts] == [
        "episodes/000001.jsonl",
        "episodes/000002.jsonl",
        "memories.jsonl",
    ]
    with zipfile.ZipFile(tmp_path / "mary.zip") as archive:
        kinds = [json.loads(line)["type"] for line in archive.read("episodes/000001.jsonl").splitlines()]
    assert kinds[0] == "episode" and kinds.count("message") == 7
    assert {"tool_call", "digest", "session_data", "model_call"} <= set(kinds)
    with zipfile.ZipFile(tmp_path / "mary.zip") as archive:
        memories = len(archive.read("memories.jsonl").splitlines())
    assert memories >= 2, "the client's memory and what was extracted at close"

    await client.episodes.EraseUser(pb.EraseUserRequest(user_id=user), metadata=client.auth)
    await expect_code(client.get_episode(past), grpc.StatusCode.NOT_FOUND)
    done = await import_file(client, tmp_path / "mary.zip")
    assert (done.episodes_imported, done.messages_imported, done.memories_imported) == (2, 9, memories)
    assert done.digests_pending == 1 and done.model_calls_imported >= 1
    await digests_ready(client, past)
    log = await client.log_of(past)
    assert "🐟" in log[0].content and log[4].tool_result.tool_call_id == "call_1"
    after = rendered(await build(client, live, user_message=question))
    assert after == before

    again = await import_file(client, tmp_path / "mary.zip")
    assert (again.episodes_imported, again.episodes_unchanged, again.memories_imported) == (0, 2, 0)
    assert again.memories_unchanged == memories


async def test_a_tampered_truncated_or_newer_export_is_refused_by_name(
    client: Client, tmp_path: Path
) -> None:
    agent_id = await create_agent(client)
    user = unique("mary")
    await history(client, agent_id, user)
    original = tmp_path / "mary.zip"
    await export_file(client, original, user)
    await client.episodes.EraseUser(pb.EraseUserRequest(user_id=user), metadata=client.auth)

    def rewrite(name: str, change: str) -> Path:
        target = tmp_path / f"{change}.zip"
        with zipfile.ZipFile(original) as source, zipfile.ZipFile(target, "w") as out:
            for item in source.namelist():
                data = source.read(item)
                if item == name and change == "tampered":
                    data = data.replace(b"Lisbon", b"Madrid")
                elif item == name and change == "truncated":
                    data = b"\n".join(data.splitlines()[:3]) + b"\n"
                elif item == name and change == "newer":
                    manifest = json.loads(data)
                    manifest["version"] = 99
                    data = json.dumps(manifest).encode()
                out.writestr(item, data)
        return target

    for change in ("tampered", "truncated"):
        err = await expect_code(
            import_file(client, rewrite("episodes/000001.jsonl", change)), grpc.StatusCode.INVALID_ARGUMENT
        )
        assert "episodes/000001.jsonl" in (err.details() or "")
    newer = await expect_code(
        import_file(client, rewrite("manifest.json", "newer")), grpc.StatusCode.FAILED_PRECONDITION
    )
    assert error_reason(newer) == "EXPORT_VERSION_UNSUPPORTED"
    listed = await client.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=user), metadata=client.auth)
    assert not listed.episodes, "nothing of a refused part is written"


async def test_another_tenant_imports_once_the_agent_exists(server: RunningServer, tmp_path: Path) -> None:
    async with server.channel() as channel:
        a, b = Client.of(channel, KEY_A), Client.of(channel, KEY_B)
        agent_id = await create_agent(a)
        user = unique("mary")
        await history(a, agent_id, user)
        await export_file(a, tmp_path / "mary.zip", user)
        maria = unique("maria")
        missing = await expect_code(
            import_file(b, tmp_path / "mary.zip", user_id=maria), grpc.StatusCode.FAILED_PRECONDITION
        )
        assert error_reason(missing) == "AGENT_NOT_FOUND" and agent_id in (missing.details() or "")
        await b.create_agent(agent_id)
        done = await import_file(b, tmp_path / "mary.zip", user_id=maria)
        assert done.episodes_imported == 2
        listed = await b.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=maria), metadata=b.auth)
        assert {e.user_id for e in listed.episodes} == {maria} and len(listed.episodes) == 2


async def test_the_python_client_exports_and_imports(server: RunningServer) -> None:
    def run() -> tuple[int, int]:
        with EpisodicClient(server.address, api_key=KEY_A, timeout=30) as client:
            agent_id = client.create_agent(unique("agent")).agent.agent_id
            user = unique("mary")
            episode_id = client.open_episode(agent_id, user).episode.episode_id
            client.add_messages(episode_id, [message_input("user", "I collect stamps.")])
            responses = list(client.export_user(user))
            manifest = responses[-1].manifest
            client.erase_user(user)
            first = client_pb.ImportUserRequest(manifest=manifest)
            rest = [client_pb.ImportUserRequest(part=r.part, records=r.records) for r in responses[:-1]]
            done = client.import_user([first, *rest])
            return done.episodes_imported, len(list(client.iter_messages(episode_id)))

    assert await asyncio.to_thread(run) == (1, 1)
