"""After the load: does every conversation hold exactly the messages it acknowledged (its
opening messages plus the acknowledged appends), with seqs 1..n and no gap? Is the server
still SERVING? And what did the server log above INFO, to say where errors came from?"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.bench_context.client import Client

LOGGED_LEVELS = ("WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True, slots=True)
class StoredCheck:
    conversations: int
    acknowledged: int
    stored: int  # messages ListMessages returned
    mismatched: tuple[str, ...]  # conversations whose seqs are not exactly 1..acknowledged

    @property
    def passed(self) -> bool:
        return self.acknowledged == self.stored and not self.mismatched


async def check_stored(client: Client, acknowledged: Mapping[str, int]) -> StoredCheck:
    mismatched, stored = [], 0
    for episode_id, expected in acknowledged.items():
        seqs = await client.seqs(episode_id)
        stored += len(seqs)
        if sorted(seqs) != list(range(1, expected + 1)):
            mismatched.append(episode_id)
    return StoredCheck(len(acknowledged), sum(acknowledged.values()), stored, tuple(mismatched))


async def serving(target: str) -> bool:
    """The gRPC health service says SERVING: the product's own probe, `episodic healthcheck`."""
    probe = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "episodic", "healthcheck", "--address", target,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return await probe.wait() == 0


def logged_problems(log_path: Path) -> Counter[str]:
    """The server log's WARNING and worse entries, "LEVEL logger: message" -> times."""
    with log_path.open(errors="replace") as log:
        return Counter(problem for problem in map(_problem, log) if problem)


def _problem(line: str) -> str:
    """The line as "LEVEL logger: message" if it is WARNING or worse; else empty."""
    entry = _entry(line)
    if entry.get("level") not in LOGGED_LEVELS:
        return ""
    return f"{entry['level']} {entry.get('logger', '')}: {str(entry.get('message'))[:200]}"


def _entry(line: str) -> dict[str, object]:
    if not line.startswith("{"):
        return {}  # the dev-mode banner
    try:
        entry = json.loads(line)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}
