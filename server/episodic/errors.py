"""The one error tree of Episodic. Domain, service and store code raise these;
the gRPC edge (`episodic.api.status`) maps them to status codes by one table.

    EpisodicError
    ├── InvalidArgument        bad input; carries field violations
    ├── Unauthenticated        missing or unknown credential
    ├── PermissionDenied       credential valid, scope not allowed
    ├── NotFound               no such resource in the caller's tenant
    ├── AlreadyExists          an id is taken by something different
    ├── FailedPrecondition     the resource is in the wrong state (e.g. closed)
    ├── Unavailable            the server, or the database behind it, cannot serve now (retryable)
    └── ResourceExhausted      storage is full (retryable once space is freed)
        └── AtCapacity         the server, or the caller's share of it, is full right now
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One wrong field: a dotted path into the request and what is wrong with it."""

    field: str
    description: str


class EpisodicError(Exception):
    """Root of every error Episodic raises on purpose. `reason` is UPPER_SNAKE_CASE."""

    reason: str = "EPISODIC_ERROR"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason


CONFIGURATION = "configuration"  # the subject of an InvalidArgument about settings, not a request


class InvalidArgument(EpisodicError):
    """The request is malformed; `violations` names every wrong field. `subject` says what
    was invalid: "request", or "configuration" when every wrong field is a setting or an
    agent's memory configuration (the message then says "invalid configuration: ...")."""

    reason = "INVALID_ARGUMENT"

    def __init__(
        self, violations: list[FieldViolation], *, reason: str | None = None, subject: str = "request"
    ) -> None:
        summary = "; ".join(f"{v.field}: {v.description}" for v in violations)
        super().__init__(f"invalid {subject}: {summary}", reason=reason)
        self.violations = violations

    @classmethod
    def of(cls, field: str, description: str, *, subject: str = "request") -> InvalidArgument:
        return cls([FieldViolation(field, description)], subject=subject)


class Unauthenticated(EpisodicError):
    reason = "UNAUTHENTICATED"


class PermissionDenied(EpisodicError):
    reason = "PERMISSION_DENIED"


class NotFound(EpisodicError):
    """`kind` is the resource type ("episode", "agent"), `resource_id` its id."""

    reason = "NOT_FOUND"

    def __init__(self, kind: str, resource_id: str) -> None:
        reason = kind.upper().replace(" ", "_") + "_NOT_FOUND"
        super().__init__(f"{kind} {resource_id!r} not found", reason=reason)
        self.kind = kind
        self.resource_id = resource_id


class AlreadyExists(EpisodicError):
    reason = "ALREADY_EXISTS"


class FailedPrecondition(EpisodicError):
    reason = "FAILED_PRECONDITION"


class Aborted(EpisodicError):
    """A concurrency conflict (a stale etag): read again and retry."""

    reason = "ABORTED"


class Unavailable(EpisodicError):
    """Retryable: the same call may succeed once the server or its database is back."""

    reason = "UNAVAILABLE"


class ResourceExhausted(EpisodicError):
    """Retryable once an operator frees space (e.g. the database's disk is full)."""

    reason = "RESOURCE_EXHAUSTED"


class AtCapacity(ResourceExhausted):
    """Retryable soon: the server, or the caller's share of it, is full right now (not a
    fault). Such refusals are held before they are answered (state/shares.py)."""

    reason = "AT_CAPACITY"
