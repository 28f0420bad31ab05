"""A tenant's shares of costly work, as the use cases spend them (state/shares.py)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol


class WriteQuota(Protocol):
    """A tenant's share of costly writes (state/shares.py); raises OverShare when spent."""

    def write_memories(self, tenant_id: str, count: int) -> None: ...

    def write_chunks(self, tenant_id: str, count: int) -> None: ...


class ImportMeter(Protocol):
    """One import's bytes against its tenant's share (state/shares.py)."""

    async def received(self, size: int) -> None:
        """`size` more bytes arrived and are held: waits for the tenant's import rate (at
        most a second), or raises OverShare (over its rate, or holding too much at once)."""
        ...

    def written(self) -> None:
        """What was held is written and let go."""
        ...


class ImportQuota(Protocol):
    def importing(self, tenant_id: str) -> AbstractAsyncContextManager[ImportMeter]:
        """A meter for one import; all it holds is let go when the block ends."""
        ...
