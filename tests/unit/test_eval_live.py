"""`episodic-lab eval-live`'s pure parts on made-up values: the 4-turn windows, the BM25 cut
best first, plain truncation, which questions count and what each method is given, the
figures and the gate. No server."""

from __future__ import annotations

import argparse
from datetime import datetime

import pytest

from episodic_lab.evals.live import (
    METHODS,
    SECTIONS,
    Probe,
    Transcript,
    answerable,
    best_first,
    conversations_of,
    coverages,
    gate_failures,
    rows,
    summarize,
    table,
    tail,
    windows,
)
from episodic_lab.evals.live_flags import budgets_of
from episodic_lab.evals.locomo_data import Question, Session, Turn


def _session(sid: str, started: datetime, *texts: str, sample: str = "conv-1") -> Session:
    turns = tuple(Turn("Ann" if i % 2 == 0 else "Bob", text) for i, text in enumerate(texts))
    return Session(sample, sid, started, ("Ann", "Bob"), turns)


def _question(
    qid: str, text: str, answer: str, category: str = "single-hop", sample: str = "conv-1"
) -> Question:
    return Question(sample, qid, text, category, frozenset({"S1"}), answer)


def _probe(qid: str, value: float, category: str = "single-hop", sample: str = "conv-1") -> Probe:
    return Probe(sample, qid, category, 100, 400, dict.fromkeys(METHODS, value), {"history": 80})


def test_windows_are_four_lines_every_two_and_the_last_ends_at_the_last_line() -> None:
    assert windows(0) == []
    assert windows(3) == [range(0, 3)]
    assert windows(4) == [range(0, 4)]
    assert windows(9) == [range(0, 4), range(2, 6), range(4, 8), range(5, 9)]
    assert windows(10) == [range(0, 4), range(2, 6), range(4, 8), range(6, 10)]
    assert windows(7, size=4, stride=4) == [range(0, 4), range(3, 7)]
    for count in range(1, 30):
        covered = {line for w in windows(count) for line in w}
        assert covered == set(range(count))


def test_best_first_takes_the_best_window_first_each_line_once_and_cuts_to_size() -> None:
    lines = ["a0", "a1", "a2", "a3", "a4", "a5"]
    ranges = [range(0, 4), range(2, 6)]
    assert best_first(lines, ranges, [1.0, 2.0], 100) == "a2\na3\na4\na5\n\na0\na1"
    assert best_first(lines, ranges, [2.0, 1.0], 100) == "a0\na1\na2\na3\n\na4\na5"
    assert best_first(lines, ranges, [1.0, 1.0], 100).startswith("a0")  # ties: the earlier window
    assert best_first(lines, ranges, [1.0, 2.0], 7) == "a2\na3\na"
    assert best_first(lines, ranges, [1.0, 2.0], 0) == ""


def test_tail_is_the_last_characters_and_nothing_at_zero() -> None:
    assert tail("abcdef", 2) == "ef"
    assert tail("abcdef", 60) == "abcdef"
    assert tail("abcdef", 0) == ""


def test_the_transcript_dates_every_line_by_its_session_and_ranks_windows_by_bm25() -> None:
    early = _session("S1", datetime(2023, 5, 8, 13, 56), "hello", "hi", "I adopted a kitten", "lovely")
    late = _session("S2", datetime(2023, 6, 2, 9, 30), "the marathon was hard", "well done")
    transcript = Transcript([early, late])
    assert transcript.lines[0] == "[8 May 2023] Ann: hello"
    assert transcript.lines[-1] == "[2 June 2023] Bob: well done"
    assert transcript.text == "\n".join(transcript.lines)
    best = transcript.best_windows("How was the marathon?", 200)
    assert best.startswith("[8 May 2023] Ann: I adopted")  # the window of lines 2-5 holds "marathon"
    assert "[2 June 2023] Ann: the marathon was hard" in best.split("\n\n")[0]


def test_only_answerable_questions_with_answer_words_are_asked() -> None:
    asked = [
        _question("q1", "Who?", "Pickle"),
        _question("q2", "When?", "7 May 2023", category="temporal"),
        _question("q3", "Why?", "because", category="open-domain"),
        _question("q4", "What?", "", category="adversarial"),
        _question("q5", "Which?", "the", category="multi-hop"),  # stop words only
    ]
    assert [q.question_id for q in answerable(asked)] == ["q1", "q2"]
    sessions = [
        _session("S1", datetime(2023, 5, 8), "x"),
        _session("S1", datetime(2023, 5, 8), "y", sample="c2"),
    ]
    found = conversations_of(sessions, [*asked, _question("q6", "Who?", "Ann", sample="c2")], limit=1)
    assert [(c.sample_id, [q.question_id for q in c.questions]) for c in found] == [
        ("conv-1", ["q1"]),
        ("c2", ["q6"]),
    ]


def test_each_method_gets_its_own_text_the_baselines_at_the_rendered_size() -> None:
    transcript = Transcript(
        [_session("S1", datetime(2023, 5, 8), "my kitten is called Pickle", "nice", "I ran in Lisbon", "wow")]
    )
    q = _question("q1", "Where did Ann run a marathon and what is her kitten called?", "Lisbon Pickle")
    measured = coverages(q, "Pickle", transcript)  # 6 characters rendered
    assert measured == {"rendered": 0.5, "tail": 0.0, "bm25_windows": 0.0, "ceiling": 1.0}
    assert coverages(q, "", transcript)["tail"] == 0.0  # nothing rendered: the baselines get nothing
    wide = coverages(q, "x" * len(transcript.text), transcript)
    assert wide == {"rendered": 0.0, "tail": 1.0, "bm25_windows": 1.0, "ceiling": 1.0}


def test_rows_are_by_conversation_then_category_then_overall() -> None:
    probes = [
        _probe("q1", 1.0),
        _probe("q2", 0.4, category="temporal"),
        _probe("q3", 0.5, sample="conv-2"),
    ]
    summaries = rows(probes)
    assert list(summaries) == ["conv-1", "conv-2", "single-hop", "temporal", "overall"]
    overall = summaries["overall"]
    assert overall.questions == 3
    assert overall.coverage["rendered"].covered == pytest.approx(2 / 3)  # 1.0 and 0.5 are >= 0.5
    assert overall.coverage["rendered"].mean == pytest.approx(1.9 / 3)
    assert (overall.tokens, overall.chars) == (100, 400)
    assert set(overall.sections) == set(SECTIONS) and overall.sections["history"] == 80
    assert "summary" in SECTIONS and "past_conversations" in SECTIONS  # read from the descriptor
    assert summarize([]).questions == 0
    text = table(summaries)
    assert len(text.splitlines()) == 6 and text.splitlines()[-1].startswith("overall")


def test_the_gate_fails_below_the_floor_or_below_bm25_windows() -> None:
    good = summarize([_probe("q1", 1.0), _probe("q2", 0.6)])
    weak = summarize([_probe("q1", 1.0), _probe("q2", 0.2)])
    passed, failed = gate_failures({4000: good, 8000: good}, {4000: 0.9, 8000: 0.9})
    assert failed == [] and len(passed) == 4
    passed, failed = gate_failures({4000: weak}, {4000: 0.6, 8000: 0.6})
    assert "4000 tokens: rendered covered 0.500 < floor 0.6" in failed
    assert any("8000 tokens: not measured" in line for line in passed)
    beaten = Probe(
        "conv-1", "q3", "single-hop", 1, 1, {**dict.fromkeys(METHODS, 0.0), "bm25_windows": 1.0}, {}
    )
    _, failed = gate_failures({4000: summarize([beaten])}, {4000: 0.0})
    assert failed == ["4000 tokens: rendered mean 0.000 < bm25 windows 1.000 - 0.02"]


def test_budgets_are_positive_token_counts_each_once() -> None:
    assert budgets_of("4000, 8000,4000") == (4000, 8000)
    for bad in ("", "4k", "0", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            budgets_of(bad)
