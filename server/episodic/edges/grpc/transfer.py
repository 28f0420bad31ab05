"""ExportUser / ImportUser on the wire: chunks and manifests <-> proto. No decisions here."""

from __future__ import annotations

from collections.abc import AsyncIterator

from episodic.domain.transfer import Manifest, Part
from episodic.edges.grpc.convert import time_in, time_out
from episodic.edges.grpc.interceptors import current_caller
from episodic.errors import FailedPrecondition, InvalidArgument
from episodic.service.transfer import Chunk, TransferService
from episodic.v1 import episode_service_pb2 as pb


def required(service: TransferService | None) -> TransferService:
    if service is None:
        raise FailedPrecondition("export and import need the SQL store", reason="TRANSFER_UNAVAILABLE")
    return service


async def export_user(
    service: TransferService, request: pb.ExportUserRequest
) -> AsyncIterator[pb.ExportUserResponse]:
    async for chunk in service.export_user(current_caller(), request.user_id, request.agent_id):
        out = pb.ExportUserResponse(part=chunk.part, records=chunk.records)
        if chunk.manifest is not None:
            out.manifest.CopyFrom(manifest_out(chunk.manifest))
        yield out


async def import_user(
    service: TransferService, requests: AsyncIterator[pb.ImportUserRequest]
) -> pb.ImportUserResponse:
    first = _decoded(await anext(requests, None))
    if first is None or not first.HasField("manifest"):
        raise InvalidArgument.of("manifest", "the first request must carry the export's manifest")

    async def chunks() -> AsyncIterator[Chunk]:
        if first.records:
            yield Chunk(first.part, list(first.records))
        async for each in requests:
            request = _decoded(each)
            if request is None or request.HasField("manifest") or request.user_id:
                raise InvalidArgument.of(
                    "manifest", "only the first request carries the manifest and user_id"
                )
            yield Chunk(request.part, list(request.records))

    tally = await service.import_user(current_caller(), manifest_in(first.manifest), first.user_id, chunks())
    return pb.ImportUserResponse(
        episodes_imported=tally.episodes_imported,
        episodes_unchanged=tally.episodes_unchanged,
        messages_imported=tally.messages_imported,
        memories_imported=tally.memories_imported,
        memories_unchanged=tally.memories_unchanged,
        model_calls_imported=tally.model_calls_imported,
        digests_pending=tally.digests_pending,
    )


def _decoded(request: object) -> pb.ImportUserRequest | None:
    """A request the deserializer could not decode arrives as a marker, not a message."""
    if request is None or isinstance(request, pb.ImportUserRequest):
        return request
    raise InvalidArgument.of("request", "is not a valid ImportUserRequest")


def manifest_out(m: Manifest) -> pb.ExportManifest:
    return pb.ExportManifest(
        format=m.format,
        version=m.version,
        export_time=time_out(m.exported_at),
        user_id=m.user_id,
        agent_id=m.agent_id,
        parts=[pb.ExportPart(name=p.name, records=p.records, sha256=p.sha256) for p in m.parts],
    )


def manifest_in(m: pb.ExportManifest) -> Manifest:
    return Manifest(
        user_id=m.user_id,
        agent_id=m.agent_id,
        exported_at=time_in(m.export_time, "manifest.export_time"),
        parts=tuple(Part(p.name, p.records, p.sha256) for p in m.parts),
        format=m.format,
        version=m.version,
    )
