"""The server under test: `episodic serve` with two tenants' API keys and the inspector on,
share settings left at their defaults unless --server-flag says otherwise."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from episodic.edges.keys import config_line, new_key
from episodic_lab.bench import BenchError
from episodic_lab.bench.databases import throwaway_database
from episodic_lab.bench.server_process import Server, log_tail, running_server
from episodic_lab.bench_fairness.options import Options

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
INSPECTOR_WAIT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Keys:
    a: str = ""
    b: str = ""

    @classmethod
    def new(cls) -> Keys:
        return cls(new_key(), new_key())

    def flag(self) -> str:
        return f"{config_line(TENANT_A, self.a)},{config_line(TENANT_B, self.b)}"


@dataclass(frozen=True, slots=True)
class FairnessServer:
    server: Server
    inspector_port: int
    log_path: Path


@asynccontextmanager
async def fairness_server(options: Options, workdir: Path, keys: Keys) -> AsyncIterator[FairnessServer]:
    flags = server_flags(options, keys)
    async with (
        throwaway_database(options.backend, workdir, options.postgres_admin_url) as url,
        running_server(url, workdir, flags) as server,
    ):
        log_path = workdir / "server.log"
        yield FairnessServer(server, await _inspector_port(log_path), log_path)


def server_flags(options: Options, keys: Keys) -> tuple[str, ...]:
    """Later flags win in argparse, so --server-flag can override these too."""
    embedder = ("--embedder", options.embedder) if options.embedder else ()
    own = ("--api-keys", keys.flag(), "--inspector-address", "127.0.0.1:0")
    return (*embedder, *own, *options.server_flags)


def shown_command(command: Sequence[str], keys: Keys) -> str:
    """The command line without the key hashes (they are throwaway, but long)."""
    return " ".join("<keys>" if part == keys.flag() else part for part in command)


async def _inspector_port(log_path: Path) -> int:
    """From the inspector's `serving the inspector` log line (logged before gRPC serves)."""
    deadline = time.monotonic() + INSPECTOR_WAIT_SECONDS
    while time.monotonic() < deadline:
        log = await asyncio.to_thread(log_path.read_text, errors="replace")
        for line in log.splitlines():
            port = _inspector_port_in(line)
            if port is not None:
                return port
        await asyncio.sleep(0.05)
    raise BenchError(f"the inspector did not report its port:\n{log_tail(log_path)}")


def _inspector_port_in(line: str) -> int | None:
    if not line.startswith("{"):
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return int(entry["port"]) if entry.get("message") == "serving the inspector" else None
