"""The model call's JSON explains why each recalled episode was recalled (the words and the
passages), and the why-not answer names the candidate or says it was none (issue 28)."""

from __future__ import annotations

import dataclasses

from episodic.domain.inspection import fates
from episodic.domain.recall import Signal
from episodic.domain.why_recalled import candidacy, explain_recall
from episodic.edges.inspector import views
from episodic.service.inspection import InspectedCall
from tests.unit.test_inspection_why_recalled import LYON, QUERY, ROSES, call_with


def test_the_model_call_json_shows_each_recalled_episodes_matched_words_and_passages() -> None:
    call = call_with([ROSES, LYON])

    shown = views.model_call(InspectedCall(call, fates(call), explain_recall(call)), 0, "")

    why = shown["why_recalled"]
    assert why["query"] == QUERY and why["query_source"] == "user_message"
    assert why["query_words"] == ["oil", "spray", "roses", "lyon", "trip"]
    assert why["unmatched_words"] == ["spray"]
    assert "recall query" in why["not_recorded"]
    roses, lyon = why["episodes"]
    assert {k: roses[k] for k in ("episode_id", "rank", "candidates", "rendered", "basis")} == {
        "episode_id": "ep_roses",
        "rank": 1,
        "candidates": 2,
        "rendered": True,
        "basis": "passages",
    }
    assert roses["matched_words"] == ["oil", "roses"] and lyon["matched_words"] == ["lyon", "trip"]
    assert [p["text"] for p in roses["passages"]] == list(ROSES.excerpts)
    first = roses["passages"][0]
    assert first["kind"] == "excerpt" and first["matched_words"] == ["oil", "roses"]
    assert [s for s in first["segments"] if s["word"]] == [
        {"text": "roses", "word": "roses"},
        {"text": "oil", "word": "oil"},
    ]
    assert "".join(s["text"] for s in first["segments"]) == first["text"]
    assert [p["kind"] for p in lyon["parts"]] == ["summary", "key_facts"] and lyon["passages"] == []


def test_a_model_call_inspected_without_an_explanation_shows_none() -> None:
    call = call_with([ROSES])

    assert views.model_call(InspectedCall(call, fates(call)), 0, "")["why_recalled"] is None


def test_the_why_not_json_says_whether_it_was_a_candidate() -> None:
    call = call_with([ROSES, LYON])

    assert views.candidacy(call, candidacy(call, "neem oil")) == {
        "model_call_id": "mc_1",
        "about": "neem oil",
        "verdict": "rendered",
        "episode_ids": ["ep_roses"],
        "shared_words": ["oil"],
        "unseen_candidates": 0,
        "candidates": 2,
    }
    assert views.candidacy(call, candidacy(call, "ep_gone"))["verdict"] == "not_found"


def test_each_recalled_episode_shows_the_signals_that_found_it() -> None:
    found = dataclasses.replace(ROSES, signals=(Signal.SEMANTIC, Signal.LEXICAL))
    call = call_with([found, LYON])

    shown = views.model_call(InspectedCall(call, fates(call), explain_recall(call)), 0, "")

    assert [e["signals"] for e in shown["why_recalled"]["episodes"]] == [["semantic", "lexical"], []]
    assert [e["signals"] for e in shown["recalled_episodes"]] == [["semantic", "lexical"], []]
