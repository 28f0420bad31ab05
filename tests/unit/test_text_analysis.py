"""One reading of text for every reader: lexical recall, excerpts and passages, memory search
and the summarizer fold, split and drop stop words alike."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from episodic.domain import excerpts, text_analysis
from episodic.domain.model import Message, Role
from episodic.domain.text_analysis import STOPWORDS, SUMMARY_STOPWORDS, fold, terms, words
from episodic.store import lexical
from episodic.summarize import text as summary_text

T0 = datetime(2026, 3, 14, tzinfo=UTC)


def test_every_reader_drops_the_same_stop_words() -> None:
    query = "I'm sure she's painting what I’m painting, isn't it?"
    assert terms(query) == ["sure", "painting", "painting"]
    assert excerpts.terms(query) == terms(query)
    assert lexical.terms(query) == ["sure", "painting"]  # each once, for SQL
    assert summary_text.meaningful(summary_text.tokens(query)) == ["painting", "painting"]


def test_the_summarizer_list_extends_the_one_list() -> None:
    assert summary_text.STOPWORDS is SUMMARY_STOPWORDS
    assert STOPWORDS < SUMMARY_STOPWORDS
    assert {"awesome", "thing", "know", "x"} <= SUMMARY_STOPWORDS - STOPWORDS


def test_folding_lowers_and_strips_accents_one_character_for_one() -> None:
    text = "Café NAÏVE Ἀθήνα İstanbul Йогурт I’m ‘quoted’"
    folded = fold(text)
    assert folded == "cafe naive αθηνα istanbul йогурт i'm 'quoted'"
    assert len(folded) == len(text)
    assert summary_text.fold is fold


def test_words_keep_inner_apostrophes_and_drop_edge_ones() -> None:
    assert words("'Hello', Caroline's dog—don't (x_y) ''") == [
        "hello",
        "caroline's",
        "dog",
        "don't",
        "x",
        "y",
    ]


def test_lexical_terms_are_what_the_index_holds() -> None:
    """Letters and digits only (no query syntax), possessives cut as the database's tokenizer
    cuts them, accents as typed (the database folds them, or not, on both sides)."""
    found = lexical.terms("Caroline's café \"OR\" NEAR(x) o'brien x² foo*bar")
    assert found == ["caroline", "café", "near", "brien", "x²", "foo", "bar"]
    assert all(term.isalnum() for term in found)


def test_lexical_terms_are_capped() -> None:
    many = " ".join(f"word{i}" for i in range(100))
    assert lexical.terms(many) == [f"word{i}" for i in range(lexical.MAX_TERMS)]


@pytest.mark.parametrize("query", ["cafe", "CAFÉ", "café"])
def test_an_accent_does_not_hide_a_message(query: str) -> None:
    log = {"e": excerpts.spoken([Message("e", 1, Role.USER, "We met at the Café Müller.", 6, "", T0)])}
    assert excerpts.choose_excerpts(query, log, 1, 300) == {"e": ("User: We met at the Café Müller.",)}


def test_a_curly_apostrophe_reads_as_a_straight_one() -> None:
    assert words("Caroline’s") == words("Caroline's") == ["caroline's"]
    assert text_analysis.is_term("caroline's") and not text_analysis.is_term("i'm")
