"""Leadership of a cluster of replicas, in memory: the `Leadership` port as PgLeadership
keeps it (one holder per job, a departed holder's jobs free for the next replica that
asks), for tests of more than one replica without PostgreSQL. (tests/fakes.py's
FakeLeadership is leadership decided by the test instead.)"""

from __future__ import annotations


class FakeLeadershipCluster:
    """The locks every replica of one cluster shares (PostgreSQL's advisory locks)."""

    def __init__(self) -> None:
        self.holders: dict[str, FakeReplicaLeadership] = {}

    def replica(self) -> FakeReplicaLeadership:
        return FakeReplicaLeadership(self)


class FakeReplicaLeadership:
    """One replica's `Leadership`: `holds` takes a free job's lock; `close` frees its own."""

    def __init__(self, cluster: FakeLeadershipCluster) -> None:
        self._cluster = cluster

    @property
    def held(self) -> frozenset[str]:
        return frozenset(job for job, holder in self._cluster.holders.items() if holder is self)

    async def holds(self, job: str) -> bool:
        holder = self._cluster.holders.setdefault(job, self)
        return holder is self

    async def close(self) -> None:
        for job in self.held:
            del self._cluster.holders[job]
