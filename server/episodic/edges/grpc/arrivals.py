"""When calls last reached us, so a shutdown lets in the calls already sent before it stops.

gRPC's transport takes a call as soon as its headers arrive, but asyncio's server asks for
the next call of a method only once it has handled the last one's arrival, as the event loop
gets to it. Calls the transport holds when the server stops were never handed to us, and gRPC
cancels them (CANCELLED, which a client must not retry). Waiting until arrivals go quiet lets
the loop take them first; the stop then lets them finish like any call in flight."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from episodic.edges.grpc.interceptors import Continuation

QUIET_SECONDS = 0.1  # the loop takes a waiting call within a millisecond when free
MAX_SETTLE_SECONDS = 1.0  # callers that keep sending are refused by the stop after this


class Arrivals:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock, self._sleep = clock, sleep
        self.last = clock()

    def note(self) -> None:
        self.last = self._clock()

    async def settle(self, quiet: float = QUIET_SECONDS, cap: float = MAX_SETTLE_SECONDS) -> None:
        """Returns once no call has arrived for `quiet` seconds, or after `cap` seconds."""
        deadline = self._clock() + cap
        while (wait := min(self.last + quiet, deadline) - self._clock()) > 0:
            await self._sleep(wait)


class ArrivalInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Outermost: every call that arrives is noted, whatever happens to it after."""

    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        self._arrivals.note()
        return await continuation(details)
