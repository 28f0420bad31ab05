"""The hand-written recall set of chats (tests/data/recall_chats.jsonl) and how eval-recall reads it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from episodic_lab.evals.recall_chats import load_chats

CHATS = Path(__file__).resolve().parents[1] / "data" / "recall_chats.jsonl"
TODAY = datetime(2027, 5, 3, 9, 0, tzinfo=UTC)


def test_every_gold_episode_is_one_of_the_asking_users_episodes() -> None:
    episodes, questions = load_chats(CHATS, TODAY)
    mine = {(e.user, e.episode_id.removeprefix(f"{e.user}-")) for e in episodes}
    assert questions
    for q in questions:
        assert q.evidence
        assert {(q.sample_id, g) for g in q.evidence} <= mine, q.question_id


def test_times_move_by_whole_days_so_the_sets_now_is_the_runs_today() -> None:
    rows = [json.loads(line) for line in CHATS.read_text().splitlines() if line.strip()]
    (now,) = [datetime.fromisoformat(r["now"]) for r in rows if r["kind"] == "now"]
    written = {r["id"]: datetime.fromisoformat(r["start"]) for r in rows if r["kind"] == "episode"}
    episodes, _ = load_chats(CHATS, TODAY)
    for e in episodes:
        assert e.started - written[e.episode_id] == TODAY.replace(hour=0) - now.replace(hour=0, minute=0)


def test_a_month_placeholder_becomes_the_month_its_episode_ended_in_after_the_shift() -> None:
    episodes, questions = load_chats(CHATS, TODAY)
    ended = {e.episode_id: e.ended for e in episodes}
    raw = {
        r["id"]: r["question"]
        for r in map(json.loads, CHATS.read_text().splitlines())
        if r["kind"] == "question" and "{in_month:dana-export}" in r["question"]
    }
    (qid,) = raw
    (q,) = [q for q in questions if q.question_id == qid]
    assert f"in {ended['dana-export'].strftime('%B')}" in q.text
    assert "{" not in "".join(q.text for q in questions)
