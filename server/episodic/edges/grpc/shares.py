"""The share interceptor: every authenticated RPC is admitted against its tenant's share
(state/shares.py), runs on one of its tenant's turns, and counts its responses as unsent
until the transport has taken them. Health, reflection and Echo are never refused for
capacity: they are how operators and balancers tell a busy server from a dead one."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, NoReturn

import grpc

from episodic.domain.shares import OverShare, Share
from episodic.edges.grpc.handlers import Streaming, Unary, wrap_handler
from episodic.edges.grpc.interceptors import OPEN_METHOD_PREFIXES, Continuation, current_caller
from episodic.errors import AtCapacity
from episodic.state.shares import Admission, TenantShares

UNMETERED = (*OPEN_METHOD_PREFIXES, "/episodic.v1.DiagnosticsService/Echo")
# Streams that mostly wait (for the episode's next event): they hold no turn while waiting.
WAITING_STREAMS = frozenset({"/episodic.v1.EpisodeService/WatchEpisode"})
Refused = Callable[[Share, str], None]  # (share, tenant id): counted by metrics
# Calls that cost far more than most spend more of their tenant's rate: an erasure counts,
# deletes, audits and writes the change feed in one transaction (~10 ms of the server each);
# deleting an agent may erase many users (each is an erasure), and is rare.
RATE_COST: dict[str, float] = {
    "/episodic.v1.EpisodeService/EraseUser": 20.0,
    "/episodic.v1.AgentService/DeleteAgent": 20.0,
}


class ShareInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Innermost, after authentication (it needs the caller's tenant). Refusals raised
    deeper down (watchers, memory writes) are counted here too."""

    def __init__(self, shares: TenantShares, refused: Refused | None = None) -> None:
        self._shares = shares
        self._refused: Refused = refused or (lambda _share, _tenant: None)

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None or details.method.startswith(UNMETERED):
            return handler
        shares, refused, waits = self._shares, self._refused, details.method in WAITING_STREAMS
        cost = RATE_COST.get(details.method, 1.0)
        return wrap_handler(
            handler,
            lambda i: _unary(shares, refused, i, cost),
            lambda i: _streaming(shares, refused, i, waits),
        )


async def _admit(
    shares: TenantShares, context: grpc.aio.ServicerContext[Any, Any], *, stream: bool, cost: float = 1.0
) -> Admission:
    admission = shares.admit(current_caller().tenant_id, stream=stream, cost=cost)
    # gRPC ends the call however it ends (done, cancelled, deadline): give the share back then
    context.add_done_callback(lambda _ended: admission.release())  # type: ignore[arg-type]
    await admission.wait_for_rate()
    return admission


def _unary(shares: TenantShares, refused: Refused, inner: Unary, cost: float) -> Unary:
    async def behaviour(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            admission = await _admit(shares, context, stream=False, cost=cost)
            async with shares.turn(admission.tenant_id):
                response = await inner(request, context)
            shares.hold_unsent(admission, response.ByteSize())  # until the call ends: sent or dropped
        except AtCapacity as exc:
            await _refuse(shares, refused, exc)
        return response

    return behaviour


def _streaming(shares: TenantShares, refused: Refused, inner: Streaming, waits: bool) -> Streaming:
    async def behaviour(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        try:
            admission = await _admit(shares, context, stream=True)
            async with aclosing(_metered(shares, admission, inner(request, context), waits)) as items:
                async for item in items:
                    yield item
        except AtCapacity as exc:
            await _refuse(shares, refused, exc)

    return behaviour


async def _refuse(shares: TenantShares, refused: Refused, refusal: AtCapacity) -> NoReturn:
    """Every refusal for capacity is held before it is answered; a share's is counted."""
    tenant_id = current_caller().tenant_id
    if isinstance(refusal, OverShare):
        refused(refusal.share, tenant_id)
    await shares.hold(tenant_id, refusal)
    raise refusal


async def _metered(
    shares: TenantShares, admission: Admission, produced: AsyncIterator[Any], waits: bool
) -> AsyncGenerator[Any, None]:
    """Each item is produced on one of the tenant's turns (a waiting stream holds none) and
    counted as unsent until the stream is resumed: gRPC resumes it once it wrote the item."""
    try:
        while True:
            shares.sent(admission)
            try:
                item = await _next(shares, admission, produced, waits)
            except StopAsyncIteration:
                return
            shares.hold_unsent(admission, item.ByteSize())
            yield item
    finally:
        await produced.aclose()  # type: ignore[attr-defined]  # an async generator


async def _next(shares: TenantShares, admission: Admission, produced: AsyncIterator[Any], waits: bool) -> Any:
    if waits:
        return await anext(produced)
    async with shares.turn(admission.tenant_id):
        return await anext(produced)
