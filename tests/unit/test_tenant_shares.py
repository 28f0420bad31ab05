"""Each tenant's share of the server: what one tenant spends never refuses another, a
refusal says which share and when to retry, and everything comes back when calls end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from episodic.domain.shares import OverShare, Share, ShareLimits, TokenBucket
from episodic.edges.grpc.shares import RATE_COST
from episodic.state import shares as state_shares
from episodic.state.shares import TenantShares


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def shares_with(clock: Clock | None = None, **limits: float) -> TenantShares:
    return TenantShares(ShareLimits(**limits), clock=clock or Clock())  # type: ignore[arg-type]


def refused(share: Share, call: Callable[[], object]) -> OverShare:
    with pytest.raises(OverShare) as caught:
        call()
    assert caught.value.share is share
    return caught.value


def test_a_tenant_over_its_rate_waits_for_its_token_then_is_refused_with_when_to_retry() -> None:
    clock = Clock()
    shares = shares_with(clock, rate_per_second=2, rate_burst=2)
    assert [shares.admit("a", stream=False).delay for _ in range(2)] == [0, 0]
    assert shares.admit("a", stream=False).delay == pytest.approx(0.5)  # waits, holding no CPU
    assert shares.admit("a", stream=False).delay == pytest.approx(1.0)
    error = refused(Share.RATE, lambda: shares.admit("a", stream=False))
    assert error.retry_after == pytest.approx(0.5)  # a wait past a second is refused instead
    assert shares.admit("b", stream=False).delay == 0  # b's bucket is its own
    clock.now += 1.0  # two tokens back: the two reserved ahead are paid, the bucket is empty
    assert shares.admit("a", stream=False).delay == pytest.approx(0.5)


def test_rpcs_in_flight_are_capped_per_tenant_and_come_back_when_calls_end() -> None:
    shares = shares_with(rpcs=2)
    held = [shares.admit("a", stream=False) for _ in range(2)]
    refused(Share.RPCS, lambda: shares.admit("a", stream=False))
    other = shares.admit("b", stream=False)
    held[0].release()
    held[0].release()  # idempotent: a second release gives nothing back twice
    shares.admit("a", stream=False)
    refused(Share.RPCS, lambda: shares.admit("a", stream=False))
    other.release()


def test_streams_have_their_own_cap_within_the_rpcs() -> None:
    shares = shares_with(streams=1)
    shares.admit("a", stream=True)
    refused(Share.STREAMS, lambda: shares.admit("a", stream=True))
    shares.admit("a", stream=False).release()  # unary calls still go through
    shares.admit("b", stream=True)


def test_the_server_wide_cap_is_a_safety_net_over_all_tenants() -> None:
    shares = shares_with(server_rpcs=2)
    shares.admit("a", stream=False)
    shares.admit("b", stream=False)
    refused(Share.SERVER_RPCS, lambda: shares.admit("c", stream=False))


def test_unsent_bytes_are_counted_until_sent_or_the_call_ends() -> None:
    shares = shares_with(unsent_bytes=100)
    first = shares.admit("a", stream=True)
    shares.hold_unsent(first, 60)
    second = shares.admit("a", stream=False)
    refused(Share.UNSENT, lambda: shares.hold_unsent(second, 50))
    other = shares.admit("b", stream=False)
    shares.hold_unsent(other, 100)  # b's bytes are b's
    shares.sent(first)
    shares.hold_unsent(second, 50)
    second.release()
    shares.hold_unsent(first, 100)


async def test_a_tenant_runs_at_most_its_active_share_and_the_rest_wait_in_order() -> None:
    shares = shares_with(active=2)
    order: list[int] = []
    gate = asyncio.Event()

    async def call(n: int) -> None:
        async with shares.turn("a"):
            order.append(n)
            await gate.wait()

    tasks = [asyncio.create_task(call(n)) for n in range(4)]
    await asyncio.sleep(0.01)
    assert order == [0, 1]
    async with shares.turn("b"):  # another tenant's turn is not taken by a's line
        pass
    gate.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3]


async def test_a_cancelled_wait_leaves_the_line_without_losing_a_turn() -> None:
    shares = shares_with(active=1)
    release = asyncio.Event()

    async def holder() -> None:
        async with shares.turn("a"):
            await release.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting.cancel()
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await waiting
    async with asyncio.timeout(1):
        async with shares.turn("a"):  # the turn is free again
            pass


def test_memory_writes_have_a_rate_of_their_own_and_a_big_batch_slows_the_next() -> None:
    clock = Clock()
    shares = shares_with(clock, memory_writes_per_second=10, memory_writes_burst=20)
    shares.write_memories("a", 50)  # more than the burst: allowed from a full bucket, in debt
    error = refused(Share.MEMORY_WRITES, lambda: shares.write_memories("a", 1))
    assert error.retry_after == pytest.approx(3.1)
    shares.write_memories("b", 20)


def test_document_chunks_have_a_rate_of_their_own_apart_from_memory_writes() -> None:
    clock = Clock()
    shares = shares_with(clock, knowledge_chunks_per_second=100, knowledge_chunks_burst=1000)
    shares.write_chunks("a", 1000)
    error = refused(Share.KNOWLEDGE_CHUNKS, lambda: shares.write_chunks("a", 50))
    assert error.retry_after == pytest.approx(0.5)
    shares.write_memories("a", 1)  # another share
    shares.write_chunks("b", 1000)  # another tenant
    clock.now = 0.5
    shares.write_chunks("a", 50)


def test_a_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = TokenBucket.full(rate=2, burst=4, now=0)
    assert bucket.reserve(4, now=0, max_wait=0) == 0
    assert bucket.reserve(1, now=0, max_wait=0) == pytest.approx(0.5)  # refused: nothing spent
    assert bucket.reserve(1, now=0.5, max_wait=0) == 0
    assert bucket.reserve(4, now=100, max_wait=0) == 0  # never more than the burst
    assert bucket.reserve(1, now=100, max_wait=1) == pytest.approx(0.5)  # reserved ahead
    assert bucket.reserve(1, now=100, max_wait=1) == pytest.approx(1.0)


async def test_a_refusal_is_held_before_it_is_answered_and_says_what_is_left_to_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(state_shares, "MAX_REFUSAL_HOLD_SECONDS", 0.05)
    shares = shares_with(rpcs=1)
    shares.admit("a", stream=False)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(OverShare) as refused:
        async with shares.serving("a"):
            pass
    assert loop.time() - started >= 0.05  # held: a client retrying at once is slowed
    assert refused.value.retry_after == pytest.approx(state_shares.HELD_RETRY_SECONDS - 0.05)
    async with shares.serving("b"):  # b is served at once
        pass


async def test_held_refusals_are_bounded_like_calls_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_shares, "MAX_REFUSAL_HOLD_SECONDS", 60.0)
    shares = shares_with(rpcs=2)
    for _ in range(2):
        shares.admit("a", stream=False)

    async def refused_call() -> None:
        async with shares.serving("a"):
            pass

    held = [asyncio.create_task(refused_call()) for _ in range(2)]
    await asyncio.sleep(0)
    async with asyncio.timeout(1):  # the third is answered at once: two are held already
        with pytest.raises(OverShare):
            await refused_call()
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)


def test_a_costly_call_spends_more_of_its_tenants_rate() -> None:
    shares = shares_with(rate_per_second=10, rate_burst=20)
    shares.admit("a", stream=False, cost=20).release()  # an erasure: the whole burst
    assert shares.admit("a", stream=False).delay == pytest.approx(0.1)
    assert RATE_COST["/episodic.v1.EpisodeService/EraseUser"] > 1


async def test_a_wait_cancelled_after_its_future_left_the_line_ends_cancelled_not_in_error() -> None:
    # A 1 ms deadline: the wait is cancelled, and the turn passes on before the waiter runs
    # again, taking the cancelled future off the line; the waiter must not remove it twice.
    shares = shares_with(active=1)

    async def waiter() -> None:
        async with shares.turn("a"):
            pass

    async with shares.turn("a"):
        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0)  # in line
        waiting.cancel()  # its future is cancelled now; the task runs later
    # leaving the turn passed it on: the cancelled future was taken off the line
    with pytest.raises(asyncio.CancelledError):
        await waiting
    async with asyncio.timeout(1):
        async with shares.turn("a"):  # nothing was lost
            pass
    assert shares.in_flight("a") == 0


class Calls:
    """Calls of several tenants, each on a turn until its own event is set."""

    def __init__(self, shares: TenantShares) -> None:
        self.shares = shares
        self.started: list[str] = []
        self.ends: dict[str, asyncio.Event] = {}
        self.tasks: list[asyncio.Task[None]] = []

    async def call(self, tenant_id: str, name: str) -> None:
        self.ends[name] = asyncio.Event()
        self.tasks.append(asyncio.create_task(self._run(tenant_id, name)))
        for _ in range(3):  # let it start, or take its place in line
            await asyncio.sleep(0)

    async def end(self, name: str) -> None:
        self.ends[name].set()
        for _ in range(3):
            await asyncio.sleep(0)

    async def _run(self, tenant_id: str, name: str) -> None:
        async with self.shares.turn(tenant_id):
            self.started.append(name)
            await self.ends[name].wait()


async def test_a_quiet_tenants_call_runs_at_once_and_a_busy_tenants_line_waits_for_free_turns() -> None:
    calls = Calls(shares_with(active=2))
    for name in ("a0", "a1", "a2", "a3"):
        await calls.call("a", name)
    assert calls.started == ["a0", "a1"]  # a tenant alone has all the server's turns
    await calls.call("b", "b0")
    assert calls.started == ["a0", "a1", "b0"]  # not after a's line
    await calls.end("a0")
    assert calls.started == ["a0", "a1", "b0"]  # a holds its fair part (1 of 2) while b runs
    await calls.end("b0")
    assert calls.started == ["a0", "a1", "b0", "a2"]  # b is done: a has them all again
    for name in ("a1", "a2", "a3"):
        await calls.end(name)
    await asyncio.gather(*calls.tasks)
    assert calls.started == ["a0", "a1", "b0", "a2", "a3"]


async def test_by_default_a_flooding_tenant_runs_two_calls_and_one_beside_another_tenants() -> None:
    """The default turns (issue 43, finding 9): every turn shares the one event loop, so what a
    flood runs beside a quiet tenant's call is what that call waits behind; 4 let it run 3."""
    calls = Calls(TenantShares(ShareLimits()))
    for name in ("a0", "a1", "a2", "a3"):
        await calls.call("a", name)
    assert calls.started == ["a0", "a1"]
    await calls.call("b", "b0")
    assert calls.started == ["a0", "a1", "b0"]  # at once
    await calls.end("a0")
    assert calls.started == ["a0", "a1", "b0"]  # a is held to one beside b's call
    await calls.end("b0")
    assert calls.started == ["a0", "a1", "b0", "a2"]
    for name in ("a1", "a2", "a3"):
        await calls.end(name)
    await asyncio.gather(*calls.tasks)


async def test_a_freed_turn_goes_to_the_tenant_running_fewest_not_to_the_first_in_line() -> None:
    calls = Calls(shares_with(active=2))
    for name in ("a0", "a1", "a2"):
        await calls.call("a", name)
    await calls.call("b", "b0")
    await calls.call("b", "b1")  # b is at its fair part (1 of 2): in line, after a2
    assert calls.started == ["a0", "a1", "b0"]
    await calls.end("a0")  # the server still runs its 2 turns (a1, b0): nobody starts
    assert calls.started == ["a0", "a1", "b0"]
    await calls.end("b0")  # a runs 1, b none: b's line goes first
    assert calls.started == ["a0", "a1", "b0", "b1"]
    for name in ("a1", "b1", "a2"):
        await calls.end(name)
    await asyncio.gather(*calls.tasks)
    assert calls.started == ["a0", "a1", "b0", "b1", "a2"]


async def test_a_tenant_never_waits_for_another_tenants_calls_below_its_fair_part_of_the_turns() -> None:
    calls = Calls(shares_with(active=2))
    await calls.call("a", "a0")
    await calls.call("b", "b0")
    await calls.call("c", "c0")  # three tenants, two turns: each may still run one
    assert calls.started == ["a0", "b0", "c0"]
    await calls.call("c", "c1")  # but not a second one while the server is past its turns
    assert calls.started == ["a0", "b0", "c0"]
    for name in ("a0", "b0"):
        await calls.end(name)
    assert calls.started == ["a0", "b0", "c0", "c1"]
    for name in ("c0", "c1"):
        await calls.end(name)
    await asyncio.gather(*calls.tasks)


# --- imports: bytes per second and bytes held at once ----------------------------------------


async def test_import_bytes_held_at_once_are_capped_per_tenant_across_its_imports() -> None:
    shares = shares_with(import_held_bytes=1000, import_bytes_burst=10_000)
    async with shares.importing("a") as first, shares.importing("a") as second:
        await first.received(600)
        with pytest.raises(OverShare) as caught:
            await second.received(500)  # 1,100 held at once: over a's share
        assert caught.value.share is Share.IMPORT_HELD and caught.value.limit == 1000
        async with shares.importing("b") as other:
            await other.received(900)  # b's share is its own
        await second.received(400)
        assert shares.import_held("a") == 1000
        first.written()  # its part is written: what it held is let go
        await second.received(500)
        assert shares.import_held("a") == 900
    assert shares.import_held("a") == 0  # the imports ended: nothing held


async def test_import_bytes_spend_a_tenants_rate_waiting_a_second_at_most_then_refused() -> None:
    clock = Clock()
    shares = shares_with(clock, import_bytes_per_second=100, import_bytes_burst=1000, import_held_bytes=10**9)
    async with shares.importing("a") as meter:
        await meter.received(1000)  # the burst
        assert shares.import_received(meter, 50) == pytest.approx(0.5)  # waits for its bytes
        with pytest.raises(OverShare) as caught:
            await meter.received(2000)  # a full burst is 10.5 s away: refused, nothing spent
        assert caught.value.share is Share.IMPORT_BYTES
        assert caught.value.retry_after == pytest.approx(10.5 - 1.0)
        assert shares.import_held("a") == 1050
    async with shares.importing("b") as other:
        await other.received(1000)  # b's bucket is its own
    clock.now += 100.0
    async with shares.importing("a") as meter:
        await meter.received(5000)  # more than the burst, from a full bucket: let through


def test_an_import_refused_for_its_rate_counts_nothing_held() -> None:
    shares = shares_with(import_bytes_per_second=1, import_bytes_burst=10, import_held_bytes=100)
    meter = state_shares.ImportMeter(shares, "a")
    shares.import_received(meter, 10)
    refused(Share.IMPORT_BYTES, lambda: shares.import_received(meter, 10))
    assert shares.import_held("a") == 10 and meter.held == 10
    meter.written()
    assert shares.import_held("a") == 0


def test_one_import_sending_its_requests_in_turn_is_slowed_to_the_rate_never_refused() -> None:
    """Each request waits for its own bytes (at most a second when a request is at most the
    rate's second of bytes), so only imports run at once can be refused for the rate."""
    clock = Clock()
    shares = shares_with(clock, import_bytes_per_second=100, import_bytes_burst=1000, import_held_bytes=10**9)
    meter = state_shares.ImportMeter(shares, "a")
    assert shares.import_received(meter, 1000) == 0  # the burst
    waited = 0.0
    for _ in range(50):
        wait = shares.import_received(meter, 100)
        assert wait <= 1.0
        clock.now += wait  # the request waits, then the next one comes
        waited += wait
    assert waited == pytest.approx(50.0)  # 5,000 bytes past the burst at 100 a second
    other = state_shares.ImportMeter(shares, "a")  # a second import at once: the wait doubles
    shares.import_received(meter, 100)
    refused(Share.IMPORT_BYTES, lambda: shares.import_received(other, 100))
