"""Server interceptors: the error edge (one translation of errors to statuses, plus one
access-log line per RPC) and authentication (the caller's tenant from the bearer key)."""

from __future__ import annotations

import contextvars
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeAlias

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from episodic.domain.model import Caller
from episodic.edges.grpc.access_log import AccessLog, StatusName
from episodic.edges.grpc.handlers import Deserializer, Streaming, Unary, wrap_handler
from episodic.edges.grpc.status import internal_status, rich_status
from episodic.edges.keys import KeyRing
from episodic.errors import EpisodicError, InvalidArgument, Unauthenticated
from episodic.telemetry.tracing import current_trace_id

log = logging.getLogger("episodic.server")
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]]"
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("episodic_caller")
_UNDECODABLE = object()


def current_caller() -> Caller:
    """The authenticated caller of the RPC being served (set by AuthInterceptor)."""
    return _caller.get()


class ErrorInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Outermost: turns every error into a status exactly once and logs the outcome."""

    def __init__(self, access_log: AccessLog) -> None:
        self._access_log = access_log

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None:
            return handler
        method, access = details.method, self._access_log
        return wrap_handler(
            handler,
            lambda inner: _unary_edge(method, inner, access),
            lambda inner: _streaming_edge(method, inner, access),
            _tolerant,
        )


def _tolerant(decode: Deserializer) -> Deserializer:
    """An undecodable request becomes INVALID_ARGUMENT instead of grpc's INTERNAL."""

    def safe(data: bytes) -> Any:
        try:
            return decode(data)
        except Exception:  # protobuf raises DecodeError and, for deep nesting, others
            return _UNDECODABLE

    return safe


def _unary_edge(method: str, inner: Unary, access: AccessLog) -> Unary:
    async def behaviour(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        outcome = _Outcome.start(method, context, access)
        try:
            _check_open_decoded(method, request)
            response = await inner(request, context)
        except Exception as exc:
            outcome.code, status = _status_for(exc)
            outcome.reason = _reason(status)
            await _abort(context, outcome.code, status)
        outcome.finished = True
        return response

    return behaviour


def _streaming_edge(method: str, inner: Streaming, access: AccessLog) -> Streaming:
    async def behaviour(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        outcome = _Outcome.start(method, context, access)
        try:
            _check_open_decoded(method, request)
            produced = inner(request, context)
            if inspect.isawaitable(produced):  # a handler that writes through context.write
                await produced  # (grpc_health's Watch)
            else:
                async for item in produced:
                    yield item
        except Exception as exc:
            outcome.code, status = _status_for(exc)
            outcome.reason = _reason(status)
            await _abort(context, outcome.code, status)
        outcome.finished = True

    return behaviour


@dataclass(slots=True)
class _Outcome:
    """One access-log line per RPC, written when gRPC ends the call, whatever ended it: a
    client that cancels or a deadline that passes stops the handler mid-way (possibly while
    a stream waits to write), so the handler's own `finally` cannot be relied on."""

    method: str
    started: float
    peer: str
    trace_id: str
    code: grpc.StatusCode | None = None
    reason: str = ""  # the ErrorInfo reason of the status the call failed with
    finished: bool = False

    @classmethod
    def start(cls, method: str, context: grpc.aio.ServicerContext[Any, Any], access: AccessLog) -> _Outcome:
        # peer() after a cancel can crash grpc; the span is current only here, not in the callback
        outcome = cls(method, time.perf_counter(), context.peer(), current_trace_id())
        context.add_done_callback(lambda ended: outcome.record(ended, access))  # type: ignore[arg-type]
        return outcome

    def record(self, context: grpc.aio.ServicerContext[Any, Any], access: AccessLog) -> None:
        duration_ms = (time.perf_counter() - self.started) * 1000
        code = StatusName(self._final_code(context).name, self.reason)
        access.record(self.method, code, duration_ms, self.peer, self.trace_id)

    def _final_code(self, context: grpc.aio.ServicerContext[Any, Any]) -> grpc.StatusCode:
        if self.code is not None:
            return self.code
        if self.finished:
            return grpc.StatusCode.OK
        remaining = context.time_remaining()
        expired = remaining is not None and remaining <= _DEADLINE_SLACK_SECONDS
        return grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED


# The client's deadline runs from when it sent the call, the server's from when it arrived:
# a client gives up (and cancels) slightly before the server's own deadline passes.
_DEADLINE_SLACK_SECONDS = 0.25


def _check_decoded(request: Any) -> None:
    if request is _UNDECODABLE:
        raise InvalidArgument.of("request", "is not a valid protobuf message of the method's type")


def _check_open_decoded(method: str, request: Any) -> None:
    """Methods behind auth check decoding after authenticating (AuthInterceptor)."""
    if method.startswith(OPEN_METHOD_PREFIXES):
        _check_decoded(request)


def _status_for(exc: Exception) -> tuple[grpc.StatusCode, status_pb2.Status]:
    if isinstance(exc, grpc.aio.AbortError):
        raise exc
    if isinstance(exc, EpisodicError):
        return rich_status(exc)
    log.exception("unexpected error serving an RPC")
    return internal_status()


def _reason(status: status_pb2.Status) -> str:
    """The ErrorInfo reason the error table put on the status (a constant, not user text)."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return str(info.reason)
    return ""


async def _abort(
    context: grpc.aio.ServicerContext[Any, Any], code: grpc.StatusCode, status: status_pb2.Status
) -> NoReturn:
    context.set_code(code)  # so tracing interceptors see the failure (abort_with_status hides it)
    await context.abort_with_status(rpc_status.to_status(status))  # type: ignore[attr-defined]
    raise AssertionError("abort_with_status returned")


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Resolves the caller from `authorization: Bearer <key>`. In dev mode a request with
    no key at all is served as the dev tenant; a wrong key is still refused, so a typo
    never writes into the dev tenant. Health and reflection stay open."""

    def __init__(self, keys: KeyRing, dev_tenant: str | None) -> None:
        self._keys = keys
        self._dev = Caller(dev_tenant) if dev_tenant else None

    async def intercept_service(
        self, continuation: Continuation, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None or details.method.startswith(OPEN_METHOD_PREFIXES):
            return handler
        caller = self._caller(details.invocation_metadata or ())
        return wrap_handler(handler, lambda i: _as_caller(caller, i), lambda i: _stream_as(caller, i))

    def _caller(self, metadata: Any) -> Caller | None:
        token = _bearer(metadata)
        return self._keys.caller_for(token) if token else self._dev


def _bearer(metadata: Any) -> str:
    for key, value in metadata:
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


def _require(caller: Caller | None) -> Caller:
    if caller is None:
        raise Unauthenticated(
            "missing or unknown API key: send 'authorization: Bearer <key>'", reason="API_KEY_INVALID"
        )
    return caller


def _as_caller(caller: Caller | None, inner: Unary) -> Unary:
    async def behaviour(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        _caller.set(_require(caller))
        _check_decoded(request)
        return await inner(request, context)

    return behaviour


def _stream_as(caller: Caller | None, inner: Streaming) -> Streaming:
    async def behaviour(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        _caller.set(_require(caller))
        _check_decoded(request)
        async for item in inner(request, context):
            yield item

    return behaviour
