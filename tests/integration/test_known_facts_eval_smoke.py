"""`episodic-lab eval-known-facts` end to end on a one-user set written here: a real server
subprocess, client-written and extracted memories, BuildContext per question, the table and
the gate's exit status. Never asserts a timing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from episodic_lab.cli import main

USER = {
    "user": "alice",
    "client": [{"id": "c1", "text": "Alice is vegetarian", "kind": "fact"}],
    "episodes": [["I'm vegetarian. I work as a nurse at the city hospital."]],
    "extracted": [{"id": "x1", "match": "i'm vegetarian"}, {"id": "x2", "match": "nurse"}],
    "same": [["c1", "x1"]],
    "questions": [
        {"text": "What should I cook for dinner tonight?", "gold": ["c1", "x1"]},
        {"text": "What is my job?", "gold": ["x2"]},
    ],
}


def test_eval_known_facts_prints_the_table_and_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps(USER) + "\n")
    argv = ["eval-known-facts", "--data", str(data), "--embedder", "hashing", "--gate"]

    assert main([*argv, "--floor-answered", "1.0", "--ceiling-duplicates", "0.0"]) == 0
    out = capsys.readouterr().out
    assert "eval-known-facts: 1 users, 2 questions" in out
    row = re.search(r"^overall +2 +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)", out, re.MULTILINE)
    assert row and float(row.group(1)) == 1.0 and float(row.group(3)) == 0.0  # answered, no duplicate
    assert "gate: passed" in out

    assert main([*argv, "--floor-precision", "1.0"]) == 1  # two facts rendered, one of them gold
    assert "gate: FAILED: precision" in capsys.readouterr().out
