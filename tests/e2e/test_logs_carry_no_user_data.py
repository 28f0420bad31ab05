"""No log line, at any level, carries request content, user ids or SQL parameters: exception
messages are never logged (a driver's message quotes parameters), only types and code
locations."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from pathlib import Path

import grpc

from episodic.logs import JsonFormatter
from episodic.v1 import episode_service_pb2 as es
from tests.conftest import unique
from tests.e2e.helpers import Client, user_message
from tests.e2e.test_server_process import serving


def test_a_logged_exception_keeps_its_types_and_frames_but_not_its_message() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("episodic.test.no-user-data")
    logger.addHandler(handler)
    try:
        try:
            try:
                raise ValueError("mary@example.com said hunter2")
            except ValueError as inner:
                raise RuntimeError("[parameters: ('mary@example.com',)]") from inner
        except RuntimeError:
            logger.exception("it failed")
    finally:
        logger.removeHandler(handler)
    line = stream.getvalue()
    assert "mary@example.com" not in line and "hunter2" not in line
    entry = json.loads(line)
    assert entry["error_type"] == "builtins.RuntimeError <- builtins.ValueError"
    assert any("test_logs_carry_no_user_data.py" in frame for frame in entry["stack"])


async def test_closing_then_erasing_users_logs_none_of_their_ids_or_words(tmp_path: Path) -> None:
    """Digests race the erasure of their episodes (the digester used to log the failed write
    with its SQL parameters); refused requests carry user text too."""
    users = [f"{unique('marker')}@example.com" for _ in range(12)]
    words = unique("secretword")
    flags = (
        "--insecure-dev",
        "--migrate-on-start",
        "--embedder",
        "hashing",
        "--database-url",
        f"sqlite:///{tmp_path / 'x.db'}",
    )
    async with serving(*flags, "--log-level", "DEBUG", cwd=tmp_path) as server, server.channel() as channel:
        client = Client.of(channel, None)
        agent_id = await client.create_agent()
        episodes = {}
        for user in users:
            episodes[user] = episode_id = await client.open_episode(agent_id, user_id=user)
            await client.add(episode_id, user_message(f"I am {user}, remember {words}. " * 20))

        async def close_then_erase(user: str, pause: float) -> None:
            await client.episodes.CloseEpisode(es.CloseEpisodeRequest(episode_id=episodes[user]))
            await asyncio.sleep(pause)  # the digester is somewhere in the digest by now
            await client.episodes.EraseUser(es.EraseUserRequest(user_id=user))

        await asyncio.gather(*(close_then_erase(u, 0.01 * i) for i, u in enumerate(users)))
        refused = es.AddMessagesRequest(episode_id=episode_id, messages=[user_message(f"{words} {users[0]}")])
        try:
            await client.episodes.AddMessages(refused)  # the episode is gone
        except grpc.aio.AioRpcError as err:
            assert err.code() is grpc.StatusCode.NOT_FOUND  # noqa: PT017 - a refusal is allowed, not required
        await asyncio.sleep(1.0)  # let the digester finish with what it had claimed
        assert await server.terminate() == 0
    everything = "\n".join(server.lines)
    assert all(user not in everything for user in users)
    assert words not in everything
