"""`episodic-lab eval-shares`'s pure parts on made-up values: the splits it accepts, the
per-request memory configs it sends, what it reads of a rendered context, and its figures."""

from __future__ import annotations

import argparse

import pytest

from episodic_client.context import BuiltContext
from episodic_client.v1 import agent_pb2, context_pb2, knowledge_pb2
from episodic_lab.evals.locomo_data import Question
from episodic_lab.evals.shares import (
    Seen,
    TopK,
    answerable,
    changed,
    conversation_table,
    section_texts,
    seen_in,
    settings_of,
    summarize,
)
from episodic_lab.evals.shares_flags import DEFAULT_SPLIT, MAX_SPLITS, Split, split_of, splits_of


def _question(qid: str, answer: str, category: str = "single-hop", sample: str = "conv-1") -> Question:
    return Question(sample, qid, f"question {qid}?", category, frozenset({"S1"}), answer)


def _seen(qid: str, value: float, sample: str = "conv-1") -> Seen:
    sections = dict.fromkeys(("knowledge", "known_facts", "past"), value)
    return Seen(sample, qid, value, sections, {"knowledge": 10, "known_facts": 20, "past": 30})


def test_a_split_is_three_percents_that_sum_to_at_most_100() -> None:
    assert split_of(" 20/20/60 ") == Split(20, 20, 60)
    assert split_of("0/0/100").label == "0/0/100"
    for bad in ("25/25", "25/25/a", "-1/50/50", "101/0/0", "40/40/40"):
        with pytest.raises(ValueError, match="split"):
            split_of(bad)


def test_splits_always_start_with_the_default_once_and_are_capped() -> None:
    assert splits_of("20/20/60,25/25/50,20/20/60") == (DEFAULT_SPLIT, Split(20, 20, 60))
    too_many = ",".join(f"{k}/0/{100 - k}" for k in range(MAX_SPLITS + 1))
    with pytest.raises(argparse.ArgumentTypeError, match="at most"):
        splits_of(too_many)
    with pytest.raises(argparse.ArgumentTypeError, match="sums to 110"):
        splits_of("60/30/20")


def test_each_setting_overrides_the_three_percents_and_turns_one_source_off_at_the_default() -> None:
    settings = settings_of([DEFAULT_SPLIT, Split(20, 20, 60)])
    memory = settings[1].memory(TopK(recall=5, knowledge=7, memory=9))
    assert (memory.knowledge_budget_percent, memory.known_facts_budget_percent) == (20, 20)
    assert memory.recall_budget_percent == 60 and memory.max_working_memory_tokens == 4000
    assert (memory.recall_top_k, memory.knowledge_top_k, memory.memory_top_k) == (5, 7, 9)
    assert memory.knowledge and memory.known_facts and memory.recall_mode == agent_pb2.RECALL_MODE_HYBRID
    off = {s.label: s.memory(TopK(5, 5, 5)) for s in settings[2:]}
    assert not off["25/25/50 knowledge off"].knowledge
    assert not off["25/25/50 known facts off"].known_facts
    assert off["25/25/50 recall off"].recall_mode == agent_pb2.RECALL_MODE_NONE
    zero = settings_of([Split(0, 0, 100)])[0].memory(TopK(5, 5, 5))
    assert zero.HasField("knowledge_budget_percent") and zero.knowledge_budget_percent == 0


def test_answerable_questions_keep_checkable_categories_and_limit_each_conversation() -> None:
    questions = [
        _question("a1", "Paris"),
        _question("a2", "", category="single-hop"),
        _question("a3", "maybe", category="open-domain"),
        _question("a4", "7 May 2023", category="temporal"),
        _question("b1", "cello", sample="conv-2"),
    ]
    assert [q.question_id for q in answerable(questions)] == ["a1", "a4", "b1"]
    assert [q.question_id for q in answerable(questions, limit=1)] == ["a1", "b1"]


def test_coverage_reads_knowledge_bodies_without_their_source_lines() -> None:
    header = "[Knowledge]\nReference material:\n"
    body = "Ana adopted a cat named Miso."
    content = f"{header}Source: conv-26.S7.0\n{body}\n---\n"
    start = content.index(body)
    report = context_pb2.ContextReport(
        section_tokens=context_pb2.SectionTokens(knowledge=12, known_facts=8, past_conversations=40),
        knowledge=[
            knowledge_pb2.RenderedKnowledge(
                fate=knowledge_pb2.KNOWLEDGE_FATE_WHOLE, start_char=start, end_char=start + len(body)
            )
        ],
    )
    built = BuiltContext(
        [
            context_pb2.ContextMessage(section=context_pb2.CONTEXT_SECTION_KNOWLEDGE, content=content),
            context_pb2.ContextMessage(section=context_pb2.CONTEXT_SECTION_KNOWN_FACTS, content="- runs"),
            context_pb2.ContextMessage(
                section=context_pb2.CONTEXT_SECTION_PAST_CONVERSATIONS, content="in May"
            ),
            context_pb2.ContextMessage(section=context_pb2.CONTEXT_SECTION_USER_MESSAGE, content="S7 26?"),
        ],
        report,
    )
    texts = section_texts(built)
    assert texts == {"knowledge": body, "known_facts": "- runs", "past": "in May"}
    seen = seen_in(_question("q", "Miso, 26 May"), texts, {"knowledge": 12})
    assert seen.sections == {
        "knowledge": pytest.approx(1 / 3),
        "known_facts": 0.0,
        "past": pytest.approx(1 / 3),
    }
    assert seen.coverage == pytest.approx(2 / 3)
    assert seen.tokens == {"knowledge": 12, "known_facts": 0, "past": 0}


def test_figures_count_covered_questions_and_the_ones_a_setting_gains_or_loses() -> None:
    default = [_seen("q1", 1.0), _seen("q2", 0.4), _seen("q3", 0.5, sample="conv-2")]
    wider = [_seen("q1", 0.2), _seen("q2", 0.5), _seen("q3", 1.0, sample="conv-2")]
    row = summarize(wider)
    assert row.questions == 3 and row.covered == pytest.approx(2 / 3)
    assert row.mean == pytest.approx(1.7 / 3) and row.total_tokens == 60
    assert changed(wider, default) == (1, 1)
    lines = conversation_table({"25/25/50": default, "20/20/60": wider}, ["25/25/50", "20/20/60"], "25/25/50")
    assert lines.splitlines()[2].split("|")[1].split()[-1] == "+1/-1"
    assert summarize([]).questions == 0
