"""The `Leadership` port's contract (once-per-cluster jobs: the idle reaper, retention,
feed pruning), held by PostgreSQL's advisory locks (store/leadership.py), by the in-memory
cluster of tests/fakes_leadership.py and, for what one replica sees, by SoleReplica (a
SQLite deployment is one process, which leads every job). Job names are unique per test:
the PostgreSQL locks are the shared test database's, which servers of other tests use."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Protocol

import pytest
from sqlalchemy import make_url

from episodic.store.leadership import PgLeadership
from episodic.workers.loops import SoleReplica
from tests.conftest import unique
from tests.fakes_leadership import FakeLeadershipCluster


class Replica(Protocol):
    async def holds(self, job: str) -> bool: ...

    async def close(self) -> None: ...


NewReplica = Callable[[], Replica]
CLUSTERS = ["fake", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=CLUSTERS)
def cluster(request: pytest.FixtureRequest) -> str:
    """The fake cluster, or the URL of the PostgreSQL database whose locks the replicas share."""
    return "fake" if request.param == "fake" else str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def new_replica(cluster: str) -> AsyncIterator[NewReplica]:
    """Makes replicas of one cluster; every one is closed at the end."""
    async with AsyncExitStack() as stack:
        if cluster == "fake":
            make: NewReplica = FakeLeadershipCluster().replica
        else:
            url = make_url(cluster)
            make = lambda: PgLeadership(url)  # noqa: E731

        def new() -> Replica:
            replica = make()
            stack.push_async_callback(replica.close)
            return replica

        yield new


@pytest.fixture(params=["sole", *CLUSTERS])
def one_replica(request: pytest.FixtureRequest) -> Replica:
    if request.param == "sole":
        return SoleReplica()
    if request.param == "fake":
        return FakeLeadershipCluster().replica()
    return PgLeadership(make_url(str(request.getfixturevalue("postgres_url"))))


@pytest.fixture
def job() -> str:
    return unique("job")


async def test_the_first_replica_to_ask_leads_and_keeps_leading(one_replica: Replica, job: str) -> None:
    try:
        assert await one_replica.holds(job)
        assert await one_replica.holds(job)  # tick after tick
        assert await one_replica.holds(unique("another-job"))
    finally:
        await one_replica.close()


async def test_only_one_replica_leads_a_job(new_replica: NewReplica, job: str) -> None:
    a, b, c = new_replica(), new_replica(), new_replica()
    assert await a.holds(job)
    assert not await b.holds(job) and not await c.holds(job)
    assert await a.holds(job) and not await b.holds(job)


async def test_jobs_are_led_independently(new_replica: NewReplica) -> None:
    a, b = new_replica(), new_replica()
    first, second = unique("job"), unique("job")
    assert await a.holds(first)
    assert await b.holds(second)
    assert not await a.holds(second) and not await b.holds(first)


async def test_a_departed_leaders_jobs_go_to_the_next_replica_that_asks(new_replica: NewReplica) -> None:
    a, b, c = new_replica(), new_replica(), new_replica()
    first, second = unique("job"), unique("job")
    assert await a.holds(first) and await a.holds(second)
    await a.close()
    assert await b.holds(first)
    assert not await c.holds(first)  # taken once, by the first to ask
    assert await c.holds(second)
    assert not await a.holds(first) and not await a.holds(second)  # back, but led by others now


async def test_a_replica_that_leaves_without_leading_frees_nothing(new_replica: NewReplica, job: str) -> None:
    a, b = new_replica(), new_replica()
    assert await a.holds(job)
    assert not await b.holds(job)
    await b.close()
    assert await a.holds(job)
    assert not await new_replica().holds(job)
