"""One tenant's hostile compactions do not take the server from another tenant: while tenant
A (another process, see hostile_tenant.py) hammers BuildContext over 256 KiB unpunctuated,
self-repeating messages with short deadlines, cancels and retries, the compactions run only in
the server's bounded summary pool, the ones nobody waits for any more are cancelled, and every
BuildContext of tenant B is answered.

Only structure is checked here. How much A's attack slows B down (B's p99 attacked over idle)
is a figure of the machine as much as of the server: `scripts/hostile_compaction_isolation.py`
prints it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import grpc
import pytest

from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.bootstrap.wiring import SUMMARY_THREADS
from episodic.service.compaction import SharedCompactions
from tests.chaos.attacker import Attacker, attacker, attacking, b_turn, tiny_episode
from tests.chaos.hostile_tenant import EPISODES_PER_WORKER, WORKERS
from tests.e2e.helpers import Client
from tests.server_harness import KEY_B, settings_for

P = ParamSpec("P")
T = TypeVar("T")

B_CALLS_PER_ROUND = 150
MIN_ROUNDS, MAX_ROUNDS = 2, 8  # rounds of attack, more only until A's attack has compacted
A_CONVERSATIONS = WORKERS * EPISODES_PER_WORKER
DRAIN_TIMEOUT_SECONDS = 30.0  # hang guard: a compaction of A's takes tens of milliseconds


class WatchedPool(Executor):
    """The server's summary pool, watched: which threads run the compactions, how many at
    once, and what became of each one submitted."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._active = 0
        self._in_flight = 0
        self.most_at_once = 0  # running
        self.most_in_flight = 0  # queued or running
        self.threads: set[str] = set()
        self.submitted: list[Future[Any]] = []

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        future = self._pool.submit(self._run, fn, *args, **kwargs)
        self.submitted.append(future)
        future.add_done_callback(self._settled)  # run, failed or cancelled before it started
        return future

    def _settled(self, _: Future[Any]) -> None:
        with self._lock:
            self._in_flight -= 1

    def _run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self._lock:
            self._active += 1
            self.most_at_once = max(self.most_at_once, self._active)
            self.threads.add(threading.current_thread().name)
        try:
            return fn(*args, **kwargs)
        finally:
            with self._lock:
                self._active -= 1

    def ran(self) -> int:
        return sum(f.done() and not f.cancelled() for f in self.submitted)


@dataclass
class Attack:
    """What one attack left behind, for the tests to check."""

    b_answers: list[str]  # model_call_id of each of B's calls made while A attacked
    pool: WatchedPool
    compactions: SharedCompactions
    tally: dict[str, object]


@asynccontextmanager
async def watched_server(database_url: str) -> AsyncIterator[tuple[str, SharedCompactions, WatchedPool]]:
    """An in-process server whose inline compactions go through a WatchedPool."""
    settings = settings_for(database_url, migrate_on_start=True)
    async with open_app(settings) as app, serve_app(app, grace_seconds=1) as grpc_server:
        compactions = app.services.context.compaction.inline
        pool = WatchedPool(compactions.pool)
        compactions.pool = pool
        yield f"127.0.0.1:{grpc_server.port}", compactions, pool


async def b_calls(client: Client, episode_id: str, count: int) -> list[str]:
    """B's calls one after another; each must be answered in full (its report last)."""
    return [(await b_turn(client, episode_id)).report.model_call_id for _ in range(count)]


async def rounds_of_attack(a: Attacker, client: Client, episode_id: str, pool: WatchedPool) -> list[str]:
    """B calls while A attacks, in rounds, at least MIN_ROUNDS and until the pool has run
    compactions of A's (the first two rounds do, on any machine seen so far)."""
    answers: list[str] = []
    for done in range(1, MAX_ROUNDS + 1):
        async with attacking(a):
            answers += await b_calls(client, episode_id, B_CALLS_PER_ROUND)
        if done >= MIN_ROUNDS and pool.ran():
            break
    return answers


async def until_drained(compactions: SharedCompactions, pool: WatchedPool) -> None:
    async def drained() -> None:
        while compactions.running() or not all(f.done() for f in pool.submitted):  # noqa: ASYNC110 - a thread pool's futures
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(drained(), DRAIN_TIMEOUT_SECONDS)
    except TimeoutError:
        raise AssertionError(
            f"compactions still queued or running {DRAIN_TIMEOUT_SECONDS} s after A"
        ) from None


async def attack(database_url: str) -> Attack:
    async with watched_server(database_url) as (address, compactions, pool), attacker(address) as a:
        async with grpc.aio.insecure_channel(address) as channel:
            tenant_b = Client.of(channel, KEY_B)
            episode_id = await tiny_episode(tenant_b)
            await b_calls(tenant_b, episode_id, 30)  # warm-up
            answers = await rounds_of_attack(a, tenant_b, episode_id, pool)
        tally = await a.stop()
        await until_drained(compactions, pool)
        return Attack(answers, pool, compactions, tally)


@pytest.fixture(scope="module")
def attack_on_b(tmp_path_factory: pytest.TempPathFactory) -> Attack:
    """One attack, its own event loop and server, shared by the checks below."""
    url = f"sqlite:///{tmp_path_factory.mktemp('isolation') / 'episodic.db'}"
    return asyncio.run(attack(url))


def test_every_call_of_tenant_b_is_answered_while_tenant_a_attacks(attack_on_b: Attack) -> None:
    answers = attack_on_b.b_answers
    assert len(answers) >= MIN_ROUNDS * B_CALLS_PER_ROUND
    assert all(answers) and len(set(answers)) == len(answers), "each call recorded its own model call"


def test_tenant_a_gets_answers_deadlines_and_cancellations_and_no_other_error(attack_on_b: Attack) -> None:
    tally = attack_on_b.tally
    assert tally["completed"] and (tally["deadline_exceeded"] or tally["cancelled"]), tally
    assert tally["other_errors"] == [], tally


def test_hostile_compactions_run_only_in_the_bounded_summary_pool(attack_on_b: Attack) -> None:
    pool = attack_on_b.pool
    assert pool.ran() > 0, "A's attack compacted"
    assert all(name.startswith("episodic-summary") for name in pool.threads), pool.threads
    assert len(pool.threads) <= SUMMARY_THREADS and pool.most_at_once <= SUMMARY_THREADS


def test_abandoned_calls_queue_at_most_one_compaction_per_conversation_and_leave_none_behind(
    attack_on_b: Attack,
) -> None:
    """A gives up on most of its calls and retries: a retry joins the compaction its abandoned
    call started instead of queueing another, so the queue never outgrows A's conversations;
    once A is gone, nothing of its is left queued or running."""
    pool, compactions = attack_on_b.pool, attack_on_b.compactions
    assert attack_on_b.tally["deadline_exceeded"] or attack_on_b.tally["cancelled"]
    assert 0 < pool.most_in_flight <= A_CONVERSATIONS, pool.most_in_flight
    assert compactions.running() == 0 and all(f.done() for f in pool.submitted)
