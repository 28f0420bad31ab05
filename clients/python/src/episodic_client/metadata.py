"""Per-call metadata: the bearer API key."""

from __future__ import annotations


def auth_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """`authorization: Bearer <key>`, or nothing without a key (dev servers accept that)."""
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()
