"""The real clock and id factories: the adapters behind the `Clock` and `IdFactory` ports
that the composition root hands to every part it builds (tests hand fakes)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_episode_id() -> str:
    return f"ep_{uuid.uuid4().hex}"


def new_call_id() -> str:
    return uuid.uuid4().hex
