"""`episodic-lab eval-knowledge`'s figures on tiny made-up fixtures: nDCG@10 and R@5 of ranked
documents, the gold documents of a question (observations sharing a dialogue turn with its
evidence, in its own conversation), and the share of their answer words a rendered text holds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from episodic_lab.cli import main as lab_main
from episodic_lab.evals.knowledge_data import (
    KnowledgeQuestion,
    gold_documents,
    load_knowledge,
    observations_of,
    with_gold,
)
from episodic_lab.evals.knowledge_metrics import (
    OVERALL,
    RankingReport,
    answer_coverage,
    answer_words,
    documents_ranked,
    ndcg_at,
    recall_at,
    rendered_bodies,
)
from episodic_lab.evals.locomo_data import MissingData

OBSERVATIONS: list[dict[str, object]] = [
    {"sample_id": "conv-1", "session_id": "S1", "text": "Ana adopted a cat named Miso.", "dia_ids": ["D1:2"]},
    {"sample_id": "conv-1", "session_id": "S1", "text": "Ana runs marathons.", "dia_ids": ["D1:5", "D1:6"]},
    {"sample_id": "conv-1", "session_id": "S2", "text": "Ben moved to Porto in May.", "dia_ids": ["D2:1"]},
    {"sample_id": "conv-2", "session_id": "S1", "text": "Cleo plays the cello.", "dia_ids": ["D1:2"]},
]


def question(sample_id: str, *evidence: str) -> KnowledgeQuestion:
    return KnowledgeQuestion(sample_id, f"{sample_id}:q", "What?", "single-hop", frozenset(evidence))


def test_ndcg_is_one_when_the_gold_documents_lead() -> None:
    assert ndcg_at(["a", "b", "c"], frozenset({"a", "b"})) == pytest.approx(1.0)


def test_ndcg_discounts_a_gold_document_by_its_rank() -> None:
    # One gold document at rank 3 of 10: 1/log2(4) over the ideal 1/log2(2).
    assert ndcg_at(["x", "y", "a"], frozenset({"a"})) == pytest.approx(0.5)
    two = ndcg_at(["a", "x", "b"], frozenset({"a", "b"}))
    assert two == pytest.approx((1 + 1 / 2) / (1 + 1 / math.log2(3)))


def test_ndcg_counts_only_the_first_ten_and_caps_the_ideal_at_ten() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert ndcg_at(ranked, frozenset({"a"})) == 0.0
    gold = frozenset(f"g{i}" for i in range(12))
    assert ndcg_at(sorted(gold), gold) == pytest.approx(1.0)


def test_ndcg_and_recall_of_nothing_found_or_no_gold_are_zero() -> None:
    assert ndcg_at([], frozenset({"a"})) == 0.0
    assert recall_at([], frozenset({"a"})) == 0.0
    assert ndcg_at(["a"], frozenset()) == 0.0
    assert recall_at(["a"], frozenset()) == 0.0


def test_recall_at_five_is_the_share_of_gold_documents_in_the_top_five() -> None:
    ranked = ["a", "x", "y", "z", "w", "b"]
    assert recall_at(ranked, frozenset({"a", "b"})) == 0.5
    assert recall_at(ranked, frozenset({"a"})) == 1.0
    assert recall_at(ranked, frozenset({"b"})) == 0.0


def test_chunks_of_one_document_rank_it_once_at_its_best_chunk() -> None:
    assert documents_ranked(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]


def test_observations_are_numbered_within_their_session() -> None:
    ids = [o.document_id for o in observations_of(OBSERVATIONS)]
    assert ids == ["conv-1.S1.0", "conv-1.S1.1", "conv-1.S2.0", "conv-2.S1.0"]


def test_gold_documents_share_an_evidence_turn_in_the_same_conversation() -> None:
    observations = observations_of(OBSERVATIONS)
    # D1:2 is a turn of both conversations: only conv-1's observation is gold for conv-1.
    assert gold_documents(question("conv-1", "D1:2"), observations) == {"conv-1.S1.0"}
    assert gold_documents(question("conv-1", "D1:6", "D2:1"), observations) == {"conv-1.S1.1", "conv-1.S2.0"}
    assert gold_documents(question("conv-2", "D1:2"), observations) == {"conv-2.S1.0"}
    assert gold_documents(question("conv-1", "D9:9"), observations) == frozenset()


def test_questions_without_a_gold_document_are_skipped_and_counted() -> None:
    observations = observations_of(OBSERVATIONS)
    questions = [question("conv-1", "D1:2"), question("conv-1"), question("conv-3", "D1:2")]
    asked, skipped = with_gold(questions, observations)
    assert [a.gold for a in asked] == [frozenset({"conv-1.S1.0"})]
    assert skipped == 2


def test_answer_words_are_lower_cased_content_words() -> None:
    assert answer_words(["Ana adopted a cat named Miso.", "She runs in the park"]) == {
        "ana", "adopted", "cat", "named", "miso", "runs", "park",
    }  # fmt: skip


def test_answer_coverage_is_the_share_of_answer_words_in_the_text() -> None:
    wanted = answer_words(["Ana adopted a cat named Miso."])  # ana adopted cat named miso
    assert answer_coverage(wanted, "ANA has a CAT") == pytest.approx(2 / 5)
    assert answer_coverage(wanted, "Ana adopted a cat named Miso!") == 1.0
    assert answer_coverage(wanted, "") == 0.0
    assert answer_coverage(set(), "anything") == 0.0


def test_coverage_reads_the_rendered_items_not_the_section_header() -> None:
    content = "[Knowledge]\nSource: conv-1.S1.0\nAna adopted Miso.\n---\nSource: x\nBen moved."
    start = content.index("Ana")
    second = content.index("Ben")
    spans = [(start, start + len("Ana adopted Miso.")), (second, second + len("Ben moved.")), (0, 0)]
    assert rendered_bodies(content, spans) == "Ana adopted Miso.\nBen moved."
    assert answer_coverage({"knowledge", "source", "miso"}, rendered_bodies(content, spans)) == pytest.approx(
        1 / 3
    )


def test_ranking_report_averages_per_conversation_and_overall() -> None:
    report = RankingReport()
    report.add("hybrid", "conv-1", ["a", "b"], frozenset({"a"}))
    report.add("hybrid", "conv-2", ["x", "y"], frozenset({"y"}))
    ndcg, recall = report.overall("hybrid")
    assert recall == 1.0
    assert ndcg == pytest.approx((1.0 + 1 / math.log2(3)) / 2)
    assert report.by_method["hybrid"]["conv-1"].means() == (1.0, 1.0)
    assert report.by_method["hybrid"][OVERALL].count == 2
    assert "conv-2" in report.table()


def test_missing_data_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(MissingData, match=r"observations\.jsonl"):
        load_knowledge(tmp_path)
    assert lab_main(["eval-knowledge", "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"episodic-lab eval-knowledge: no LoCoMo observations in {tmp_path}")
    assert "--data DIR" in err


def test_the_data_is_read_from_the_directory_given(tmp_path: Path) -> None:
    (tmp_path / "observations.jsonl").write_text("\n".join(json.dumps(o) for o in OBSERVATIONS) + "\n")
    raw = {
        "sample_id": "conv-1", "question_id": "conv-1:q0", "question": "Who is Miso?", "answer": "a cat",
        "category": 4, "category_name": "single-hop", "evidence_dia_ids": ["D1:2"],
    }  # fmt: skip
    (tmp_path / "questions.jsonl").write_text(json.dumps(raw) + "\n\n")
    observations, questions = load_knowledge(tmp_path)
    assert len(observations) == 4
    assert questions == [
        KnowledgeQuestion("conv-1", "conv-1:q0", "Who is Miso?", "single-hop", frozenset({"D1:2"}))
    ]
