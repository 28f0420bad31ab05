"""Wrapping the behaviour of a grpc.aio method handler, for interceptors that need to run
code around the servicer method itself (grpc.aio interceptors otherwise only see the
method name)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc

Unary: TypeAlias = "Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]"
Streaming: TypeAlias = "Callable[[Any, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Any]]"
Deserializer = Callable[[bytes], Any]


def wrap_handler(
    handler: grpc.RpcMethodHandler[Any, Any],
    unary: Callable[[Unary], Unary],
    streaming: Callable[[Streaming], Streaming],
    deserializer: Callable[[Deserializer], Deserializer] | None = None,
) -> grpc.RpcMethodHandler[Any, Any]:
    """Returns `handler` with its behaviour wrapped: unary-unary and stream-unary (whose
    request is an iterator of requests) by `unary`, unary-stream by `streaming`."""
    decode = handler.request_deserializer
    if deserializer is not None and decode is not None:
        decode = deserializer(decode)
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            unary(handler.unary_unary),  # type: ignore[arg-type]  # stubs type only sync handlers
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            streaming(handler.unary_stream),  # type: ignore[arg-type]
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            unary(handler.stream_unary),  # type: ignore[arg-type]
            request_deserializer=decode,
            response_serializer=handler.response_serializer,
        )
    return handler  # bidirectional streams are not used by this service
