"""`episodic-lab eval-recall --what-the-model-sees` end to end on a tiny LoCoMo-format
directory written here (2 sessions, 3 questions): a real server subprocess, real BuildContext
calls on probe episodes, and a per-category table (printed and JSON) whose figures are
shares in [0, 1]. Never asserts a timing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

SESSIONS = [
    {
        "sample_id": "conv-t",
        "session_id": "S1",
        "date_time": "1:00 pm on 8 May, 2023",
        "date_time_iso": "2023-05-08T13:00:00",
        "speakers": ["Ann", "Bob"],
        "turns": [
            {"speaker": "Ann", "text": "I adopted a grey kitten called Pickle last week.", "dia_id": "D1:1"},
            {"speaker": "Bob", "text": "Pickle is a lovely name! Is she settling in?", "dia_id": "D1:2"},
            {"speaker": "Ann", "text": "She sleeps on the piano all day.", "dia_id": "D1:3"},
        ],
    },
    {
        "sample_id": "conv-t",
        "session_id": "S2",
        "date_time": "9:30 am on 2 June, 2023",
        "date_time_iso": "2023-06-02T09:30:00",
        "speakers": ["Ann", "Bob"],
        "turns": [
            {
                "speaker": "Ann",
                "text": "I ran the Lisbon marathon on Sunday in four hours.",
                "dia_id": "D2:1",
            },
            {
                "speaker": "Bob",
                "text": "Congratulations, that's a strong time for a first marathon!",
                "dia_id": "D2:2",
            },
        ],
    },
]
QUESTIONS = [
    ("q0", "What is the name of Ann's kitten?", "Pickle", 4, "single-hop", "S1"),
    ("q1", "Which marathon did Ann run?", "the Lisbon marathon", 2, "temporal", "S2"),
    ("q2", "What did Bob's kitten eat?", None, 5, "adversarial", "S1"),
]
CATEGORIES = ("adversarial", "single-hop", "temporal", "overall")
SHARE = r"(?:0|1)\.\d{3}"


def _write(directory: Path) -> None:
    (directory / "sessions.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SESSIONS))
    lines = [
        {"sample_id": "conv-t", "question_id": f"conv-t:{qid}", "question": text, "answer": answer,
         "category": number, "category_name": name, "evidence_session_ids": [session]}
        for qid, text, answer, number, name, session in QUESTIONS
    ]  # fmt: skip
    (directory / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))


def test_eval_context_prints_shares_per_category(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path)
    figures = tmp_path / "context.json"
    argv = ["eval-recall", "--what-the-model-sees", "--data", str(tmp_path), "--embedder", "hashing"]

    assert main([*argv, "--json", str(figures)]) == 0  # no --gate-context: it only reports

    out = capsys.readouterr().out
    assert "what the model sees: 3 questions" in out
    assert re.search(r"^category +n evid\.rend n cov \| +rendered mean", out, re.MULTILINE)
    for category in CATEGORIES:
        row = re.search(rf"^{category} +(\d+) +({SHARE}) +(\d+) \|(.*)$", out, re.MULTILINE)
        assert row, f"no row for {category}"
        cells = row.group(4).split("|")
        assert len(cells) == 4  # rendered, bm25@chars, ceiling, recall tokens
        if category == "adversarial":  # no answer: no coverage
            assert all(cell.split() == ["-", "-"] for cell in cells[:3])
        else:
            assert all(re.fullmatch(rf" +{SHARE} +{SHARE} ", cell) for cell in cells[:3])
    summaries = json.loads(figures.read_text())["categories"]
    assert list(summaries) == list(CATEGORIES)
    overall = summaries["overall"]
    assert overall["questions"] == 3 and overall["answerable"] == 2
    assert 0.0 <= overall["evidence_rendered"] <= 1.0
    for method in ("rendered", "bm25_raw", "ceiling"):
        assert 0.0 <= overall["coverage"][method]["mean"] <= 1.0
        assert 0.0 <= overall["coverage"][method]["covered"] <= 1.0
    assert overall["coverage"]["ceiling"] == {"mean": 1.0, "covered": 1.0}  # the answers are in the text
    assert 0 < overall["recall_tokens_p50"] <= overall["recall_tokens_p90"]
    assert summaries["adversarial"]["coverage"] == {"rendered": None, "bm25_raw": None, "ceiling": None}
