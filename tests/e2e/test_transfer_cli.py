"""`episodic export` / `episodic import` as an operator runs them against a live server (key
from EPISODIC_API_KEY), on each backend: a round trip through a file, refusals that leave no
file, and other systems' exports: OpenAI chat transcripts (JSONL) and a mem0 get_all() dump,
each imported once however often it is run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.protobuf import json_format

from episodic.v1 import episode_pb2, episode_service_pb2, memory_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client, Completed, operator_command, user_message
from tests.server_harness import KEY_A, RunningServer

pb = episode_service_pb2


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    async with server.channel() as channel:
        yield Client.of(channel, KEY_A)


async def episodic(server: RunningServer, *argv: str) -> Completed:
    return await operator_command(server.address, KEY_A, *argv)


async def test_a_user_goes_out_to_a_file_and_back_in(
    server: RunningServer, client: Client, tmp_path: Path
) -> None:
    agent_id, user = await client.create_agent(), unique("mary")
    episode_id = await client.open_episode(agent_id, user_id=user)
    await client.add(episode_id, user_message("I keep bees in Porto."))
    out = tmp_path / "mary.zip"
    done = await episodic(server, "export", "--user", user, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 episodes, 1 messages" in done.stdout and out.exists()
    again = await episodic(server, "export", "--user", user, "--out", str(out))
    assert again.returncode == 2 and "--replace" in again.stderr
    await client.episodes.EraseUser(pb.EraseUserRequest(user_id=user), metadata=client.auth)
    loaded = await episodic(server, "import", str(out))
    assert loaded.returncode == 0, loaded.stderr
    assert "imported 1 episodes (0 already there), 1 messages" in loaded.stdout
    assert [m.content for m in await client.log_of(episode_id)] == ["I keep bees in Porto."]


async def test_an_export_the_server_refuses_leaves_no_file(server: RunningServer, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    done = await episodic(server, "export", "--user", "bad id!", "--out", str(folder / "nobody.zip"))
    assert done.returncode == 1 and "INVALID_ARGUMENT" in done.stderr and "user_id" in done.stderr
    assert list(folder.iterdir()) == []


async def test_openai_chat_transcripts_become_closed_episodes_once(
    server: RunningServer, client: Client, tmp_path: Path
) -> None:
    agent_id, user = await client.create_agent(), unique("ana")
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Faro"}'},
    }
    lines = [
        {"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Faro?"}]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_7", "content": "sunny"},
            {"role": "assistant", "content": "Sunny in Faro."},
        ], "create_time": 1760000000},
        {"messages": [{"role": "user", "content": "I prefer trains."}]},
    ]  # fmt: skip
    transcript = tmp_path / "chats.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    argv = ("import", str(transcript), "--from", "openai-chat", "--agent", agent_id, "--user", user)
    first = await episodic(server, *argv)
    assert first.returncode == 0, first.stderr
    assert "imported 2 conversations (0 already there), 6 messages" in first.stdout
    second = await episodic(server, *argv)
    assert "imported 0 conversations (2 already there)" in second.stdout
    listed = await client.episodes.ListEpisodes(pb.ListEpisodesRequest(user_id=user), metadata=client.auth)
    assert {e.state for e in listed.episodes} == {episode_pb2.Episode.STATE_CLOSED}
    weather = next(e for e in listed.episodes if e.message_count == 5)
    assert weather.start_time.seconds == 1760000000
    log = await client.log_of(weather.episode_id)
    assert log[2].tool_calls[0].tool_call_id == "call_7" and log[3].tool_result.output.string_value == "sunny"

    image = tmp_path / "image.jsonl"
    image.write_text(json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}) + "\n")
    refused = await episodic(
        server, "import", str(image), "--from", "openai-chat", "--agent", agent_id, "--user", user
    )
    assert refused.returncode == 1 and "'image_url' content part" in refused.stderr


async def test_a_mem0_dump_becomes_memories_under_their_ids(
    server: RunningServer, client: Client, tmp_path: Path
) -> None:
    agent_id, user = await client.create_agent(), unique("lee")
    dump = {"results": [
        {"id": "a1", "memory": "Lee is vegetarian", "user_id": user, "hash": "h1", "metadata": {"s": "c"}},
        {"id": "a2", "memory": "Lee lives in Braga", "user_id": user, "created_at": "2026-01-02T10:00:00Z"},
    ]}  # fmt: skip
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(dump))
    for expected in ("imported 2 memories (0 already there)", "imported 0 memories (2 already there)"):
        done = await episodic(server, "import", str(path), "--from", "mem0", "--agent", agent_id)
        assert done.returncode == 0 and expected in done.stdout, done.stderr
    listed = await client.memories.ListMemories(
        memory_service_pb2.ListMemoriesRequest(agent_id=agent_id, user_id=user), metadata=client.auth
    )
    assert sorted(m.memory_id for m in listed.memories) == ["mem0-a1", "mem0-a2"]
    kept = next(m for m in listed.memories if m.memory_id == "mem0-a1")
    assert json_format.MessageToDict(kept.metadata)["mem0"] == {"hash": "h1", "metadata": {"s": "c"}}
