"""The server's resident memory against the number of active conversations: one fresh
server, a first BuildContext of a probe conversation (the process's one-time costs), then
bench-context's curve: N conversations of 200 messages written, warmed in steps, RSS read
after each step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from episodic_lab.bench_context.client import HYBRID
from episodic_lab.bench_context.conversations import Writer, user_id
from episodic_lab.bench_context.memory import CONVERSATION_MESSAGES, rss_by_conversations
from episodic_lab.report.presets import Preset
from episodic_lab.report.served import minilm_server

PROBE_MESSAGES = 20


@dataclass(frozen=True, slots=True)
class RssCurve:
    messages_each: int
    points: tuple[tuple[int, float], ...]  # (conversations warmed, RSS MiB)

    @property
    def kib_each(self) -> float:
        """The slope from the first point to the last."""
        (first, first_mib), (last, last_mib) = self.points[0], self.points[-1]
        return (last_mib - first_mib) * 1024 / (last - first) if last > first else float("nan")


async def rss_curve(backend: str, workdir: Path, admin_url: str, preset: Preset) -> RssCurve:
    async with minilm_server(backend, workdir, admin_url) as (client, server_pid):
        probe = await Writer(client).conversation(user_id(1), PROBE_MESSAGES)
        await client.build(probe, HYBRID)
        points = await rss_by_conversations(client, server_pid, preset.conversations)
    return RssCurve(CONVERSATION_MESSAGES, points)
