"""Database faults from a real `episodic serve`: PostgreSQL cut off behind a proxy, and a
SQLite file on a full disk. Calls answer UNAVAILABLE / RESOURCE_EXHAUSTED with a RetryInfo,
never INTERNAL; health says NOT_SERVING while it lasts; one log line per change, not per
call; the server recovers by itself and no acknowledged write is lost."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.v1 import context_service_pb2, episode_service_pb2
from tests.chaos.tcp_proxy import CuttableProxy
from tests.e2e.helpers import Client, _details, error_reason, user_message
from tests.e2e.test_server_process import ServerProcess, serving

pytestmark = pytest.mark.slow  # database outages, hangs and a full disk, seconds each

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _health(channel: grpc.aio.Channel) -> int:
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return int(reply.status)


async def _until_health(channel: grpc.aio.Channel, wanted: int, within: float) -> float:
    """Seconds until health reports `wanted`; fails after `within`."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if await _health(channel) == wanted:
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"health did not become {wanted} within {within} s")


def _retry_delay(err: grpc.aio.AioRpcError) -> float | None:
    for detail in _details(err):
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return None


def _calls(client: Client, episode_id: str) -> list[Callable[[], Awaitable[Any]]]:
    """One of each kind: an append, reads, a listing and a BuildContext stream."""

    async def build() -> None:
        request = context_service_pb2.BuildContextRequest(episode_id=episode_id, user_message="hi")
        async for _ in client.context.BuildContext(request, metadata=client.auth, timeout=15):
            pass

    return [
        lambda: client.add(episode_id, user_message("during the outage")),
        lambda: client.get_episode(episode_id),
        lambda: client.episodes.ListEpisodes(episode_service_pb2.ListEpisodesRequest(), timeout=15),
        build,
    ]


async def _codes_while(client: Client, episode_id: str, seconds: float) -> list[grpc.aio.AioRpcError]:
    """Every kind of call, over and over for `seconds`; all must fail (the database is out)."""
    failures: list[grpc.aio.AioRpcError] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        failures += [await _failure_of(call) for call in _calls(client, episode_id)]
    return failures


async def _failure_of(call: Callable[[], Awaitable[Any]]) -> grpc.aio.AioRpcError:
    try:
        await call()
    except grpc.aio.AioRpcError as err:
        return err
    raise AssertionError("a call succeeded while the database was out")


def _problem_logs(server: ServerProcess) -> list[dict[str, Any]]:
    """Everything the server logged at WARNING or above (the access log is INFO)."""
    return [e for e in server.logs() if e.get("level") in {"WARNING", "ERROR", "CRITICAL"}]


@pytest.mark.postgres
async def test_a_postgresql_outage_answers_unavailable_flips_health_and_recovers(
    postgres_url: str, tmp_path: Path
) -> None:
    target = int(postgres_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = CuttableProxy(target)
    await proxy.start()
    try:
        url = postgres_url.replace(f":{target}/", f":{proxy.port}/")
        flags = ("--insecure-dev", "--migrate-on-start", "--embedder", "hashing", "--database-url", url)
        ledger = ("--erasure-ledger", str(tmp_path / "erasures.jsonl"))  # without one: a WARNING at start
        async with serving(*flags, *ledger, cwd=tmp_path) as server, server.channel() as channel:
            client = Client.of(channel, None)
            episode_id = await client.open_episode()
            acked = [m.seq for m in await client.add(episode_id, user_message("before"))]

            await proxy.cut()
            failures = await _codes_while(client, episode_id, seconds=3.0)
            down_after = await _until_health(channel, NOT_SERVING, within=10)

            assert {f.code() for f in failures} == {grpc.StatusCode.UNAVAILABLE}, {f.code() for f in failures}
            assert {error_reason(f) for f in failures} == {"DATABASE_UNAVAILABLE"}
            assert all(_retry_delay(f) for f in failures)

            await proxy.restore()
            up_after = await _until_health(channel, SERVING, within=15)
            acked += [m.seq for m in await client.add(episode_id, user_message("after"))]
            assert [m.seq for m in await client.log_of(episode_id)] == acked
            assert await server.terminate() == 0
    finally:
        await proxy.cut()  # the proxy closes what it still holds
    problems = _problem_logs(server)
    assert [e["message"] for e in problems] == ["database fault: calls answer UNAVAILABLE until it clears"]
    assert not any("stack" in e or "exception" in e for e in server.logs())
    recovered = [e for e in server.logs() if e.get("message") == "database answers again"]
    assert len(recovered) == 1
    print(
        f"\noutage: {len(failures)} calls, all UNAVAILABLE; health NOT_SERVING after {down_after:.2f} s, "
        f"SERVING {up_after:.2f} s after the database returned; {len(problems)} warning line(s)"
    )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs: a disk that can really fill up (needs root, as on CI)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    stats = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as out:
        out.write(b"\0" * max(stats.f_bavail * stats.f_frsize - leave, 0))
    return filler


async def test_a_full_disk_answers_resource_exhausted_flips_health_and_recovers(
    small_disk: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{small_disk / 'episodic.db'}"  # a new file: created at start-up
    flags = ("--insecure-dev", "--migrate-on-start", "--embedder", "hashing", "--database-url", url)
    async with serving(*flags, cwd=tmp_path) as server, server.channel() as channel:
        client = Client.of(channel, None)
        episode_id = await client.open_episode()
        filler = _fill(small_disk, leave=256 * 1024)
        acked: list[int] = []
        refusal: grpc.aio.AioRpcError | None = None
        for _ in range(200):
            try:
                acked += [m.seq for m in await client.add(episode_id, user_message("x" * 16_000))]
            except grpc.aio.AioRpcError as err:
                refusal = err
                break
        assert refusal is not None, "the disk never filled up"
        assert refusal.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, refusal
        assert error_reason(refusal) == "STORAGE_FULL" and _retry_delay(refusal)
        await _until_health(channel, NOT_SERVING, within=10)
        assert (await client.get_episode(episode_id)).message_count == len(acked)  # reads still work

        filler.unlink()
        await _until_health(channel, SERVING, within=15)
        acked += [m.seq for m in await client.add(episode_id, user_message("space again"))]
        assert [m.seq for m in await client.log_of(episode_id)] == acked
        assert await server.terminate() == 0
    assert [e["message"] for e in _problem_logs(server)] == [
        "database fault: calls answer RESOURCE_EXHAUSTED until it clears"
    ]


HUNG_WARNING = "database hung (no answer in time): calls answer UNAVAILABLE until it answers"


@pytest.mark.postgres
async def test_a_hung_postgresql_answers_unavailable_flips_health_and_recovers(
    postgres_url: str, tmp_path: Path
) -> None:
    """A database that accepts connections and bytes but never answers (SIGSTOPped, or a
    black hole on the network): without client-side timeouts every call waits forever and
    health stays SERVING."""
    target = int(postgres_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = CuttableProxy(target)
    await proxy.start()
    try:
        url = postgres_url.replace(f":{target}/", f":{proxy.port}/")
        flags = ("--insecure-dev", "--migrate-on-start", "--embedder", "hashing", "--database-url", url)
        ledger = ("--erasure-ledger", str(tmp_path / "erasures.jsonl"))  # without one: a WARNING at start
        bounds = ("--db-statement-timeout-seconds", "1", "--db-connect-timeout-seconds", "1")
        async with serving(*flags, *ledger, *bounds, cwd=tmp_path) as server, server.channel() as channel:
            client = Client.of(channel, None)
            episode_id = await client.open_episode()
            acked = [m.seq for m in await client.add(episode_id, user_message("before"))]

            proxy.freeze()
            add = client.add(episode_id, user_message("while hung"))
            failure = await asyncio.wait_for(_failure_of(lambda: add), timeout=30)  # not until a deadline
            assert failure.code() is grpc.StatusCode.UNAVAILABLE, failure
            assert error_reason(failure) == "DATABASE_UNAVAILABLE" and _retry_delay(failure)
            down_after = await _until_health(channel, NOT_SERVING, within=15)
            await asyncio.sleep(2)  # probes meet the hung database too: still NOT_SERVING
            assert await _health(channel) == NOT_SERVING

            proxy.thaw()
            up_after = await _until_health(channel, SERVING, within=30)
            acked += [m.seq for m in await client.add(episode_id, user_message("after"))]
            assert [m.seq for m in await client.log_of(episode_id)] == acked
            assert await server.terminate() == 0
    finally:
        proxy.thaw()
        await proxy.cut()
    assert [e["message"] for e in _problem_logs(server)] == [HUNG_WARNING]
    assert len([e for e in server.logs() if e.get("message") == "database answers again"]) == 1
    print(
        f"\nhung: NOT_SERVING {down_after:.2f} s after the failed call, SERVING {up_after:.2f} s after thaw"
    )
