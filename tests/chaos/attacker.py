"""Drives tenant A's hostile process (hostile_tenant.py) from a test or a script: starts it
against a server, has it attack ("go") or hold off ("pause"), and stops it for its tally; and
tenant B's side: a tiny episode and its BuildContext calls."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.context_helpers import Built, build, create_agent
from tests.e2e.helpers import Client, user_message

REPO = Path(__file__).resolve().parents[2]
# Hang guards only: a healthy attacker answers each command at once, B's calls in milliseconds.
COMMAND_TIMEOUT_SECONDS = 60
CALL_TIMEOUT_SECONDS = 10
SETTLE_SECONDS = 0.5  # after "go": A's calls in flight; after "pause": A's last calls ended


@dataclass
class Attacker:
    """Tenant A's process; `tally` is what it reported on stopping."""

    process: asyncio.subprocess.Process
    tally: dict[str, Any] = field(default_factory=dict)

    async def tell(self, line: str) -> None:
        """Sends a command and waits for the attacker to acknowledge it."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(f"{line}\n".encode())
        await stdin.drain()
        answer = await asyncio.wait_for(stdout.readline(), COMMAND_TIMEOUT_SECONDS)
        assert answer.strip() == line.encode(), answer

    async def stop(self) -> dict[str, Any]:
        """Ends the attack; returns (and keeps) A's tally: completed, deadline_exceeded,
        cancelled, other_errors."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(b"stop\n")
        await stdin.drain()
        self.tally = json.loads(await asyncio.wait_for(stdout.readline(), COMMAND_TIMEOUT_SECONDS))
        await asyncio.wait_for(self.process.wait(), COMMAND_TIMEOUT_SECONDS)
        return self.tally


@asynccontextmanager
async def attacker(address: str) -> AsyncIterator[Attacker]:
    """Tenant A, its episodes filled and paused; killed on the way out if still running."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.chaos.hostile_tenant", address,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), COMMAND_TIMEOUT_SECONDS)
        assert ready.strip() == b"ready", ready
        yield Attacker(process)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


@asynccontextmanager
async def attacking(a: Attacker) -> AsyncIterator[None]:
    """A attacks for the duration of the block (its calls already in flight on entry)."""
    await a.tell("go")
    await asyncio.sleep(SETTLE_SECONDS)
    try:
        yield
    finally:
        await a.tell("pause")
        await asyncio.sleep(SETTLE_SECONDS)


async def tiny_episode(client: Client) -> str:
    """B's episode: two short messages, never anywhere near a compaction."""
    agent_id = await create_agent(client)
    episode_id = await client.open_episode(agent_id)
    await client.add(
        episode_id, user_message("Remind me to water the plants."), user_message("And call Sam.")
    )
    return episode_id


async def b_turn(client: Client, episode_id: str) -> Built:
    return await build(
        client, episode_id, timeout=CALL_TIMEOUT_SECONDS, user_message="What is next on my list?"
    )
