"""The server most sections measure: `episodic serve` as a subprocess with the default local
embedder (MiniLM) on a throwaway database of the chosen backend, and the bench's agent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from episodic_lab.bench.databases import throwaway_database
from episodic_lab.bench.server_process import server_command
from episodic_lab.bench_context import progress
from episodic_lab.bench_context.client import Client
from episodic_lab.bench_context.server import context_server
from episodic_lab.connect import lab_client

EMBEDDER = "minilm"
SERVER_FLAGS = ("--embedder", EMBEDDER)


@asynccontextmanager
async def minilm_server(backend: str, workdir: Path, admin_url: str) -> AsyncIterator[tuple[Client, int]]:
    """Yields the client (a new agent) and the server's pid."""
    async with (
        throwaway_database(backend, workdir, admin_url) as url,
        context_server(url, workdir, EMBEDDER) as server,
        lab_client(server.target) as lab,
    ):
        progress(f"  {backend}: server pid {server.pid} on port {server.port}")
        yield await Client.with_new_agent(lab), server.pid


def shown_command() -> str:
    """The servers' command line, the database left as a placeholder."""
    return " ".join(server_command("<throwaway database>", SERVER_FLAGS)[1:])
