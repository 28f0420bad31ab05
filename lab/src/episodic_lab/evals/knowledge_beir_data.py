"""A document-retrieval set in BEIR's layout (SciFact's train split, by default
../shared/eval/scifact-train), read at run time: the data itself is never part of the product.

- `corpus.jsonl`: one document a line, `{"_id", "title", "text", ...}`;
- `queries.jsonl`: `{"_id", "text", ...}`;
- `qrels/<split>.tsv`: `query-id<TAB>corpus-id<TAB>score`, a header line optional; a pair of
  score 0 or less is not relevant (BEIR's rule).

Only queries with a relevant document are asked. A subset (`subset`) keeps the asked queries'
relevant documents and a seeded sample of the others: the same subset on every run."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.evals.locomo_data import MissingData

CORPUS = "corpus.jsonl"
QUERIES = "queries.jsonl"


@dataclass(frozen=True, slots=True)
class BeirDocument:
    document_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BeirQuery:
    query_id: str
    text: str
    relevant: frozenset[str]


@dataclass(frozen=True, slots=True)
class BeirSet:
    documents: list[BeirDocument]
    queries: list[BeirQuery]


def is_beir(directory: Path) -> bool:
    return (directory / CORPUS).is_file()


def load_beir(directory: Path, split: str = "train") -> BeirSet:
    qrels_path = directory / "qrels" / f"{split}.tsv"
    missing = [p.name for p in (directory / CORPUS, directory / QUERIES, qrels_path) if not p.is_file()]
    if missing:
        raise MissingData(
            f"no BEIR data set in {directory} ({' and '.join(missing)} not found): pass --data DIR, a "
            f"directory holding {CORPUS}, {QUERIES} and qrels/{split}.tsv (e.g. ../shared/eval/scifact-train)"
        )
    documents = []
    for line in _lines(directory / CORPUS):
        raw = json.loads(line)
        documents.append(BeirDocument(str(raw["_id"]), str(raw.get("title") or ""), str(raw["text"])))
    relevant = read_qrels(qrels_path)
    queries = []
    for line in _lines(directory / QUERIES):
        raw = json.loads(line)
        gold = relevant.get(str(raw["_id"]))
        if gold:
            queries.append(BeirQuery(str(raw["_id"]), str(raw["text"]), frozenset(gold)))
    return BeirSet(documents, queries)


def read_qrels(path: Path) -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = {}
    for line in _lines(path):
        fields = line.split("\t")
        if len(fields) < 3 or fields[0] == "query-id":
            continue
        try:
            score = float(fields[2])
        except ValueError:
            continue  # a header of another spelling
        if score > 0:
            relevant.setdefault(fields[0], set()).add(fields[1])
    return relevant


def subset(data: BeirSet, queries: int, documents: int, seed: int = 46) -> BeirSet:
    """The first `queries` queries (0: all) over their relevant documents and a seeded sample
    of the others, `documents` in all (0: every document)."""
    asked = data.queries[:queries] if queries else data.queries
    if not documents or documents >= len(data.documents):
        return BeirSet(data.documents, asked)
    wanted = {d for q in asked for d in q.relevant}
    others = [d for d in data.documents if d.document_id not in wanted]
    room = max(documents - len(wanted), 0)
    sampled = {d.document_id for d in random.Random(seed).sample(others, min(room, len(others)))}
    kept = [d for d in data.documents if d.document_id in wanted or d.document_id in sampled]
    return BeirSet(kept, asked)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
