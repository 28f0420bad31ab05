"""How the store's own threads (the SQLite writer and readers) answer callers waiting on the
event loop: one `call_soon_threadsafe` each, settling an asyncio future there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from typing import Any


def settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """On the loop: `value` as the future's result (`ok`) or its exception; nothing when the
    future is done already (its caller was cancelled meanwhile)."""
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def tell(loop: asyncio.AbstractEventLoop, call: Callable[..., Any], *args: Any) -> None:
    """`call(*args)` on the loop's thread, from another; nothing once the loop is closed (the
    process is ending: nobody waits for the answer)."""
    with suppress(RuntimeError):
        loop.call_soon_threadsafe(call, *args)
