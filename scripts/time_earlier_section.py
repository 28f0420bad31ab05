"""Times the live-episode recall's two steps in process, as a long conversation's turn runs
them: `CompactedLog.ranked` (the query against the compacted messages, by words) and
`earlier_block` (passages fitted into the section's allowance and rendered). The log holds
MESSAGES synthetic messages of 20-60 words; every query is run once first, so each line's
token count is cached as over a log's life, then timed. Prints the medians in microseconds
and a digest of the sections rendered (a change that should render the same must print the
same digest).

    .venv/bin/python scripts/time_earlier_section.py [--messages 2000] [--allowance 1600]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from functools import partial

from episodic.domain.earlier import CompactedLog
from episodic.domain.earlier_block import EarlierFound, earlier_block
from episodic.domain.model import Message, Role
from episodic.tokens.tiktoken_counter import TiktokenCounter

TEXT = (
    "hotel Kyoto April sister temple rail pass budget dinner cherry blossom Gion quiet room yen "
    "night trip Hiroshima train ticket museum garden tea ceremony market shrine river walk lunch "
    "breakfast station airport flight taxi bus"
)
WORDS = TEXT.split()


def synthetic_log(messages: int, rng: random.Random) -> CompactedLog:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    held = []
    for i in range(messages):
        role = Role.USER if i % 2 == 0 else Role.ASSISTANT
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
        held.append(Message("ep", i + 1, role, text, 50, "o200k_base", start + timedelta(minutes=i)))
    return CompactedLog.of(held)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--messages", type=int, default=2000, help="compacted messages held")
    parser.add_argument("--allowance", type=int, default=1600, help="the section's tokens")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(7)
    log = synthetic_log(args.messages, rng)
    count = partial(TiktokenCounter().count, encoding="o200k_base")
    queries = [" ".join(rng.choice(WORDS) for _ in range(6)) + "?" for _ in range(args.queries)]
    for q in queries:  # every line counted once, as over a log's life
        earlier_block(EarlierFound(log, log.ranked(q, None), count), args.allowance, count)
    ranks, blocks, digest = [], [], hashlib.sha256()
    for q in queries:
        started = time.perf_counter()
        found = EarlierFound(log, log.ranked(q, None), count)
        ranked = time.perf_counter()
        message, report = earlier_block(found, args.allowance, count)
        blocks.append((time.perf_counter() - ranked) * 1e6)
        ranks.append((ranked - started) * 1e6)
        digest.update((message.content if message else "").encode() + repr(report).encode())
    rank, block = statistics.median(ranks), statistics.median(blocks)
    print(
        f"ranked p50 {rank:.0f} us; earlier_block p50 {block:.0f} us; "
        f"sections' digest {digest.hexdigest()[:16]}"
    )


if __name__ == "__main__":
    main()
