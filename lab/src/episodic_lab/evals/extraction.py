"""`episodic-lab eval-extraction`: precision, recall and kind accuracy of a memory extractor on
a hand-written labelled set and on a second kind of text (support and assistant chats,
`tests/data/extraction_chats.jsonl`), and its throughput on the LoCoMo dev sessions (one
episode each).

Each JSONL line is {"id", "start", "messages": [{"role", "content"}], "expected": [{"seq", "kind",
"words"}], "note"}, and optionally "optional": [{"seq", "words"}] (true of the user, but not
required) and "avoid": [{"seq", "words", "why"}] (what must not become a memory: a question, a
hypothetical, quoted or pasted text, someone else's words); message i has seq i + 1 and is
written a minute after the one before. An extracted memory matches an expected (optional,
avoided) one when the expected seq lies in its span and its text holds every key word
(case-insensitive). Precision: extracted memories that match an expected or optional one / all
extracted. Recall: expected memories matched by one / all expected. Kind accuracy: among the
extracted memories that match an expected one, those whose kind is the one expected. Avoided:
extracted memories that match an avoided one (each is also a false positive)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from episodic.domain.memories import ExtractedMemory, MemoryKind
from episodic.domain.model import Message, Role
from episodic.domain.ports.models import MemoryExtractor
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic_lab.evals.locomo_data import Session
from episodic_lab.evals.locomo_data import load as load_locomo

# lab/src/episodic_lab/evals/extraction.py -> the repository root holds tests/data.
DEFAULT_DATA = Path(__file__).resolve().parents[4] / "tests" / "data" / "memory_extraction_labelled.jsonl"
DEFAULT_CHATS = DEFAULT_DATA.with_name("extraction_chats.jsonl")
MESSAGE_SPACING = timedelta(minutes=1)
TURN_SPACING = timedelta(seconds=30)  # as eval-recall loads LoCoMo


@dataclass(frozen=True, slots=True)
class Expected:
    seq: int
    kind: MemoryKind | None  # None: optional or avoided, any kind
    words: tuple[str, ...]

    def matched_by(self, memory: ExtractedMemory) -> bool:
        text = memory.text.casefold()
        within = memory.from_seq <= self.seq <= memory.to_seq
        return within and all(word.casefold() in text for word in self.words)


@dataclass(frozen=True, slots=True)
class Episode:
    episode_id: str
    messages: tuple[Message, ...]
    expected: tuple[Expected, ...]
    optional: tuple[Expected, ...] = ()
    avoid: tuple[Expected, ...] = ()


@dataclass
class Score:
    extracted: int = 0
    matching: int = 0  # extracted memories that match an expected (or optional) one
    expected: int = 0
    found: int = 0  # expected memories that some extracted one matches
    right_kind: int = 0
    avoided: int = 0  # extracted memories that match one to avoid
    errors: list[str] = field(default_factory=list)

    def line(self, name: str) -> str:
        return (
            f"{name:<10} recall {self.recall:.3f} ({self.found}/{self.expected})  "
            f"precision {self.precision:.3f} ({self.matching}/{self.extracted})  "
            f"kind accuracy {self.kind_accuracy:.3f}  avoided extracted {self.avoided}"
        )

    @property
    def precision(self) -> float:
        return self.matching / self.extracted if self.extracted else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    @property
    def kind_accuracy(self) -> float:
        return self.right_kind / self.matching if self.matching else 1.0


def load(path: Path = DEFAULT_DATA) -> list[Episode]:
    with path.open(encoding="utf-8") as lines:
        return [_episode(json.loads(line)) for line in lines if line.strip()]


def _episode(row: dict[str, Any]) -> Episode:
    episode_id, start = str(row["id"]), datetime.fromisoformat(row["start"])
    messages = tuple(
        Message(episode_id, i + 1, Role(m["role"]), str(m["content"]), 0, "", start + MESSAGE_SPACING * i)
        for i, m in enumerate(row["messages"])
    )
    expected = tuple(
        Expected(int(e["seq"]), MemoryKind(e["kind"]), tuple(map(str, e["words"]))) for e in row["expected"]
    )
    optional, avoid = (
        tuple(Expected(int(e["seq"]), None, tuple(map(str, e["words"]))) for e in row.get(key, ()))
        for key in ("optional", "avoid")
    )
    return Episode(episode_id, messages, expected, optional, avoid)


def evaluate(episodes: Sequence[Episode], extractor: MemoryExtractor) -> Score:
    score = Score()
    for episode in episodes:
        score_episode(episode, extractor.extract(episode.messages), score)
    return score


def score_episode(episode: Episode, memories: Sequence[ExtractedMemory], score: Score) -> None:
    score.extracted += len(memories)
    score.expected += len(episode.expected)
    for memory in memories:
        if any(e.matched_by(memory) for e in episode.avoid):
            score.avoided += 1
            score.errors.append(_error("AVOIDED", episode, memory))
            continue
        matches = [e for e in episode.expected if e.matched_by(memory)]
        if not matches:
            if any(e.matched_by(memory) for e in episode.optional):
                score.matching += 1
                continue
            score.errors.append(_error("FP", episode, memory))
            continue
        score.matching += 1
        if any(e.kind is memory.kind for e in matches):
            score.right_kind += 1
        else:
            score.errors.append(_error("KIND", episode, memory))
    for wanted in episode.expected:
        if any(wanted.matched_by(memory) for memory in memories):
            score.found += 1
        else:
            words, kind = ", ".join(wanted.words), wanted.kind.value if wanted.kind else "any"
            score.errors.append(f"FN {episode.episode_id} #{wanted.seq} {kind}: [{words}]")


def _error(tag: str, episode: Episode, memory: ExtractedMemory) -> str:
    return f"{tag} {episode.episode_id} #{memory.from_seq} {memory.kind.value}: {memory.text!r}"


def locomo_episodes(sessions: Sequence[Session]) -> list[list[Message]]:
    """Each session as one episode, its first speaker the user, as eval-recall loads it."""
    return [_locomo_messages(session) for session in sessions]


def _locomo_messages(session: Session) -> list[Message]:
    episode_id = f"{session.sample_id}-{session.session_id}"
    return [
        Message(
            episode_id,
            i + 1,
            Role.USER if turn.speaker == session.speakers[0] else Role.ASSISTANT,
            f"{turn.speaker}: {turn.text}",
            0,
            "",
            session.started + TURN_SPACING * i,
        )
        for i, turn in enumerate(session.turns)
    ]


@dataclass(frozen=True, slots=True)
class Throughput:
    episodes: int
    messages: int
    memories: int
    seconds: float

    def report(self) -> str:
        seconds = max(self.seconds, 1e-9)
        return (
            f"LoCoMo: {self.episodes} episodes, {self.messages} messages in {self.seconds:.3f} s: "
            f"{self.episodes / seconds:.0f} episodes/s, {self.messages / seconds:.0f} messages/s, "
            f"{self.memories / max(self.episodes, 1):.1f} memories per episode"
        )


def throughput(episodes: Sequence[Sequence[Message]], extractor: MemoryExtractor, rounds: int) -> Throughput:
    """The fastest of `rounds` passes over all episodes."""
    best, memories = float("inf"), 0
    for _ in range(max(rounds, 1)):
        started = time.perf_counter()
        memories = sum(len(extractor.extract(episode)) for episode in episodes)
        best = min(best, time.perf_counter() - started)
    return Throughput(len(episodes), sum(map(len, episodes)), memories, best)


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labelled", type=Path, default=DEFAULT_DATA, help="labelled JSONL")
    parser.add_argument(
        "--chats",
        type=Path,
        default=DEFAULT_CHATS,
        help="labelled JSONL of a second kind of text (support and assistant chats), scored beside",
    )
    parser.add_argument(
        "--without",
        default="",
        help="comma-separated extraction rules to switch off (locally: the labelled set and the chats)",
    )
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="each rule off in turn, scored locally on each LoCoMo dev conversation and the chats",
    )
    parser.add_argument("--data", type=Path, default=None, help="LoCoMo directory (sessions.jsonl)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over LoCoMo (the fastest counts)")
    parser.add_argument("--errors", action="store_true", help="list false positives, misses and wrong kinds")
    parser.add_argument("--samples", type=int, default=0, help="print this many LoCoMo memories")
    observed = parser.add_argument_group(
        "observations",
        "through the API: LoCoMo dev sessions closed on a real server, the listed memories scored "
        "against the first speaker's annotated observations (extraction_observations.py)",
    )
    observed.add_argument(
        "--observations",
        action="store_true",
        help="score against LoCoMo observations instead of the labelled set",
    )
    observed.add_argument(
        "--embedder",
        default="minilm",
        choices=("minilm", "minilm-fp32", "hashing"),
        help="the server's embedder (it decides near-duplicate merges)",
    )
    observed.add_argument("--gate", action="store_true", help="exit 1 below either floor")
    observed.add_argument(
        "--floor-recall", type=float, default=0.0, help="observation recall floor for --gate"
    )
    observed.add_argument(
        "--floor-precision", type=float, default=0.0, help="memory precision floor for --gate"
    )
    observed.add_argument(
        "--floor-chats-precision", type=float, default=0.0, help="precision floor on the chats for --gate"
    )
    observed.add_argument(
        "--floor-chats-recall", type=float, default=0.0, help="recall floor on the chats for --gate"
    )


def chats_score(path: Path, extractor: MemoryExtractor) -> tuple[int, Score]:
    """The extractor on the chats: how many, and the score."""
    chats = load(path)
    return len(chats), evaluate(chats, extractor)


def print_chats(path: Path, extractor: MemoryExtractor, errors: bool) -> Score:
    count, score = chats_score(path, extractor)
    print(f"chats: {count} transcripts ({path.name}), {score.expected} expected memories")
    print(score.line("chats"))
    if errors:
        print("\n".join(score.errors) or "no errors")
    return score


def run_eval_extraction(args: argparse.Namespace) -> int:
    if args.ablate:
        from episodic_lab.evals.extraction_ablation import run_ablation

        return run_ablation(args)
    if args.observations:
        from episodic_lab.evals.extraction_observations import run_eval_observations

        return run_eval_observations(args)
    extractor = ExtractiveMemoryExtractor(without=[rule for rule in args.without.split(",") if rule])
    episodes = load(args.labelled)
    score = evaluate(episodes, extractor)
    print(f"{extractor.name} on {len(episodes)} labelled episodes, {score.expected} expected memories")
    print(f"extracted {score.extracted}, matching {score.matching}, expected found {score.found}")
    print(f"precision {score.precision:.3f}  recall {score.recall:.3f}", end="  ")
    print(f"kind accuracy {score.kind_accuracy:.3f}")
    if args.errors:
        print("\n".join(score.errors) or "no errors")
    print_chats(args.chats, extractor, args.errors)
    if args.data is not None:
        sessions, _ = load_locomo(args.data)
        locomo = locomo_episodes(sessions)
        print(throughput(locomo, extractor, args.rounds).report())
        _print_samples(locomo, extractor, args.samples)
    return 0


def _print_samples(episodes: Sequence[Sequence[Message]], extractor: MemoryExtractor, count: int) -> None:
    shown = 0
    for episode in episodes:
        for memory in extractor.extract(episode):
            if shown == count:
                return
            when = f" @{memory.event_time:%Y-%m-%d}" if memory.event_time else ""
            print(f"  {memory.kind.value:<10} #{memory.from_seq}{when} {memory.text}")
            shown += 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="episodic-lab eval-extraction", description=__doc__)
    add_flags(parser)
    return run_eval_extraction(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
