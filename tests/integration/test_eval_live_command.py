"""`episodic-lab eval-live` end to end on a tiny LoCoMo-format directory written here (2 sessions
of one conversation, 2 questions): a real server subprocess, the conversation replayed into one
open episode per budget, the questions asked at the end, a table per budget (printed and JSON)
whose figures are shares in [0, 1], and a gate that fails below its floor. Never asserts a timing."""

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
            {"speaker": "Bob", "text": "Send me a photo of her.", "dia_id": "D1:3"},
            {
                "speaker": "Ann",
                "text": "Here she is.",
                "dia_id": "D1:4",
                "image_caption": "a kitten on a piano",
            },
        ],
    },
    {
        "sample_id": "conv-t",
        "session_id": "S2",
        "date_time": "9:30 am on 2 June, 2023",
        "date_time_iso": "2023-06-02T09:30:00",
        "speakers": ["Ann", "Bob"],
        "turns": [
            {"speaker": "Ann", "text": "I ran the Lisbon marathon on Sunday.", "dia_id": "D2:1"},
            {"speaker": "Bob", "text": "Congratulations, that's a strong first marathon!", "dia_id": "D2:2"},
        ],
    },
]
QUESTIONS = [
    ("q0", "What is the name of Ann's kitten?", "Pickle", 4, "single-hop", "S1"),
    ("q1", "Which marathon did Ann run?", "the Lisbon marathon", 2, "temporal", "S2"),
    ("q2", "What did Bob's kitten eat?", None, 5, "adversarial", "S1"),  # not answerable: not asked
]
SHARE = r"(?:0|1)\.\d{3}"


def _write(directory: Path) -> None:
    (directory / "sessions.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SESSIONS))
    lines = [
        {"sample_id": "conv-t", "question_id": f"conv-t:{qid}", "question": text, "answer": answer,
         "category": number, "category_name": name, "evidence_session_ids": [session]}
        for qid, text, answer, number, name, session in QUESTIONS
    ]  # fmt: skip
    (directory / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))


def test_eval_live_prints_a_table_per_budget_and_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path)
    figures = tmp_path / "live.json"
    argv = ["eval-live", "--data", str(tmp_path), "--embedder", "hashing", "--json", str(figures)]

    assert main([*argv, "--gate", "--floor-4k", "1.01", "--floor-8k", "0"]) == 1  # 4k cannot reach 1.01

    out = capsys.readouterr().out
    for budget in (4000, 8000):
        assert f"live episode, {budget}-token budget: 1 conversations" in out
        assert "(6 turns), 2 answerable questions" in out
    for label in ("conv-t", "single-hop", "temporal", "overall"):
        found = re.findall(
            rf"^{label} +(\d+)((?: \| +{SHARE} +{SHARE}){{4}}) \| +\d+ +\d+$", out, re.MULTILINE
        )
        assert len(found) == 2, f"no row for {label} at both budgets"
    assert "adversarial" not in out
    assert re.search(r"^section tokens \(mean\): system \d+, .*history \d+", out, re.MULTILINE)
    assert "gate: 4000 tokens: rendered covered " in out and "< floor 1.01: FAILED" in out
    assert "8000 tokens: rendered covered " in out and "gate: FAILED" in out
    assert re.search(r"^wall time \d+\.\d s$", out, re.MULTILINE)

    budgets = json.loads(figures.read_text())["budgets"]
    assert list(budgets) == ["4000", "8000"]
    for budget in budgets.values():
        overall = budget["groups"]["overall"]
        assert overall["questions"] == 2 and overall["tokens"] > 0 and overall["chars"] > 0
        for method, cover in overall["coverage"].items():
            assert 0.0 <= cover["mean"] <= 1.0 and 0.0 <= cover["covered"] <= 1.0, method
        assert overall["coverage"]["ceiling"] == {"mean": 1.0, "covered": 1.0}  # the answers are in the log
        assert overall["coverage"]["rendered"]["covered"] == 1.0  # six turns fit any budget whole
        assert [q["question_id"] for q in budget["questions"]] == ["conv-t:q0", "conv-t:q1"]


def test_eval_live_without_data_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-live", "--data", str(tmp_path / "nowhere")]) == 2
    assert "no LoCoMo data in" in capsys.readouterr().err
