"""The server under test: `episodic-lab bench`'s subprocess, with the embedder chosen here
and passed as its `--embedder` flag."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from episodic_lab.bench.server_process import UNPACED, Server, running_server


@asynccontextmanager
async def context_server(database_url: str, workdir: Path, embedder: str) -> AsyncIterator[Server]:
    """Yields the serving server."""
    async with running_server(database_url, workdir, ("--embedder", embedder, *UNPACED)) as server:
        yield server


def rss_mib(pid: int) -> float:
    """Resident memory of a process now (VmRSS of Linux /proc); NaN elsewhere."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return float("nan")
    kib = next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), None)
    return kib / 1024 if kib is not None else float("nan")
