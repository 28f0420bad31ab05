"""Why a past episode was recalled for a model call, or why not (issue 28): from the stored
call alone, the query's words each recalled episode's rendered entry holds (highlighted),
the passages that matched them, its rank and score; and, for an episode id or a phrase,
whether it was among the call's candidates. The blocks are rendered by assembly itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from episodic.domain.assembly import recall_block
from episodic.domain.context import (
    Compaction,
    ContextReport,
    ModelCall,
    RenderedMessage,
    Section,
    Span,
)
from episodic.domain.model import Role
from episodic.domain.recall import Snippet
from episodic.domain.why_recalled import (
    Basis,
    PartKind,
    QuerySource,
    Segment,
    Verdict,
    candidacy,
    explain_recall,
    highlight,
)

T0 = datetime(2026, 5, 1, tzinfo=UTC)
QUERY = "Which oil did I spray on the roses for the Lyon trip?"


def count(text: str) -> int:
    return len(text) // 4 + 1


def snippet(
    episode_id: str, summary: str, facts: Sequence[str] = (), excerpts: Sequence[str] = ()
) -> Snippet:
    return Snippet(episode_id, T0, T0 + timedelta(hours=1), summary, tuple(facts), 0.5, (), tuple(excerpts))


ROSES = snippet(
    "ep_roses",
    "Last spring my roses got black spot.",
    ["The user grows roses."],
    ["User: I sprayed the roses with neem oil.", "Assistant: Neem oil helps; clear the fallen leaves."],
)
LYON = snippet("ep_lyon", "We planned a weekend in Lyon in June.", ["Trip to Lyon in June."])
PARIS = snippet("ep_paris", "A museum day in Paris with the children.")


def call_with(
    snippets: Sequence[Snippet], allowance: int = 10_000, user: str | None = QUERY, block: str | None = None
) -> ModelCall:
    message, recalled = recall_block(snippets, allowance, count)
    messages = [RenderedMessage(Role.SYSTEM, "Be brief.", Section.SYSTEM, 3)]
    if block is not None:
        messages.append(RenderedMessage(Role.CONTEXT, block, Section.PAST_CONVERSATIONS, 50))
    elif message is not None:
        messages.append(message)
    if user is not None:
        messages.append(RenderedMessage(Role.USER, user, Section.USER_MESSAGE, 12))
    report = ContextReport(
        section_tokens={}, reply_priming=3, budget=1000, ceiling=2000, over_budget=False, pruned=0,
        stubbed=0, summarized=0, summary_span=Span(), history_span=Span(), compaction=Compaction.NONE,
        recalled=recalled, pending_digests=0, model="gpt-4o", token_encoding="o200k_base",
    )  # fmt: skip
    return ModelCall("t", "mc_1", "ep_now", "a", "u", T0 + timedelta(days=3), tuple(messages), report)


def lyon_alone() -> int:
    """An allowance that holds LYON's entry, and no more."""
    message, _ = recall_block([LYON], 10_000, count)
    assert message is not None
    return message.tokens + 10  # tokens are not exactly additive: a little room, not a whole entry


def test_each_recalled_episode_shows_the_query_words_its_rendered_entry_holds() -> None:
    why = explain_recall(call_with([ROSES, LYON, PARIS]))

    assert why.source is QuerySource.USER_MESSAGE and why.query == QUERY
    assert why.words == ("oil", "spray", "roses", "lyon", "trip")  # stop words out, folded
    roses, lyon, paris = why.episodes
    assert (roses.episode_id, roses.rank, roses.candidates, roses.score) == ("ep_roses", 1, 3, 0.5)
    assert roses.matched == ("oil", "roses") and roses.missing == ("spray", "lyon", "trip")
    assert lyon.matched == ("lyon", "trip") and lyon.basis is Basis.WORDS
    assert paris.matched == () and paris.basis is Basis.MEANING, "no shared word: meaning or recency"
    assert why.split
    assert why.unmatched == ("spray",), "'sprayed' is not 'spray': the word no episode held"


def test_the_passages_that_made_an_episode_match_are_its_rendered_excerpts_holding_query_words() -> None:
    [roses] = explain_recall(call_with([ROSES])).episodes

    assert roses.basis is Basis.PASSAGES
    assert [p.kind for p in roses.parts] == [
        PartKind.SUMMARY,
        PartKind.KEY_FACTS,
        PartKind.EXCERPT,
        PartKind.EXCERPT,
    ]
    assert [p.text for p in roses.passages] == list(ROSES.excerpts)
    assert [p.matched for p in roses.passages] == [("oil", "roses"), ("oil",)]
    summary = roses.parts[0]
    assert summary.text == "Last spring my roses got black spot." and summary.matched == ("roses",)


def test_matched_words_are_cut_out_where_they_stand_whatever_their_case_and_accents() -> None:
    segments = highlight("My Roses, and the café's ROSES.", ["roses", "cafe's"])

    assert segments == [
        Segment("My "),
        Segment("Roses", "roses"),
        Segment(", and the "),
        Segment("café's", "cafe's"),
        Segment(" "),
        Segment("ROSES", "roses"),
        Segment("."),
    ]
    assert "".join(s.text for s in segments) == "My Roses, and the café's ROSES."
    assert highlight("rosesbed", ["roses"]) == [Segment("rosesbed")], "whole words only"


def test_an_episode_found_over_the_recall_allowance_is_explained_as_found_but_without_its_text() -> None:
    first_only = lyon_alone()
    why = explain_recall(call_with([LYON, ROSES], allowance=first_only))

    lyon, roses = why.episodes
    assert lyon.rendered and not roses.rendered
    assert roses.basis is Basis.NOT_RENDERED and roses.parts == () and roses.rank == 2
    assert "roses" in why.unmatched, "only what the model saw counts"


def test_a_call_without_a_user_message_says_recall_had_no_words_to_match() -> None:
    why = explain_recall(call_with([ROSES], user=None))

    assert why.source is QuerySource.NONE and why.words == () and why.query == ""
    assert why.episodes[0].basis is Basis.MEANING


def test_a_block_that_does_not_split_into_one_entry_per_episode_is_read_whole() -> None:
    message, _ = recall_block([ROSES, LYON], 10_000, count)
    assert message is not None
    odd = message.content.replace("Date:", "\n---\nDate:", 1)  # an entry holding the separator
    why = explain_recall(call_with([ROSES, LYON], block=odd))

    assert not why.split
    roses, lyon = why.episodes
    assert [p.kind for p in roses.parts] == [PartKind.BLOCK]
    assert roses.matched == lyon.matched == ("oil", "roses", "lyon", "trip")


def test_no_recall_at_all_leaves_every_query_word_unmatched() -> None:
    why = explain_recall(call_with([]))

    assert why.episodes == () and why.unmatched == why.words


def test_why_not_names_a_rendered_candidate_one_over_the_allowance_and_one_never_found() -> None:
    first_only = lyon_alone()
    c = call_with([LYON, ROSES], allowance=first_only)

    assert candidacy(c, "ep_lyon").verdict is Verdict.RENDERED
    over = candidacy(c, " ep_roses ")
    assert (over.verdict, over.episode_ids, over.unseen) == (Verdict.OVER_ALLOWANCE, ("ep_roses",), 1)
    assert candidacy(c, "ep_elsewhere").verdict is Verdict.NOT_FOUND


def test_why_not_finds_a_phrase_in_the_rendered_entry_holding_it_and_the_words_it_shares_with_the_query() -> (
    None
):
    c = call_with([ROSES, LYON, PARIS])

    found = candidacy(c, "Weekend in LYON")
    assert (found.verdict, found.episode_ids, found.shared) == (Verdict.RENDERED, ("ep_lyon",), ("lyon",))
    missing = candidacy(c, "my cat Zanzibar")
    assert (missing.verdict, missing.episode_ids, missing.shared) == (Verdict.NOT_FOUND, (), ())


def test_recalled_episodes_keep_the_order_and_scores_the_call_recorded() -> None:
    c = call_with([ROSES, LYON])
    scores = (0.9, 0.4)
    recalled = tuple(dataclasses.replace(e, score=s) for e, s in zip(c.report.recalled, scores, strict=True))
    rescored = dataclasses.replace(c, report=dataclasses.replace(c.report, recalled=recalled))

    assert [(e.rank, e.score) for e in explain_recall(rescored).episodes] == [(1, 0.9), (2, 0.4)]
