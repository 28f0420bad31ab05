"""Opaque page tokens: a position plus a digest of the query, so a token cannot be
replayed against a different query (AIP-158)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping

from episodic.errors import InvalidArgument

JsonScalar = str | int | float | bool | None


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
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidArgument.of("page_token", "is not a token this server issued") from exc
    if not isinstance(position, dict) or digest != query_digest(query):
        raise InvalidArgument.of("page_token", "belongs to a different query; restart paging")
    return position
