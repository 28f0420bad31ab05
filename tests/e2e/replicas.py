"""Replicas of the real `episodic serve`, each a process of its own, on one throwaway
PostgreSQL database: started, SIGKILLed, stopped with SIGTERM and started again on the
port they had, so a client's fixed list of addresses stays right across restarts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic_client.service_config import RETRYABLE, channel_options, service_config
from tests.conftest import POSTGRES_ADMIN_URL, _admin
from tests.e2e.helpers import clean_environment

START_TIMEOUT_SECONDS = 90.0  # three processes importing at once on a loaded 2-core machine
STOP_TIMEOUT_SECONDS = 30.0
MIGRATE_TIMEOUT_SECONDS = 120.0
SHUTDOWN_GRACE_SECONDS = 5.0
REPLICA_FLAGS = (
    "--insecure-dev", "--embedder", "hashing", "--idle-sweep-seconds", "0.5",
    "--shutdown-grace-seconds", str(SHUTDOWN_GRACE_SECONDS),
)  # fmt: skip

# The clients' service config (round robin, retries on UNAVAILABLE and CANCELLED), plus the
# two methods these tests always call with their idempotency key: AddMessage with a
# client_message_id, BuildContext with a request_id.
KEYED = {"episodic.v1.EpisodeService": ("AddMessage",), "episodic.v1.ContextService": ("BuildContext",)}


def retrying_config() -> str:
    services = RETRYABLE.keys() | KEYED.keys()
    return json.dumps(service_config({s: (*RETRYABLE.get(s, ()), *KEYED.get(s, ())) for s in services}))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def round_robin_channel(ports: Sequence[int]) -> grpc.aio.Channel:
    target = "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)
    options = [
        *channel_options(retrying_config()),
        # a restarted replica is used again within a second, not after gRPC's default
        # reconnect back-off (1 s growing to 120 s)
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]
    return grpc.aio.insecure_channel(target, options=options)


# --- one replica --------------------------------------------------------------------------


@dataclass
class Replica:
    name: str
    port: int
    database_url: str
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    lives: int = 0  # each start logs to a file of its own

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"replica-{self.name}-{self.lives}.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.target)

    def start(self) -> None:
        """Starts the process without waiting for it (see wait_serving); stderr goes to a
        file, since a pipe nobody drains would stall the server's logging."""
        self.lives += 1
        command = (
            sys.executable, "-m", "episodic", "serve", "--database-url", self.database_url,
            "--address", self.target, *REPLICA_FLAGS,
        )  # fmt: skip
        with self.log_path.open("wb") as log_file:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_file,
                env=clean_environment(), cwd=self.workdir, start_new_session=True,
            )  # fmt: skip

    async def wait_serving(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        async with self.channel() as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if not self.running:
                    raise AssertionError(f"replica {self.name} exited:\n{self.log_tail()}")
                with suppress(grpc.aio.AioRpcError):
                    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                await asyncio.sleep(0.1)
        raise AssertionError(f"replica {self.name} not SERVING after {timeout:.0f} s:\n{self.log_tail()}")

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await asyncio.to_thread(self.process.wait)

    async def stop(self) -> int:
        """SIGTERM, then the exit code once the replica has drained (SIGKILL past the timeout)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.process.wait, STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            await self.kill()
            raise AssertionError(f"replica {self.name} ignored SIGTERM:\n{self.log_tail()}") from None

    def served(self, method: str) -> int:
        """How many calls of `method` (e.g. "AddMessage") this life has answered, by its
        access log."""
        line = f'/{method}"'
        return sum(line in entry for entry in self.log_path.read_text(errors="replace").splitlines())

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Cluster:
    database_url: str
    replicas: list[Replica] = field(default_factory=list)

    def __getitem__(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def round_robin(self) -> grpc.aio.Channel:
        return round_robin_channel([r.port for r in self.replicas])

    async def serving(self) -> None:
        """Every replica up: a dead one (a previous test killed it) is started again."""
        for replica in self.replicas:
            if not replica.running:
                replica.start()
        await asyncio.gather(*(r.wait_serving() for r in self.replicas))

    async def kill_all(self) -> None:
        await asyncio.gather(*(r.kill() for r in self.replicas))


@contextmanager
def running_cluster(names: Sequence[str], workdir: Path) -> Iterator[Cluster]:
    """A throwaway database migrated once, and one replica per name on it; every process
    killed and the database dropped on the way out, whatever happened."""
    with throwaway_database() as database_url:
        migrate(database_url)
        cluster = Cluster(database_url)
        cluster.replicas = [Replica(n, free_port(), database_url, workdir) for n in names]
        try:
            asyncio.run(cluster.serving())
            yield cluster
        finally:
            asyncio.run(cluster.kill_all())


# --- the database -------------------------------------------------------------------------


@contextmanager
def throwaway_database() -> Iterator[str]:
    name = f"episodic_replicas_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def migrate(database_url: str) -> None:
    """`episodic migrate` once, as an operator would before starting the replicas."""
    command = (sys.executable, "-m", "episodic", "migrate", "--database-url", database_url)
    done = subprocess.run(
        command, capture_output=True, env=clean_environment(), timeout=MIGRATE_TIMEOUT_SECONDS, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
