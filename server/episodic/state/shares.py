"""The counters behind each tenant's share of this server (domain/shares.py says what a
share is). One object, on the event loop's thread: every RPC is admitted here, runs when
it has a turn, and gives everything back when gRPC ends it. A tenant's counters never look
at another tenant's, so one tenant's flood refuses only that tenant; the turns are the
server's, shared fairly: a quiet tenant's call runs next, not after a busy tenant's line."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import NoReturn

from episodic.domain.shares import OverShare, Share, ShareLimits, TokenBucket
from episodic.errors import AtCapacity

# A refusal names when to retry: at least this long, so a client that honours it backs off.
MIN_RETRY_SECONDS = 0.05
# How long a call refused for holding too much is told to wait (nothing but time frees it).
HELD_RETRY_SECONDS = 1.0
# A call over its tenant's rate waits for its token when that comes within this long
# (holding no CPU), and is refused beyond: a client that retries at once is slowed to the
# rate instead of spinning on refusals.
MAX_RATE_WAIT_SECONDS = 1.0
# A refusal is answered after a hold of its retry delay, at most this long: a client that
# retries at once then comes back about once a second per call it keeps in flight, instead
# of turning refusals into a flood of their own.
MAX_REFUSAL_HOLD_SECONDS = 1.0


@dataclass(slots=True)
class _Tenant:
    rate: TokenBucket
    memory: TokenBucket
    chunks: TokenBucket
    imports: TokenBucket
    rpcs: int = 0
    streams: int = 0
    active: int = 0
    unsent: int = 0
    holding: int = 0  # refusals being held before they are answered
    import_held: int = 0  # bytes of import parts received, not yet written
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)
    served: int = 0  # when it last started a turn (TenantShares' count of turns started)

    def idle(self, now: float) -> bool:
        held = self.rpcs or self.streams or self.active or self.unsent or self.waiting or self.holding
        held = held or self.import_held
        full = self.rate.full_at(now) and self.memory.full_at(now) and self.chunks.full_at(now)
        return not held and full and self.imports.full_at(now)


@dataclass(slots=True)
class Admission:
    """One admitted RPC, to run after `delay`; `release` (idempotent) gives its counts back."""

    shares: TenantShares
    tenant_id: str
    stream: bool
    delay: float = 0.0  # seconds to wait for the tenant's rate before running
    unsent: int = 0
    released: bool = False

    async def wait_for_rate(self) -> None:
        """Waits for the call's token of its tenant's rate (holding no CPU)."""
        if self.delay:
            await asyncio.sleep(self.delay)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.shares.give_back(self)


@dataclass(slots=True)
class ImportMeter:
    """Implements the `ImportMeter` port: the bytes one import holds now."""

    shares: TenantShares
    tenant_id: str
    held: int = 0

    async def received(self, size: int) -> None:
        wait = self.shares.import_received(self, size)
        if wait:
            await asyncio.sleep(wait)  # the tenant's import rate: slowed, holding no CPU

    def written(self) -> None:
        self.shares.import_written(self)


class TenantShares:
    def __init__(self, limits: ShareLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._tenants: dict[str, _Tenant] = {}
        self._in_flight = 0
        self._running = 0  # turns running, all tenants'
        self._busy: dict[str, _Tenant] = {}  # tenants running a turn or waiting for one
        self._served = itertools.count(1)

    # -- admission -------------------------------------------------------------------------

    def admit(self, tenant_id: str, *, stream: bool, cost: float = 1.0) -> Admission:
        """Counts a new RPC in, or raises OverShare (nothing counted). `cost`: the call's
        tokens of the tenant's rate (a costly call, like an erasure, spends several)."""
        limits, tenant = self.limits, self._tenant(tenant_id)
        if tenant.rpcs >= limits.rpcs:
            self._refuse(Share.RPCS, limits.rpcs, HELD_RETRY_SECONDS)
        if stream and tenant.streams >= limits.streams:
            self._refuse(Share.STREAMS, limits.streams, HELD_RETRY_SECONDS)
        if self._in_flight >= limits.server_rpcs:
            self._refuse(Share.SERVER_RPCS, limits.server_rpcs, HELD_RETRY_SECONDS)
        wait = tenant.rate.reserve(cost, self._clock(), MAX_RATE_WAIT_SECONDS)
        if wait > MAX_RATE_WAIT_SECONDS:
            self._refuse(Share.RATE, limits.rate_per_second, wait - MAX_RATE_WAIT_SECONDS)
        tenant.rpcs += 1
        tenant.streams += stream
        self._in_flight += 1
        return Admission(self, tenant_id, stream, delay=wait)

    def give_back(self, admission: Admission) -> None:
        tenant = self._tenants.get(admission.tenant_id)
        if tenant is None:
            return
        tenant.rpcs -= 1
        tenant.streams -= admission.stream
        tenant.unsent -= admission.unsent
        self._in_flight -= 1
        self._forget_if_idle(admission.tenant_id, tenant)

    # -- turns: how many calls run at once, shared fairly between tenants ------------------

    @asynccontextmanager
    async def turn(self, tenant_id: str) -> AsyncIterator[None]:
        """Runs the block on one of the server's turns; until then the call waits in its
        tenant's line (first come, first served within the tenant), holding no CPU. A
        cancelled wait leaves the line. See `_may_start` for who may run, `_next_in_line`
        for who runs next."""
        tenant = self._tenant(tenant_id)
        if not tenant.waiting and self._may_start(tenant_id, tenant):
            self._start(tenant_id, tenant)
        else:
            await self._wait_for_turn(tenant_id, tenant)
        try:
            yield
        finally:
            self._pass_turn(tenant_id, tenant)

    def _may_start(self, tenant_id: str, tenant: _Tenant) -> bool:
        """A tenant runs at most `active` calls at once, and the server as many in all while
        tenants contend, each then held to its fair part of them: one below that part starts
        at once, however many of the server's turns another tenant holds (it is never kept
        waiting by another tenant's calls), and one at or above it waits until the server
        has a turn free. A tenant alone has all of them."""
        turns = self.limits.active
        if tenant.active >= turns:
            return False
        contending = len(self._busy) + (tenant_id not in self._busy)
        return self._running < turns or tenant.active < max(1, turns // contending)

    def _start(self, tenant_id: str, tenant: _Tenant) -> None:
        tenant.active += 1
        tenant.served = next(self._served)
        self._running += 1
        self._busy[tenant_id] = tenant

    async def _wait_for_turn(self, tenant_id: str, tenant: _Tenant) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tenant.waiting.append(ready)
        self._busy[tenant_id] = tenant
        try:
            await ready  # the turn is handed over already counted (see _hand_on)
        except asyncio.CancelledError:
            if ready.done() and not ready.cancelled():
                self._pass_turn(tenant_id, tenant)  # handed a turn just as it was cancelled: give it on
            else:
                if ready in tenant.waiting:  # a turn passed on meanwhile took it off the line already
                    tenant.waiting.remove(ready)
                self._settle(tenant_id, tenant)
            raise

    def _pass_turn(self, tenant_id: str, tenant: _Tenant) -> None:
        tenant.active -= 1
        self._running -= 1
        self._settle(tenant_id, tenant)
        self._forget_if_idle(tenant_id, tenant)

    def _settle(self, tenant_id: str, tenant: _Tenant) -> None:
        """A tenant's turn or place in line ended: it stops contending once it has neither
        (the others' fair parts grow), and the turns free now are handed on."""
        if not tenant.active and not tenant.waiting:
            self._busy.pop(tenant_id, None)
        self._hand_on()

    def _hand_on(self) -> None:
        while (chosen := self._next_in_line()) is not None:
            tenant_id, tenant = chosen
            ready = tenant.waiting.popleft()
            if not ready.done():  # else cancelled: it leaves the line by itself
                self._start(tenant_id, tenant)
                ready.set_result(None)
            elif not tenant.active and not tenant.waiting:
                self._busy.pop(tenant_id, None)

    def _next_in_line(self) -> tuple[str, _Tenant] | None:
        """Of the tenants with calls waiting that may start one, the one running fewest, then
        the one served least recently: a quiet tenant's call goes before a busy tenant's
        line, whoever came first."""
        startable = [
            (tenant.active, tenant.served, tenant_id)
            for tenant_id, tenant in self._busy.items()
            if tenant.waiting and self._may_start(tenant_id, tenant)
        ]
        if not startable:
            return None
        tenant_id = min(startable)[2]
        return tenant_id, self._busy[tenant_id]

    # -- bytes held for a client that has not read them yet ----------------------------------

    def hold_unsent(self, admission: Admission, size: int) -> None:
        """Counts `size` more bytes of the call's responses as unsent, or raises OverShare."""
        tenant = self._tenant(admission.tenant_id)
        if tenant.unsent + size > self.limits.unsent_bytes:
            self._refuse(Share.UNSENT, self.limits.unsent_bytes, HELD_RETRY_SECONDS)
        tenant.unsent += size
        admission.unsent += size

    def sent(self, admission: Admission) -> None:
        """The call's responses so far have been taken by the transport."""
        tenant = self._tenants.get(admission.tenant_id)
        if tenant is not None and not admission.released:
            tenant.unsent -= admission.unsent
        admission.unsent = 0

    # -- writes that cost more than a call ---------------------------------------------------

    def write_memories(self, tenant_id: str, count: int) -> None:
        """Spends `count` memory writes of the tenant's share, or raises OverShare."""
        wait = self._tenant(tenant_id).memory.reserve(count, self._clock(), 0.0)
        if wait > 0:
            self._refuse(Share.MEMORY_WRITES, self.limits.memory_writes_per_second, wait)

    def write_chunks(self, tenant_id: str, count: int) -> None:
        """Spends `count` document chunks of the tenant's share, or raises OverShare."""
        wait = self._tenant(tenant_id).chunks.reserve(count, self._clock(), 0.0)
        if wait > 0:
            self._refuse(Share.KNOWLEDGE_CHUNKS, self.limits.knowledge_chunks_per_second, wait)

    # -- imports: bytes per second, and bytes held at once -----------------------------------

    @asynccontextmanager
    async def importing(self, tenant_id: str) -> AsyncIterator[ImportMeter]:
        """Implements the `ImportQuota` port: one import's meter; what it holds is given back
        when the import ends, however it ends."""
        meter = ImportMeter(self, tenant_id)
        try:
            yield meter
        finally:
            meter.written()

    def import_received(self, meter: ImportMeter, size: int) -> float:
        """Counts `size` bytes in as held and spends them of the tenant's import rate: the
        seconds to wait for them (at most MAX_RATE_WAIT_SECONDS), or raises OverShare
        (nothing counted)."""
        limits, tenant = self.limits, self._tenant(meter.tenant_id)
        if tenant.import_held + size > limits.import_held_bytes:
            self._refuse(Share.IMPORT_HELD, limits.import_held_bytes, HELD_RETRY_SECONDS)
        wait = tenant.imports.reserve(size, self._clock(), MAX_RATE_WAIT_SECONDS)
        if wait > MAX_RATE_WAIT_SECONDS:
            self._refuse(Share.IMPORT_BYTES, limits.import_bytes_per_second, wait - MAX_RATE_WAIT_SECONDS)
        tenant.import_held += size
        meter.held += size
        return wait

    def import_written(self, meter: ImportMeter) -> None:
        tenant = self._tenants.get(meter.tenant_id)
        if tenant is not None:
            tenant.import_held -= meter.held
            self._forget_if_idle(meter.tenant_id, tenant)
        meter.held = 0

    def import_held(self, tenant_id: str) -> int:
        tenant = self._tenants.get(tenant_id)
        return tenant.import_held if tenant is not None else 0

    # -- refusals ---------------------------------------------------------------------------

    async def hold(self, tenant_id: str, refusal: AtCapacity) -> None:
        """Waits before `refusal` is answered (an OverShare's retry delay, at most a second;
        any other refusal for capacity, a second), and takes that wait off the delay an
        OverShare names. Held refusals are bounded like calls in flight: past the tenant's
        rpcs share they are answered at once."""
        tenant = self._tenant(tenant_id)
        if tenant.holding >= self.limits.rpcs:
            return
        wait = refusal.retry_after if isinstance(refusal, OverShare) else MAX_REFUSAL_HOLD_SECONDS
        held = min(wait, MAX_REFUSAL_HOLD_SECONDS)
        tenant.holding += 1
        try:
            await asyncio.sleep(held)
        finally:
            tenant.holding -= 1
            self._forget_if_idle(tenant_id, tenant)
        if isinstance(refusal, OverShare):
            refusal.retry_after = max(MIN_RETRY_SECONDS, refusal.retry_after - held)

    @asynccontextmanager
    async def serving(self, tenant_id: str) -> AsyncIterator[None]:
        """One call of an edge without streams (MCP, the inspector), as the gRPC interceptor
        serves a unary call: admitted, after its rate's wait, on one of its tenant's turns;
        a refusal for capacity, here or inside, is held before it is answered."""
        try:
            admission = self.admit(tenant_id, stream=False)
            try:
                await admission.wait_for_rate()
                async with self.turn(tenant_id):
                    yield
            finally:
                admission.release()
        except AtCapacity as refusal:
            await self.hold(tenant_id, refusal)
            raise

    # -- bookkeeping -------------------------------------------------------------------------

    def _tenant(self, tenant_id: str) -> _Tenant:
        tenant = self._tenants.get(tenant_id)
        if tenant is None:
            now, limits = self._clock(), self.limits
            tenant = self._tenants[tenant_id] = _Tenant(
                TokenBucket.full(limits.rate_per_second, limits.rate_burst, now),
                TokenBucket.full(limits.memory_writes_per_second, limits.memory_writes_burst, now),
                TokenBucket.full(limits.knowledge_chunks_per_second, limits.knowledge_chunks_burst, now),
                TokenBucket.full(limits.import_bytes_per_second, limits.import_bytes_burst, now),
            )
        return tenant

    def _forget_if_idle(self, tenant_id: str, tenant: _Tenant) -> None:
        """Tenants are forgotten once idle with full buckets, so the map stays as small as
        the set of tenants calling now (forgetting a full bucket changes nothing)."""
        if tenant.idle(self._clock()):
            self._tenants.pop(tenant_id, None)

    @staticmethod
    def _refuse(share: Share, limit: float, retry_after: float) -> NoReturn:
        delay = MIN_RETRY_SECONDS if math.isinf(retry_after) else max(MIN_RETRY_SECONDS, retry_after)
        raise OverShare(share, limit, delay)

    def in_flight(self, tenant_id: str) -> int:
        tenant = self._tenants.get(tenant_id)
        return tenant.rpcs if tenant is not None else 0
