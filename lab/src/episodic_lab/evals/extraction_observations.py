"""`episodic-lab eval-extraction --observations`: how much of what the user says about themselves
the memory extractor keeps, scored against LoCoMo's annotated observations, through the API.

A throwaway server imports the LoCoMo dev conversations as eval-recall does (each session one
episode, the first speaker of each conversation the user), closes the episodes so the server's
extractor (the deterministic one unless `--extractor` says otherwise) writes memories, and lists
them with ListMemories. The gold is the first speaker's observations of each session.

Matching is by content words (`episodic.summarize.text.content_words`: folded, without the
summarizer's stop words), each lightly stemmed ("attended"/"attending" -> "attend", "stories"
-> "story", "named" -> "nam", "caroline's" -> "carolin") so that third-person observations and
first-person memories compare. The speaker's own name is no content word on either side: observations
say "Caroline attended...", memories "Caroline: I went..." (the label) or "I went...".

- An observation is **kept** when one memory of its session covers at least half of its
  content words; **recall** is kept / observations.
- A memory is **precise** when one observation of the user in its session covers at least half
  of the memory's content words; **precision** is precise / memories.
- The baseline "every user turn is a memory" scores each user turn as a memory (locally, for
  scale: its recall is about the ceiling of turn-sized memories, its precision the floor).

Memories superseded by a later one are not listed (the API hides them): what is scored is what
the service keeps."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.summarize.text import content_words
from episodic_client import AsyncEpisodicClient
from episodic_lab.evals.extraction import print_chats
from episodic_lab.evals.locomo_data import MissingData, Session
from episodic_lab.evals.locomo_data import load as load_locomo

COVERED = 0.5  # the share of the other side's content words one side must hold
_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))
_MIN_STEM = 3


@dataclass(frozen=True, slots=True)
class Observation:
    sample_id: str
    session_id: str
    speaker: str
    text: str


@dataclass
class Tally:
    sessions: int = 0
    observations: int = 0
    kept: int = 0
    memories: int = 0
    precise: int = 0

    @property
    def recall(self) -> float:
        return self.kept / self.observations if self.observations else 1.0

    @property
    def precision(self) -> float:
        return self.precise / self.memories if self.memories else 1.0

    @property
    def per_session(self) -> float:
        return self.memories / self.sessions if self.sessions else 0.0

    def add(self, other: Tally) -> None:
        self.sessions += other.sessions
        self.observations += other.observations
        self.kept += other.kept
        self.memories += other.memories
        self.precise += other.precise

    def line(self, name: str) -> str:
        return (
            f"{name:<10} recall {self.recall:.3f} ({self.kept}/{self.observations})  "
            f"precision {self.precision:.3f} ({self.precise}/{self.memories})  "
            f"memories/session {self.per_session:.2f}"
        )


def stem(word: str) -> str:
    """A word without its possessive and one inflectional ending, when enough of it is left."""
    word = word.removesuffix("'s")
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            word = word[: len(word) - len(suffix)] + replacement
            break
    # "name"/"named", "inspire"/"inspiring": a final "e" is dropped on both sides.
    return word[:-1] if word.endswith("e") and len(word) > _MIN_STEM else word


def meaning(text: str, names: Iterable[str] = ()) -> frozenset[str]:
    """The stemmed content words of `text`, without the given (speaker) names."""
    dropped = {stem(word) for name in names for word in content_words(name)}
    return frozenset(stem(word) for word in content_words(text)) - dropped


def covers(holder: frozenset[str], wanted: frozenset[str], share: float = COVERED) -> bool:
    """Whether `holder` holds at least `share` of `wanted` (which has words)."""
    return bool(wanted) and len(holder & wanted) >= share * len(wanted)


def score_session(observations: Sequence[str], memories: Sequence[str], speaker: str) -> Tally:
    """One session: the user's observations against the memories extracted from it."""
    gold = [meaning(text, (speaker,)) for text in observations]
    found = [meaning(text, (speaker,)) for text in memories]
    return Tally(
        sessions=1,
        observations=len(gold),
        kept=sum(any(covers(memory, wanted) for memory in found) for wanted in gold),
        memories=len(found),
        precise=sum(any(covers(wanted, memory) for wanted in gold) for memory in found),
    )


def load_observations(directory: Path) -> list[Observation]:
    path = directory / "observations.jsonl"
    if not path.is_file():
        raise MissingData(
            f"no LoCoMo observations in {directory} (observations.jsonl not found): pass --data DIR, "
            "a directory holding sessions.jsonl, questions.jsonl and observations.jsonl"
        )
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        Observation(str(r["sample_id"]), str(r["session_id"]), str(r["speaker"]), str(r["text"]))
        for r in rows
    ]


def user_observations(
    sessions: Sequence[Session], observations: Sequence[Observation]
) -> dict[str, list[str]]:
    """Per episode id ("conv-26-S1"), the observations about its user (the first speaker)."""
    users = {session.sample_id: session.speakers[0] for session in sessions}
    gold: dict[str, list[str]] = {f"{s.sample_id}-{s.session_id}": [] for s in sessions}
    for o in observations:
        episode = f"{o.sample_id}-{o.session_id}"
        if episode in gold and o.speaker == users.get(o.sample_id):
            gold[episode].append(o.text)
    return gold


def score(
    sessions: Sequence[Session], gold: dict[str, list[str]], memories: dict[str, list[str]]
) -> dict[str, Tally]:
    """Per conversation and "overall"."""
    tallies: dict[str, Tally] = {}
    for session in sessions:
        episode = f"{session.sample_id}-{session.session_id}"
        one = score_session(gold[episode], memories.get(episode, []), session.speakers[0])
        tallies.setdefault(session.sample_id, Tally()).add(one)
    overall = Tally()
    for tally in tallies.values():
        overall.add(tally)
    return {**tallies, "overall": overall}


def every_user_turn(sessions: Sequence[Session]) -> dict[str, list[str]]:
    """The baseline: each user turn, as the server stores it, is one memory."""
    return {
        f"{s.sample_id}-{s.session_id}": [
            f"{t.speaker}: {t.text}" for t in s.turns if t.speaker == s.speakers[0]
        ]
        for s in sessions
    }


async def listed_memories(
    client: AsyncEpisodicClient, agent: str, users: Iterable[str]
) -> dict[str, list[str]]:
    """Every live memory of the users, by the episode it was extracted from."""
    found: dict[str, list[str]] = {}
    for user in users:
        token = ""
        while True:
            page = await client.list_memories(agent, user, page_size=1000, page_token=token)
            for memory in page.memories:
                found.setdefault(memory.source.episode_id, []).append(memory.text)
            token = page.next_page_token
            if not token:
                break
    return found


async def _extracted(sessions: list[Session], embedder: str) -> dict[str, list[str]]:
    from episodic_lab.evals.locomo import AGENT, loaded_server

    async with loaded_server(sessions, embedder) as client:
        return await listed_memories(client, AGENT, sorted({s.sample_id for s in sessions}))


def run_eval_observations(args: argparse.Namespace) -> int:
    from episodic_lab.evals.flags import DEFAULT_DATA

    directory: Path = args.data or DEFAULT_DATA
    sessions, _ = load_locomo(directory)
    gold = user_observations(sessions, load_observations(directory))
    memories = asyncio.run(_extracted(sessions, args.embedder))
    mine, base = score(sessions, gold, memories), score(sessions, gold, every_user_turn(sessions))
    print(
        f"observations of the user (first speaker): {mine['overall'].observations}, {len(sessions)} sessions"
    )
    for name, tally in mine.items():
        print(tally.line(name))
    print("baseline: every user turn is a memory")
    for name, tally in base.items():
        print(tally.line(name))
    if args.errors:
        _print_misses(sessions, gold, memories)
    # The second kind of text, locally with the server's default extractor: a rule tuned to
    # LoCoMo's style shows up as a loss here.
    chats = print_chats(args.chats, ExtractiveMemoryExtractor(), args.errors)
    overall = mine["overall"]
    below = [
        f"{name} {value:.3f} (floor {floor:.3f})"
        for name, value, floor in (
            ("recall", overall.recall, args.floor_recall),
            ("precision", overall.precision, args.floor_precision),
            ("chats recall", chats.recall, args.floor_chats_recall),
            ("chats precision", chats.precision, args.floor_chats_precision),
        )
        if value < floor
    ]
    if args.gate and below:
        print(f"GATE FAILED: {', '.join(below)}")
        return 1
    return 0


def _print_misses(
    sessions: Sequence[Session], gold: dict[str, list[str]], memories: dict[str, list[str]]
) -> None:
    for session in sessions:
        episode, speaker = f"{session.sample_id}-{session.session_id}", session.speakers[0]
        found = [meaning(text, (speaker,)) for text in memories.get(episode, [])]
        wanted = [meaning(text, (speaker,)) for text in gold[episode]]
        for text, words in zip(gold[episode], wanted, strict=True):
            if not any(covers(memory, words) for memory in found):
                print(f"MISS {episode}: {text}")
        for text, words in zip(memories.get(episode, []), found, strict=True):
            tag = "OK" if any(covers(w, words) for w in wanted) else "IMPRECISE"
            print(f"{tag} {episode}: {text}")
