"""The server under test, as a subprocess of its own so that it does not share the
bench's interpreter (and GIL) with the load generator."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.bench import BenchError

START_TIMEOUT_SECONDS = 60.0
# A latency bench's one tenant starts RPCs far faster than its share (200 a second by
# default): left on, the share would pace its calls and the bench would time the pacing.
UNPACED = ("--tenant-rate-per-second", "1000000", "--tenant-rate-burst", "1000000")
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Server:
    pid: int
    port: int
    command: tuple[str, ...]

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


def server_command(database_url: str, flags: Sequence[str] = ()) -> tuple[str, ...]:
    """`episodic serve` on a free port; `flags` are more of its settings (--embedder ...):
    the server under test is configured by its command line, never by this process's
    environment."""
    return (
        sys.executable, "-m", "episodic", "serve", "--insecure-dev", "--migrate-on-start",
        "--database-url", database_url, "--address", "127.0.0.1:0", "--shutdown-grace-seconds", "2",
        *flags,
    )  # fmt: skip


@asynccontextmanager
async def running_server(
    database_url: str, workdir: Path, flags: Sequence[str] = ()
) -> AsyncIterator[Server]:
    """Starts the server, yields once it serves, and stops it with SIGTERM."""
    command = server_command(database_url, flags)
    log_path = workdir / "server.log"
    with log_path.open("wb") as log_file:
        # stderr goes to a file: a pipe nobody drains would stall the server's access log.
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=log_file, cwd=workdir
        )
        try:
            port = await _serving_port(process, log_path)
            yield Server(process.pid, port, command)
        finally:
            await _stop(process)


async def _serving_port(process: asyncio.subprocess.Process, log_path: Path) -> int:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        port = _port_in(await asyncio.to_thread(log_path.read_text, errors="replace"))
        if port is not None:
            return port
        if process.returncode is not None:
            raise BenchError(f"server exited with {process.returncode}:\n{log_tail(log_path)}")
        await asyncio.sleep(0.05)
    raise BenchError(f"server did not start in {START_TIMEOUT_SECONDS:.0f} s:\n{log_tail(log_path)}")


def _port_in(log_text: str) -> int | None:
    """The port from the server's JSON `serving` line (the address may say port 0)."""
    for line in log_text.splitlines():
        if not line.startswith("{"):
            continue  # the dev-mode banner
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if entry.get("message") == "serving":
            return int(entry["port"])
    return None


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()


def cpu_seconds(pid: int) -> float:
    """User+system CPU the process has used so far (Linux /proc); NaN elsewhere. Server
    CPU per call stays meaningful when the load generator, not the server, is the limit."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    fields = stat.rpartition(")")[2].split()  # after "pid (comm)", comm may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_tail(log_path: Path, lines: int = 20) -> str:
    return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
