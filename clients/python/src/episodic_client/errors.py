"""The client's exception tree, and the one translation from `grpc.RpcError` into it.

    EpisodicClientError            any failed RPC; codes without a subclass land here
    ├── InvalidArgumentError       field_violations names every wrong field
    ├── NotFoundError
    ├── AlreadyExistsError
    ├── FailedPreconditionError    e.g. appending to a closed episode
    ├── UnauthenticatedError       missing or unknown API key
    ├── PermissionDeniedError
    ├── ResourceExhaustedError     over a share (quota_id names it) or storage full
    └── UnavailableError           server down, unreachable or shutting down

`reason` is the server's machine-readable google.rpc.ErrorInfo reason (for example
"AGENT_NOT_FOUND"), or "" when the status carried none; `retry_delay` the seconds its
google.rpc.RetryInfo asks a retry to wait (None without one); `quota_id` the share a
google.rpc.QuotaFailure names ("requests_per_second", ...), or ""."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


class EpisodicClientError(Exception):
    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        field_violations: Sequence[tuple[str, str]] = (),
        retry_delay: float | None = None,
        quota_id: str = "",
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.reason = reason
        self.field_violations: list[tuple[str, str]] = list(field_violations)
        self.retry_delay = retry_delay
        self.quota_id = quota_id


class InvalidArgumentError(EpisodicClientError):
    pass


class NotFoundError(EpisodicClientError):
    pass


class AlreadyExistsError(EpisodicClientError):
    pass


class FailedPreconditionError(EpisodicClientError):
    pass


class UnauthenticatedError(EpisodicClientError):
    pass


class PermissionDeniedError(EpisodicClientError):
    pass


class ResourceExhaustedError(EpisodicClientError):
    pass


class UnavailableError(EpisodicClientError):
    pass


ERROR_BY_CODE: dict[grpc.StatusCode, type[EpisodicClientError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
}


def from_rpc_error(error: grpc.RpcError) -> EpisodicClientError:
    """The exception for a failed call (sync `grpc.RpcError` or `grpc.aio.AioRpcError`)."""
    code = error.code() if callable(getattr(error, "code", None)) else grpc.StatusCode.UNKNOWN
    message = (error.details() if callable(getattr(error, "details", None)) else None) or str(error)
    status = _rich_status(error)
    found = _parse_details(status) if status is not None else _Details()
    cls = ERROR_BY_CODE.get(code, EpisodicClientError)
    return cls(code, message, found.reason, found.violations, found.retry_delay, found.quota_id)


def _rich_status(error: grpc.RpcError) -> status_pb2.Status | None:
    """The google.rpc.Status in the trailers, or None when absent or inconsistent."""
    try:
        status = rpc_status.from_call(cast(grpc.Call, error))
    except Exception:  # a malformed or inconsistent status must not hide the original error
        return None
    return cast(status_pb2.Status | None, status)


@dataclass
class _Details:
    reason: str = ""
    violations: list[tuple[str, str]] = field(default_factory=list)
    retry_delay: float | None = None
    quota_id: str = ""


def _parse_details(status: status_pb2.Status) -> _Details:
    found = _Details()
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            found.reason = info.reason
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found.violations.extend((v.field, v.description) for v in bad.field_violations)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            found.retry_delay = retry.retry_delay.ToTimedelta().total_seconds()
        elif detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            quota = error_details_pb2.QuotaFailure()
            detail.Unpack(quota)
            found.quota_id = next((v.quota_id for v in quota.violations), "")
    return found
