"""The one table from domain errors to gRPC status codes, and the rich status built from
an error (google.rpc.ErrorInfo always, BadRequest field violations for bad input)."""

from __future__ import annotations

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from episodic import errors
from episodic.domain.shares import OverShare

DOMAIN = "episodic.v1"

STATUS_BY_ERROR: dict[type[errors.EpisodicError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Aborted: grpc.StatusCode.ABORTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
}
# Retryable errors carry a RetryInfo: how long a client should wait before trying again.
RETRY_DELAY_SECONDS: dict[type[errors.EpisodicError], int] = {
    errors.Unavailable: 1,
    errors.AtCapacity: 1,
    errors.ResourceExhausted: 5,
}


def status_code_for(error: errors.EpisodicError) -> grpc.StatusCode:
    """Most specific mapping along the MRO, so a subclass inherits its parent's code."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return grpc.StatusCode.INTERNAL


def rich_status(error: errors.EpisodicError) -> tuple[grpc.StatusCode, status_pb2.Status]:
    code = status_code_for(error)
    status = status_pb2.Status(code=code.value[0], message=error.message)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN))
    if isinstance(error, errors.InvalidArgument):
        status.details.add().Pack(_bad_request(error))
    if isinstance(error, OverShare):
        status.details.add().Pack(_quota_failure(error))
    delay = retry_delay_for(error)
    if delay is not None:
        retry = duration_pb2.Duration()
        retry.FromMilliseconds(max(1, round(delay * 1000)))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=retry))
    if isinstance(error, errors.NotFound):
        status.details.add().Pack(
            error_details_pb2.ResourceInfo(resource_type=error.kind, resource_name=error.resource_id)
        )
    return code, status


def retry_delay_for(error: errors.EpisodicError) -> float | None:
    if isinstance(error, OverShare):
        return error.retry_after  # when the share allows it again
    for cls in type(error).__mro__:
        if cls in RETRY_DELAY_SECONDS:
            return RETRY_DELAY_SECONDS[cls]
    return None


def internal_status() -> tuple[grpc.StatusCode, status_pb2.Status]:
    status = status_pb2.Status(code=code_pb2.INTERNAL, message="internal error; see server logs")
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="INTERNAL", domain=DOMAIN))
    return grpc.StatusCode.INTERNAL, status


def _quota_failure(error: OverShare) -> error_details_pb2.QuotaFailure:
    """Subject "tenant": the share is the calling tenant's own (its id is the caller's)."""
    violation = error_details_pb2.QuotaFailure.Violation(
        subject="tenant", description=error.message, quota_id=error.share.value, quota_value=int(error.limit)
    )
    return error_details_pb2.QuotaFailure(violations=[violation])


def _bad_request(error: errors.InvalidArgument) -> error_details_pb2.BadRequest:
    return error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
            for v in error.violations
        ]
    )
