"""The server under test: `episodic-lab bench`'s subprocess, with the embedder chosen here. The
shared launcher takes no extra flags, so the choice travels in the one setting's variable,
set only while the subprocess is spawned (it inherits the environment)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path

from episodic_lab.bench.server_process import Server, running_server

EMBEDDER_VARIABLE = "EPISODIC_EMBEDDER"


@asynccontextmanager
async def context_server(database_url: str, workdir: Path, embedder: str) -> AsyncIterator[Server]:
    """Yields the serving server; its command shows the variable first, like a shell line."""
    async with AsyncExitStack() as stack:
        with _variable(EMBEDDER_VARIABLE, embedder):
            server = await stack.enter_async_context(running_server(database_url, workdir))
        yield dataclasses.replace(server, command=(f"{EMBEDDER_VARIABLE}={embedder}", *server.command))


@contextmanager
def _variable(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def rss_mib(pid: int) -> float:
    """Resident memory of a process now (VmRSS of Linux /proc); NaN elsewhere."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return float("nan")
    kib = next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), None)
    return kib / 1024 if kib is not None else float("nan")
