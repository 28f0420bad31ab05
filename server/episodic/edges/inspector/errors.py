"""Errors as the inspector's JSON: the gRPC status a domain error maps to (edges/grpc/status.py's
one table), turned into its HTTP status by the table below, with the same reason and field
violations the gRPC API sends."""

from __future__ import annotations

import math

import grpc
from starlette.responses import JSONResponse

from episodic import errors
from episodic.edges.grpc.status import retry_delay_for, status_code_for

HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 412,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
}
NO_STORE = {"Cache-Control": "no-store"}


def _body(code: str, reason: str, message: str, violations: list[dict[str, str]]) -> dict[str, object]:
    return {"error": {"code": code, "reason": reason, "message": message, "field_violations": violations}}


def error_response(error: errors.EpisodicError) -> JSONResponse:
    code = status_code_for(error)
    violations = (
        [{"field": v.field, "description": v.description} for v in error.violations]
        if isinstance(error, errors.InvalidArgument)
        else []
    )
    headers = dict(NO_STORE)
    delay = retry_delay_for(error)
    if delay is not None:
        headers["Retry-After"] = str(math.ceil(delay))  # HTTP wants whole seconds
    body = _body(code.name, error.reason, error.message, violations)
    return JSONResponse(body, status_code=HTTP_STATUS.get(code, 500), headers=headers)


def internal_error_response() -> JSONResponse:
    body = _body("INTERNAL", "INTERNAL", "internal error; see server logs", [])
    return JSONResponse(body, status_code=500, headers=NO_STORE)


def unauthenticated() -> JSONResponse:
    message = "missing or unknown API key: send 'Authorization: Bearer <key>'"
    headers = {**NO_STORE, "WWW-Authenticate": 'Bearer realm="episodic-inspector"'}
    return JSONResponse(
        _body("UNAUTHENTICATED", "API_KEY_INVALID", message, []), status_code=401, headers=headers
    )
