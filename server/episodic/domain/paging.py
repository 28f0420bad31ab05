"""Opaque page tokens: a position plus a digest of the query, so a token cannot be
replayed against a different query (AIP-158)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

from episodic.domain.model import Page
from episodic.domain.validation import ID_PATTERN
from episodic.errors import InvalidArgument

MAX_INT64 = 2**63 - 1

JsonScalar = str | int | float | bool | None
T = TypeVar("T")


def query_digest(query: Mapping[str, JsonScalar]) -> str:
    return hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:16]


def encode_token(position: Mapping[str, JsonScalar], query: Mapping[str, JsonScalar]) -> str:
    body = {"p": dict(position), "q": query_digest(query)}
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


def decode_token(token: str, query: Mapping[str, JsonScalar]) -> dict[str, JsonScalar] | None:
    """None for an empty token (first page); InvalidArgument for anything not ours."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
        position, digest = body["p"], body["q"]
    except (binascii.Error, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise _foreign() from exc
    if not isinstance(position, dict) or digest != query_digest(query):
        raise InvalidArgument.of("page_token", "belongs to a different query; restart paging")
    return position


# Tokens are not signed: they only hold positions inside the caller's own tenant-scoped
# query, so a forged one can reveal nothing. Every field is still checked here, so a
# forged or corrupted token is INVALID_ARGUMENT, never a database error.


def _foreign() -> InvalidArgument:
    return InvalidArgument.of("page_token", "is not a token this server issued")


def read_seq(position: Mapping[str, JsonScalar], key: str) -> int:
    value = position.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INT64:
        raise _foreign()
    return value


def read_id(position: Mapping[str, JsonScalar], key: str) -> str:
    value = position.get(key)
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise _foreign()
    return value


def read_time(position: Mapping[str, JsonScalar], key: str) -> datetime:
    try:
        value = datetime.fromisoformat(str(position[key]))
        if value.tzinfo is None:
            raise ValueError("naive time")
        return value.astimezone(UTC)
    except (KeyError, ValueError, OverflowError) as exc:
        raise _foreign() from exc


def page_of(
    found: list[T],
    limit: int,
    position: Callable[[T], Mapping[str, JsonScalar]],
    query: Mapping[str, JsonScalar],
) -> Page[T]:
    """`found` was read with limit + 1 rows: a surplus row means a next page, which starts
    after the last item of this one."""
    if len(found) <= limit:
        return Page(found)
    return Page(found[:limit], encode_token(position(found[limit - 1]), query))
