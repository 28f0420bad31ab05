"""The real `episodic serve` process: start-up (and the refusals to start), the dev-mode
banner, health, serving without a key in dev mode, and a graceful SIGTERM that lets the
calls in flight finish."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from episodic.v1 import agent_pb2, agent_service_pb2, episode_pb2, episode_service_pb2
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from tests.conftest import unique
from tests.e2e.helpers import assert_serving, clean_environment, rpc_error, run_process

START_TIMEOUT = 20.0
GRACE_SECONDS = 10.0  # the 2 s drain plus teardown, with room for a loaded CI machine
EPISODIC = (sys.executable, "-m", "episodic")


@dataclass
class ServerProcess:
    """A running `episodic serve`; its stderr is drained continuously (a full pipe would
    block the server's logging) and kept for assertions."""

    proc: asyncio.subprocess.Process
    port: int
    lines: list[str]
    drain: asyncio.Task[None] | None = field(default=None)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.address)

    def logs(self) -> list[dict[str, Any]]:
        found = []
        for line in self.lines:
            with suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    found.append(entry)
        return found

    async def terminate(self) -> int:
        """SIGTERM, then the exit code; fails if the process outlives the grace period."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.proc.wait(), GRACE_SECONDS)
        except TimeoutError:
            raise AssertionError(f"still running {GRACE_SECONDS} s after SIGTERM") from None
        if self.drain is not None:
            await self.drain
        return code


async def _read_until_serving(proc: asyncio.subprocess.Process, lines: list[str]) -> int:
    assert proc.stderr is not None
    while True:
        raw = await proc.stderr.readline()
        if not raw:
            await proc.wait()
            raise AssertionError(f"exited {proc.returncode} before serving:\n" + "\n".join(lines))
        line = raw.decode(errors="replace").rstrip("\n")
        lines.append(line)
        with suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("message") == "serving":
                return int(entry["port"])


async def _drain(proc: asyncio.subprocess.Process, lines: list[str]) -> None:
    assert proc.stderr is not None
    async for raw in proc.stderr:
        lines.append(raw.decode(errors="replace").rstrip("\n"))


@asynccontextmanager
async def serving(*flags: str, cwd: Path) -> AsyncIterator[ServerProcess]:
    """`episodic serve <flags> --address 127.0.0.1:0`, up once it logs "serving"."""
    proc = await asyncio.create_subprocess_exec(
        *EPISODIC, "serve", *flags, "--address", "127.0.0.1:0",
        "--shutdown-grace-seconds", str(GRACE_SECONDS),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env=clean_environment(), cwd=cwd,
    )  # fmt: skip
    lines: list[str] = []
    drain: asyncio.Task[None] | None = None
    try:
        try:
            port = await asyncio.wait_for(_read_until_serving(proc, lines), START_TIMEOUT)
        except TimeoutError:
            raise AssertionError(
                f"no 'serving' line within {START_TIMEOUT} s:\n" + "\n".join(lines)
            ) from None
        drain = asyncio.create_task(_drain(proc, lines))
        yield ServerProcess(proc, port, lines, drain)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if drain is not None:
            await drain


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'x.db'}"


def dev_flags(database_url: str) -> tuple[str, ...]:
    return ("--insecure-dev", "--migrate-on-start", "--database-url", database_url)


async def open_episode_without_a_key(channel: grpc.aio.Channel) -> str:
    agent_id = unique("agent")
    agent = agent_pb2.Agent(agent_id=agent_id, model="gpt-4")
    await AgentServiceStub(channel).CreateAgent(agent_service_pb2.CreateAgentRequest(agent=agent))
    opened = await EpisodeServiceStub(channel).OpenEpisode(
        episode_service_pb2.OpenEpisodeRequest(agent_id=agent_id, user_id="mary")
    )
    return opened.episode.episode_id


async def test_dev_mode_prints_a_loud_banner_and_serves_callers_without_a_key(tmp_path: Path) -> None:
    async with serving(*dev_flags(sqlite_url(tmp_path)), cwd=tmp_path) as server:
        before_serving = "\n".join(server.lines)
        assert "EPISODIC IS RUNNING IN INSECURE DEV MODE" in before_serving
        assert "Never expose this server" in before_serving
        async with server.channel() as channel:
            await assert_serving(channel)  # Echo without a key: served as the dev tenant
            episode_id = await open_episode_without_a_key(channel)
            added = await EpisodeServiceStub(channel).AddMessage(
                episode_service_pb2.AddMessageRequest(
                    episode_id=episode_id,
                    message=episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content="hi"),
                )
            )
            assert added.message.seq == 1
        assert await server.terminate() == 0
    serving_line = next(e for e in server.logs() if e.get("message") == "serving")
    assert serving_line["insecure_dev"] is True


def big_batch(messages: int = 15, size: int = 250 * 1024) -> list[episode_pb2.MessageInput]:
    """~3.7 MB of prose-like text: well under the 4 MiB request limit, but a good fraction of
    a second of tokenizing on the server."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma"]
    text = " ".join(rng.choice(words) for _ in range(size // 5))[:size]
    return [episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=text) for _ in range(messages)]


async def test_sigterm_lets_the_calls_in_flight_finish_and_exits_0(tmp_path: Path) -> None:
    async with serving(*dev_flags(sqlite_url(tmp_path)), cwd=tmp_path) as server:
        async with server.channel() as channel:
            stub = EpisodeServiceStub(channel)
            episode_id = await open_episode_without_a_key(channel)
            request = episode_service_pb2.AddMessagesRequest(episode_id=episode_id, messages=big_batch())
            calls = [asyncio.ensure_future(stub.AddMessages(request)) for _ in range(4)]
            await asyncio.sleep(0.3)  # let the requests reach the server
            assert not any(c.done() for c in calls), "the calls finished before SIGTERM; make them slower"
            signalled = time.monotonic()
            code = await server.terminate()
            took = time.monotonic() - signalled
            results = await asyncio.gather(*calls, return_exceptions=True)
        assert code == 0, "\n".join(server.lines[-20:])
        assert took < GRACE_SECONDS
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, failures
        seqs = sorted(m.seq for r in results if not isinstance(r, BaseException) for m in r.messages)
        assert seqs == list(range(1, 61))
    messages = [e.get("message") for e in server.logs()]
    assert "shutting down" in messages and messages[-1] == "stopped"
    with sqlite3.connect(tmp_path / "x.db") as db:  # acknowledged means durable
        (count,) = db.execute("SELECT count(*) FROM messages WHERE episode_id = ?", (episode_id,)).fetchone()
    assert count == 60


async def test_a_rejected_call_is_logged_with_its_status_code(tmp_path: Path) -> None:
    async with serving(*dev_flags(sqlite_url(tmp_path)), cwd=tmp_path) as server:
        async with server.channel() as channel:
            err = await rpc_error(
                EpisodeServiceStub(channel).GetEpisode(episode_service_pb2.GetEpisodeRequest(episode_id=""))
            )
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert await server.terminate() == 0
    access = [e for e in server.logs() if e.get("rpc_method") == "/episodic.v1.EpisodeService/GetEpisode"]
    assert [e["grpc_code"] for e in access] == ["INVALID_ARGUMENT"], access


async def test_without_dev_mode_and_without_keys_it_refuses_to_start(tmp_path: Path) -> None:
    done = await run_process(
        *EPISODIC, "serve", "--migrate-on-start", "--database-url", sqlite_url(tmp_path),
        "--address", "127.0.0.1:0", env=clean_environment(), timeout=START_TIMEOUT,
    )  # fmt: skip
    assert done.returncode != 0
    assert "EPISODIC_API_KEYS" in done.stderr, done.stderr


@pytest.mark.postgres
async def test_it_starts_and_serves_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    async with serving(*dev_flags(postgres_url), cwd=tmp_path) as server:
        async with server.channel() as channel:
            await assert_serving(channel)
            await open_episode_without_a_key(channel)
        assert await server.terminate() == 0
    serving_line = next(e for e in server.logs() if e.get("message") == "serving")
    assert serving_line["database"].startswith("postgresql+asyncpg://")
