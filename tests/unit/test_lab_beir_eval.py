"""`episodic-lab eval-knowledge`'s BEIR reader on a tiny made-up set (tests/data/beir_tiny):
the corpus, the queries that have a relevant document, BEIR's relevance rule, the seeded
subset, and the in-process rankings (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from episodic_lab.cli import main as lab_main
from episodic_lab.evals.knowledge_beir import BeirReport, InvertedBm25, gate, indexed_chunks
from episodic_lab.evals.knowledge_beir_data import is_beir, load_beir, subset
from episodic_lab.evals.locomo_data import MissingData

TINY = Path(__file__).resolve().parents[1] / "data" / "beir_tiny"


def test_the_reader_keeps_titles_and_only_the_queries_with_a_relevant_document() -> None:
    data = load_beir(TINY)
    assert is_beir(TINY)
    assert [d.document_id for d in data.documents] == ["d1", "d2", "d3", "d4"]
    assert data.documents[0].title == "Copper kettles in glacier lakes"
    # q3 has no qrels line; q2's pair of score 0 is not relevant (BEIR's rule).
    assert [(q.query_id, q.relevant) for q in data.queries] == [
        ("q1", frozenset({"d1"})),
        ("q2", frozenset({"d3"})),
    ]


def test_a_missing_split_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(MissingData, match=r"corpus\.jsonl"):
        load_beir(tmp_path)
    with pytest.raises(MissingData, match=r"qrels/test\.tsv"):
        load_beir(TINY, "test")


def test_a_subset_keeps_the_relevant_documents_and_is_the_same_each_time() -> None:
    data = load_beir(TINY)
    small = subset(data, 1, 2)
    assert [q.query_id for q in small.queries] == ["q1"]
    assert "d1" in {d.document_id for d in small.documents}
    assert len(small.documents) == 2
    assert small == subset(data, 1, 2)


def test_bm25_and_the_word_index_find_the_relevant_abstracts() -> None:
    data = load_beir(TINY)
    bm25 = InvertedBm25([f"{d.title} {d.text}" for d in data.documents])
    assert bm25.top(data.queries[0].text, 1) == [0]
    assert bm25.top(data.queries[1].text, 1) == [2]
    chunks = indexed_chunks(data.documents)
    assert [key for key, _ in chunks] == ["d1#0", "d2#0", "d3#0", "d4#0"]
    assert chunks[0][1].startswith("Copper kettles in glacier lakes\n")


def test_the_gate_needs_hybrid_above_bm25_and_the_floor() -> None:
    report = BeirReport()
    report.add("bm25", ["d2", "d1"], frozenset({"d1"}), 0.001)
    report.add("hybrid", ["d1", "d2"], frozenset({"d1"}), 0.001)
    assert gate(report, 0.9)
    assert not gate(report, 1.01)
    assert "hybrid" in report.table()


def test_the_command_runs_in_process_on_the_tiny_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert lab_main(["eval-knowledge", "--data", str(TINY), "--words-only"]) == 0
    out = capsys.readouterr().out
    assert "2 queries" in out
    assert "words" in out
    assert "bm25" in out
