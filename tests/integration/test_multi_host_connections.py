"""The dedicated connections (LISTEN/NOTIFY, advisory locks) of a URL naming several
servers try every one, in order, by the same target_session_attrs as the pool; a URL
whose servers are none in the wanted role is an outage they outlive, not a crash."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest

from episodic.store.database import normalize_url
from episodic.store.leadership import PgLeadership
from episodic.store.signals import PgSignals
from tests.polling import eventually
from tests.ports import refusing_port

pytestmark = pytest.mark.postgres


def _with_hosts(postgres_url: str, tail: str) -> str:
    """`postgres_url` (one server) rewritten to name the servers of `tail` instead."""
    head, _, database = postgres_url.rpartition("/")
    user = head.split("://", 1)[1].rpartition("@")[0]
    return f"postgresql://{user}@/{database}?{tail}"


@pytest.fixture
def live_port(postgres_url: str) -> int:
    return int(postgres_url.rpartition(":")[2].split("/")[0])


@pytest.fixture
def dead_port() -> Iterator[int]:
    with refusing_port() as port:
        yield port


async def test_listen_and_notify_reach_the_live_server_of_a_repeated_host_url(
    postgres_url: str, live_port: int, dead_port: int
) -> None:
    url = normalize_url(
        _with_hosts(
            postgres_url,
            f"host=127.0.0.1:{live_port}&host=127.0.0.1:{dead_port}&target_session_attrs=read-write",
        )
    )
    signals, heard = PgSignals(url), asyncio.Queue[str]()
    signals.subscribe("episodic_multi_host", heard.put_nowait)
    await signals.start()
    try:
        sender = await asyncpg.connect(postgres_url)
        try:

            async def delivered() -> bool:
                await sender.execute("SELECT pg_notify('episodic_multi_host', 'hello')")
                return not heard.empty()

            assert await eventually(delivered, timeout=30)
        finally:
            await sender.close()
        assert await heard.get() == "hello"
    finally:
        await signals.stop()


async def test_the_lock_connection_tries_every_host_of_a_comma_url(
    postgres_url: str, live_port: int, dead_port: int
) -> None:
    head, _, database = postgres_url.rpartition("/")
    user = head.split("://", 1)[1].rpartition("@")[0]
    url = normalize_url(
        f"postgresql://{user}@127.0.0.1:{dead_port},127.0.0.1:{live_port}/{database}?target_session_attrs=read-write"
    )
    leader = PgLeadership(url)
    try:
        assert await leader.holds("multi-host-job")
    finally:
        await leader.close()


async def test_no_server_in_the_wanted_role_means_not_leading_rather_than_an_error(
    postgres_url: str, live_port: int
) -> None:
    url = normalize_url(
        _with_hosts(postgres_url, f"host=127.0.0.1&port={live_port}&target_session_attrs=standby")
    )
    leader = PgLeadership(url)
    try:
        assert not await leader.holds("multi-host-job")  # the only server is a primary
    finally:
        await leader.close()


async def test_the_signal_connection_outlives_finding_no_server_in_the_wanted_role(
    postgres_url: str, live_port: int
) -> None:
    url = normalize_url(
        _with_hosts(postgres_url, f"host=127.0.0.1&port={live_port}&target_session_attrs=standby")
    )
    signals = PgSignals(url)
    await signals.start()
    try:
        assert await eventually(lambda: _settled(signals.refused >= 2), timeout=30)
        assert signals.running
    finally:
        await signals.stop()


async def _settled(value: bool) -> bool:
    return value
