"""DiagnosticsService servicer: the trivial Echo the benchmarks use as their baseline."""

from __future__ import annotations

from typing import Any

import grpc

from episodic.errors import InvalidArgument
from episodic.v1 import diagnostics_service_pb2 as pb
from episodic.v1 import diagnostics_service_pb2_grpc as pb_grpc

MAX_ECHO_BYTES = 64 * 1024


class DiagnosticsServicer(pb_grpc.DiagnosticsServiceServicer):
    async def Echo(
        self, request: pb.EchoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.EchoResponse:
        if len(request.payload) > MAX_ECHO_BYTES:
            raise InvalidArgument.of("payload", f"is over the limit of {MAX_ECHO_BYTES} bytes")
        return pb.EchoResponse(payload=request.payload)
