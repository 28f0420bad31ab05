"""`episodic-lab eval-extraction --ablate`: each rule of the extractive memory extractor
(`episodic.summarize.memories.RULES`) switched off in turn, scored on each LoCoMo dev
conversation (against the first speaker's observations, as `--observations` scores them) and
on the chats (`tests/data/extraction_chats.jsonl`), beside the extractor with every rule on.

Locally, without a server: the memories are the extractor's own, before the service merges
repeats, so the figures differ slightly from `--observations` (a few more memories). A rule
earns its place when switching it off lowers precision on both conversations and does not
raise it on the chats; one whose removal raises precision everywhere is over-fitted or noise.
`--without a,b` scores the extractor without those rules first (the base every row compares to)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from episodic.summarize.memories import RULES, ExtractiveMemoryExtractor
from episodic_lab.evals.extraction import chats_score, locomo_episodes
from episodic_lab.evals.extraction_observations import Tally, load_observations, score, user_observations
from episodic_lab.evals.locomo_data import Session
from episodic_lab.evals.locomo_data import load as load_locomo


@dataclass(frozen=True, slots=True)
class Row:
    """One extractor's figures: (recall, precision, memories) per conversation, and the chats'."""

    name: str
    conversations: dict[str, Tally]
    chats_recall: float
    chats_precision: float
    chats_memories: int

    def cells(self, base: Row | None) -> str:
        parts = [f"{self.name:<18}"]
        for conversation, tally in self.conversations.items():
            if conversation == "overall":
                continue
            parts.append(_pair(tally.recall, tally.precision, tally.memories, base, conversation))
        parts.append(_chats(self, base))
        return " | ".join(parts)


def _pair(recall: float, precision: float, memories: int, base: Row | None, conversation: str) -> str:
    text = f"{recall:.3f} {precision:.3f} {memories:>3}"
    if base is None:
        return text
    other = base.conversations[conversation]
    return f"{text} ({precision - other.precision:+.3f}P {recall - other.recall:+.3f}R)"


def _chats(row: Row, base: Row | None) -> str:
    text = f"{row.chats_recall:.3f} {row.chats_precision:.3f} {row.chats_memories:>3}"
    if base is None:
        return text
    return (
        f"{text} ({row.chats_precision - base.chats_precision:+.3f}P "
        f"{row.chats_recall - base.chats_recall:+.3f}R)"
    )


def measure(
    name: str,
    without: Sequence[str],
    sessions: Sequence[Session],
    gold: dict[str, list[str]],
    chats: Path,
) -> Row:
    extractor = ExtractiveMemoryExtractor(without=without)
    memories = {
        f"{s.sample_id}-{s.session_id}": [m.text for m in extractor.extract(messages)]
        for s, messages in zip(sessions, locomo_episodes(sessions), strict=True)
    }
    _, chat = chats_score(chats, extractor)
    return Row(name, score(sessions, gold, memories), chat.recall, chat.precision, chat.extracted)


def run_ablation(args: argparse.Namespace) -> int:
    from episodic_lab.evals.flags import DEFAULT_DATA

    directory: Path = args.data or DEFAULT_DATA
    sessions, _ = load_locomo(directory)
    gold = user_observations(sessions, load_observations(directory))
    off = [rule for rule in args.without.split(",") if rule]
    base = measure("all rules" if not off else "base", off, sessions, gold, args.chats)
    conversations = [name for name in base.conversations if name != "overall"]
    print("each cell: recall precision memories (precision and recall change from the base)")
    print(" | ".join([f"{'rule off':<18}", *conversations, "chats"]))
    print(base.cells(None))
    for rule in RULES:
        if rule not in off:
            print(measure(rule, [*off, rule], sessions, gold, args.chats).cells(base))
    return 0
