"""LoCoMo's annotated observations as a knowledge base, and the questions asked of it (read from
a directory given at run time; the data itself is never part of the product).

Each observation is one document; every document of a conversation (sample_id) belongs to one
agent. A question's gold documents are the observations of its conversation whose dialogue
turns (`dia_ids`) meet the question's evidence turns (`evidence_dia_ids`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.evals.locomo_data import MissingData

FILES = ("observations.jsonl", "questions.jsonl")


@dataclass(frozen=True, slots=True)
class Observation:
    sample_id: str
    session_id: str
    index: int  # its place among the observations of its session, from 0
    text: str
    dia_ids: frozenset[str]

    @property
    def document_id(self) -> str:
        return f"{self.sample_id}.{self.session_id}.{self.index}"


@dataclass(frozen=True, slots=True)
class KnowledgeQuestion:
    sample_id: str
    question_id: str
    text: str
    category: str
    evidence_dia_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class Asked:
    """A question with its gold documents (ids); only questions that have one are asked."""

    question: KnowledgeQuestion
    gold: frozenset[str]


def load_knowledge(directory: Path) -> tuple[list[Observation], list[KnowledgeQuestion]]:
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise MissingData(
            f"no LoCoMo observations in {directory} ({' and '.join(missing)} not found): the development "
            "split is not part of the repository; pass --data DIR, a directory holding observations.jsonl "
            "and questions.jsonl (by default ../shared/eval/locomo-dev, next to the checkout)"
        )
    observations = observations_of([json.loads(line) for line in _lines(directory / "observations.jsonl")])
    questions = [_question(json.loads(line)) for line in _lines(directory / "questions.jsonl")]
    return observations, questions


def observations_of(rows: Sequence[dict[str, object]]) -> list[Observation]:
    """Observations in file order, each numbered within its (sample_id, session_id)."""
    seen: dict[tuple[str, str], int] = {}
    observations = []
    for raw in rows:
        key = (str(raw["sample_id"]), str(raw["session_id"]))
        index = seen.get(key, 0)
        seen[key] = index + 1
        dia_ids = frozenset(str(d) for d in raw.get("dia_ids") or ())  # type: ignore[attr-defined]
        observations.append(Observation(key[0], key[1], index, str(raw["text"]), dia_ids))
    return observations


def gold_documents(question: KnowledgeQuestion, observations: Sequence[Observation]) -> frozenset[str]:
    """The ids of the observations of the question's conversation that share a dialogue turn
    with its evidence."""
    return frozenset(
        o.document_id
        for o in observations
        if o.sample_id == question.sample_id and o.dia_ids & question.evidence_dia_ids
    )


def with_gold(
    questions: Sequence[KnowledgeQuestion], observations: Sequence[Observation]
) -> tuple[list[Asked], int]:
    """The questions that have a gold document, with it, and how many were skipped."""
    by_sample: dict[str, list[Observation]] = {}
    for o in observations:
        by_sample.setdefault(o.sample_id, []).append(o)
    asked = [Asked(q, gold_documents(q, by_sample.get(q.sample_id, ()))) for q in questions]
    kept = [a for a in asked if a.gold]
    return kept, len(asked) - len(kept)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def _question(raw: dict[str, object]) -> KnowledgeQuestion:
    return KnowledgeQuestion(
        str(raw["sample_id"]),
        str(raw["question_id"]),
        str(raw["question"]),
        str(raw.get("category_name") or raw["category"]),
        frozenset(str(d) for d in raw.get("evidence_dia_ids") or ()),  # type: ignore[attr-defined]
    )
