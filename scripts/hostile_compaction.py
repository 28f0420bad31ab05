"""Times one inline compaction (the extractive summary of 3 messages and its token count, as
BuildContext makes it) over hostile text next to prose of the same size.

    .venv/bin/python scripts/hostile_compaction.py            # 16 32 58 116 256 KiB
    .venv/bin/python scripts/hostile_compaction.py 16 32      # chosen sizes in KiB

Issue 9: `"the stream will be cancelled " * N` (long, unpunctuated, self-repeating text) once
took 1.4 / 4.3 / 14.3 / 57.5 s at 16 / 32 / 58 / 116 KiB."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from episodic.domain.model import Agent, Episode, EpisodeState, MemoryConfig, Message, Role
from episodic.domain.tail import Tail
from episodic.domain.working_set import WorkingSet
from episodic.service.compaction import SummaryMaker
from episodic.summarize import ExtractiveSummarizer
from episodic.tokens import TiktokenCounter

HOSTILE = "the stream will be cancelled "
PROSE = (
    "I booked the flight to Lisbon for the 14th of May. My sister said she prefers the window seat. "
    "We agreed to rent a car for three days, and the hotel confirmed a late check-in! "
)
SIZES_KIB = (16, 32, 58, 116, 256)
NOW = datetime(2025, 1, 1, tzinfo=UTC)
ENCODING = "cl100k_base"


def working_set(text: str) -> WorkingSet:
    episode = Episode("t", "ep", "agent", "user", EpisodeState.OPEN, ENCODING, NOW, NOW)
    agent = Agent("t", "agent", "", "", "gpt-4o", ENCODING, False, MemoryConfig(), NOW, NOW)
    roles = (Role.USER, Role.ASSISTANT, Role.USER)
    messages = [Message("ep", seq, role, text, 1, ENCODING, NOW) for seq, role in enumerate(roles, start=1)]
    return WorkingSet(episode, agent, None, Tail.of(messages))


def compaction_seconds(maker: SummaryMaker, unit: str, kib: int) -> float:
    text = (unit * (kib * 1024 // len(unit) + 1))[: kib * 1024]
    started = time.perf_counter()
    maker.make(ExtractiveSummarizer(), working_set(text), 3)
    return time.perf_counter() - started


def main(argv: list[str]) -> None:
    sizes = [int(size) for size in argv] or list(SIZES_KIB)
    maker = SummaryMaker(tokens=TiktokenCounter(), clock=lambda: NOW)
    maker.make(ExtractiveSummarizer(), working_set("warm up the encoder."), 1)
    print(f"{'KiB/message':>12} {'hostile s':>10} {'prose s':>8}")
    for kib in sizes:
        hostile, prose = compaction_seconds(maker, HOSTILE, kib), compaction_seconds(maker, PROSE, kib)
        print(f"{kib:>12} {hostile:>10.3f} {prose:>8.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
