"""The LoCoMo development split as plain values (read from a directory given at run
time; the data itself is never part of the product)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class Session:
    sample_id: str
    session_id: str
    started: datetime
    speakers: tuple[str, ...]
    turns: tuple[Turn, ...]
    date_time: str = ""  # as the data writes it ("1:56 pm on 8 May, 2023")

    def lines(self) -> list[str]:
        return [f"{t.speaker}: {t.text}" for t in self.turns]


@dataclass(frozen=True, slots=True)
class Question:
    sample_id: str
    question_id: str
    text: str
    category: str
    evidence: frozenset[str]  # session ids
    answer: str = ""  # the gold answer ("" for adversarial questions, which have none)


FILES = ("sessions.jsonl", "questions.jsonl")


class MissingData(Exception):
    """The LoCoMo directory is not where it was looked for (it is not part of the repository)."""


def load(directory: Path) -> tuple[list[Session], list[Question]]:
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise MissingData(
            f"no LoCoMo data in {directory} ({' and '.join(missing)} not found): the development split "
            "is not part of the repository; pass --data DIR, a directory holding sessions.jsonl and "
            "questions.jsonl (by default ../shared/eval/locomo-dev, next to the checkout)"
        )
    sessions = [_session(json.loads(line)) for line in _lines(directory / "sessions.jsonl")]
    questions = [_question(json.loads(line)) for line in _lines(directory / "questions.jsonl")]
    return sessions, [q for q in questions if q.evidence]


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def _session(raw: dict[str, object]) -> Session:
    turns = tuple(_turn(t) for t in raw["turns"])  # type: ignore[attr-defined]
    return Session(
        str(raw["sample_id"]),
        str(raw["session_id"]),
        datetime.fromisoformat(str(raw["date_time_iso"])),
        tuple(raw["speakers"]),  # type: ignore[arg-type]
        turns,
        str(raw.get("date_time") or ""),
    )


def _turn(raw: dict[str, str]) -> Turn:
    caption = raw.get("image_caption")
    text = f"{raw['text']} [shares a photo: {caption}]" if caption else raw["text"]
    return Turn(raw["speaker"], text)


def _question(raw: dict[str, object]) -> Question:
    return Question(
        str(raw["sample_id"]),
        str(raw["question_id"]),
        str(raw["question"]),
        str(raw.get("category_name") or raw["category"]),
        frozenset(str(s) for s in raw.get("evidence_session_ids") or ()),  # type: ignore[attr-defined]
        "" if raw.get("answer") is None else str(raw["answer"]),
    )
