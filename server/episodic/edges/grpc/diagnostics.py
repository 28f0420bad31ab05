"""DiagnosticsService servicer: the trivial Echo the benchmarks use as their baseline, and
CheckIndex, the operator's comparison of the vector index with SQL."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc

from episodic.edges.grpc.interceptors import current_caller
from episodic.errors import InvalidArgument
from episodic.service.index_check import IndexChecker, IndexState
from episodic.v1 import diagnostics_service_pb2 as pb
from episodic.v1 import diagnostics_service_pb2_grpc as pb_grpc

MAX_ECHO_BYTES = 64 * 1024
STATES = {  # domain -> proto number
    IndexState.CONSISTENT: pb.CHECK_INDEX_STATUS_CONSISTENT,
    IndexState.DRIFTED: pb.CHECK_INDEX_STATUS_DRIFTED,
}
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class DiagnosticsServicer(pb_grpc.DiagnosticsServiceServicer):
    def __init__(self, index_checker: IndexChecker, knowledge_checker: IndexChecker) -> None:
        self._index_checker = index_checker
        self._knowledge_checker = knowledge_checker

    async def Echo(self, request: pb.EchoRequest, context: Context) -> pb.EchoResponse:
        if len(request.payload) > MAX_ECHO_BYTES:
            raise InvalidArgument.of("payload", f"is over the limit of {MAX_ECHO_BYTES} bytes")
        return pb.EchoResponse(payload=request.payload)

    async def CheckIndex(self, request: pb.CheckIndexRequest, context: Context) -> pb.CheckIndexResponse:
        report = await self._index_checker.check(current_caller(), request.agent_id)
        knowledge = await self._knowledge_checker.check(current_caller(), request.agent_id)
        return pb.CheckIndexResponse(
            sql_vectors=report.sql_vectors,
            index_vectors=report.index_vectors,
            missing=report.missing,
            orphaned=report.orphaned,
            missing_keys=report.missing_keys,
            orphaned_keys=report.orphaned_keys,
            knowledge_sql_vectors=knowledge.sql_vectors,
            knowledge_index_vectors=knowledge.index_vectors,
            knowledge_missing=knowledge.missing,
            knowledge_orphaned=knowledge.orphaned,
            knowledge_missing_keys=knowledge.missing_keys,
            knowledge_orphaned_keys=knowledge.orphaned_keys,
            status=STATES[IndexState.of(report, knowledge)],
        )
