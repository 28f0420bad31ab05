"""The rules of memories, pure: duplicates and contradictions, masked updates, session data
merge patches and etags, and the "[Known Facts]" message under its allowance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.known_facts import FACTS_HEADER, KnownFact, facts_block
from episodic.domain.memories import (
    Memory,
    MemoryKind,
    MemoryOrigin,
    MemoryState,
    SessionData,
    Source,
    normalized,
)
from episodic.domain.memory_merge import Candidate, contradicted, duplicate_of, frame_of
from episodic.domain.memory_rules import (
    MAX_SESSION_DATA_BYTES,
    MemoryDraft,
    SessionUpdate,
    apply_mask,
    fingerprint,
    merge_patch,
    merged_session,
)
from episodic.domain.model import JsonValue
from episodic.errors import Aborted, InvalidArgument

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def mem(
    memory_id: str,
    text: str,
    kind: MemoryKind = MemoryKind.FACT,
    *,
    entities: tuple[str, ...] = (),
    age: int = 0,
) -> Memory:
    at = NOW - timedelta(days=age)
    return Memory(
        "t", memory_id, "a", "u", text, kind, Source(MemoryOrigin.CLIENT), MemoryState.PROMOTED, at, at,
        entities=entities,
    )  # fmt: skip


def test_texts_that_differ_in_case_spacing_and_end_punctuation_are_the_same() -> None:
    assert normalized("  I live   in Paris. ") == normalized("i live in paris")


def test_an_exact_repeat_merges_into_the_oldest_memory_of_the_same_kind() -> None:
    older, newer = mem("m1", "Likes tea", age=3), mem("m2", "likes tea.", age=1)
    assert duplicate_of(mem("new", "LIKES TEA"), [Candidate(newer), Candidate(older)]) == older
    assert duplicate_of(mem("new", "Likes tea", MemoryKind.PREFERENCE), [Candidate(older)]) is None


def test_a_near_repeat_merges_only_with_the_same_entities() -> None:
    stored = mem("m1", "Mary adopted a cat named Miso", entities=("Miso",))
    close = mem("new", "Mary adopted a cat called Miso", entities=("Miso",))
    assert duplicate_of(close, [Candidate(stored, 0.95)]) == stored
    other_cat = mem("new", "Mary adopted a cat called Pixel", entities=("Pixel",))
    assert duplicate_of(other_cat, [Candidate(stored, 0.95)]) is None
    assert duplicate_of(close, [Candidate(stored, 0.5)]) is None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Paris", "I live in Berlin"),
        ("I am 30 years old", "I am 31 years old"),
        ("My favourite band is Muse", "My favourite band is Queen"),
        ("I like sushi", "I don't like sushi"),
    ],
)
def test_a_newer_statement_about_the_same_single_valued_subject_supersedes(old: str, new: str) -> None:
    kind = MemoryKind.PREFERENCE if "like" in old or "favourite" in old else MemoryKind.FACT
    stored = mem("m1", old, kind, age=5)
    assert contradicted(mem("new", new, kind), [Candidate(stored)]) == [stored]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I like Python", "I like Rust"),  # liking is not single-valued
        ("My dog is cute", "My dog is old"),  # different frames
        ("I live in Paris", "I live in Paris"),  # a repeat, not a contradiction
    ],
)
def test_statements_that_can_both_hold_are_both_kept(old: str, new: str) -> None:
    assert (
        contradicted(
            mem("new", new, MemoryKind.PREFERENCE), [Candidate(mem("m1", old, MemoryKind.PREFERENCE))]
        )
        == []
    )


def test_a_frame_reads_a_bounded_prefix_of_hostile_text() -> None:
    assert len(frame_of("I live in " + "Paris " * 100_000, ())) < 2000


def test_an_update_changes_only_the_masked_fields_and_refuses_immutable_and_unknown_ones() -> None:
    stored = mem("m1", "Works in Porto", entities=("Porto",))
    draft = MemoryDraft(text="Works in Lisbon", entities=("Lisbon",), kind=MemoryKind.EVENT)
    updated = apply_mask(stored, draft, ["text"], NOW)
    assert (updated.text, updated.entities, updated.kind) == ("Works in Lisbon", ("Porto",), MemoryKind.FACT)
    for mask, wrong in (
        (["user_id"], "cannot be changed"),
        (["colour"], "unknown field"),
        ([], "is required"),
    ):
        with pytest.raises(InvalidArgument) as err:
            apply_mask(stored, draft, mask, NOW)
        assert wrong in str(err.value.violations)
    with pytest.raises(InvalidArgument):
        apply_mask(stored, MemoryDraft(expires_at=NOW - timedelta(seconds=1)), ["expire_time"], NOW)


def test_session_data_merges_as_a_json_merge_patch() -> None:
    stored: JsonValue = {"plan": "pro", "cart": {"items": 2, "coupon": "X"}, "gone": 1}
    patch: JsonValue = {"cart": {"coupon": None, "total": 9}, "gone": None, "new": [1, 2]}
    assert merge_patch(stored, patch) == {"plan": "pro", "cart": {"items": 2, "total": 9}, "new": [1, 2]}


def test_session_data_with_a_stale_etag_is_aborted_and_over_the_cap_is_refused() -> None:
    current = SessionData("t", "e", {"a": 1}, version=3, updated_at=NOW)
    assert current.etag == '"v3"'
    nxt = merged_session(current, SessionUpdate("e", {"b": 2}, etag='"v3"', ttl=timedelta(hours=1)), NOW)
    assert (nxt.version, nxt.data, nxt.expires_at) == (4, {"a": 1, "b": 2}, NOW + timedelta(hours=1))
    with pytest.raises(Aborted):
        merged_session(current, SessionUpdate("e", {"b": 2}, etag='"v2"'), NOW)
    with pytest.raises(InvalidArgument):
        merged_session(current, SessionUpdate("e", {"big": "x" * MAX_SESSION_DATA_BYTES}), NOW)


def count(text: str) -> int:
    return len(text.split())


def test_known_facts_fit_their_allowance_best_first_and_report_what_was_left_out() -> None:
    facts = [KnownFact(f"m{i}", f"fact number {i} " + "word " * 10, "fact", 1.0 - i / 10) for i in range(5)]
    message, found, keys = facts_block(facts, [("plan", "pro")], allowance=60, count=count)
    assert message is not None and message.content.startswith(FACTS_HEADER.strip().split("\n")[0])
    assert message.tokens <= 60
    assert [f.rendered for f in found] == [True, True, False, False, False]
    assert keys == ("plan",) and "- plan: pro" in message.content  # a short value fits in what is left
    nothing, none_found, _ = facts_block(facts, [], allowance=5, count=count)
    assert nothing is None and not any(f.rendered for f in none_found)


def test_the_same_metadata_in_another_key_order_is_the_same_content() -> None:
    """A protobuf Struct hands its fields over in no fixed order: an import run again must
    find its memories unchanged, not in conflict."""
    one = MemoryDraft(
        "Lee is vegetarian",
        MemoryKind.FACT,
        "mem0-a1",
        metadata={"mem0": {"hash": "h1", "metadata": {"s": "c", "t": 1}}},
    )
    other = MemoryDraft(
        "Lee is vegetarian",
        MemoryKind.FACT,
        "mem0-a1",
        metadata={"mem0": {"metadata": {"t": 1, "s": "c"}, "hash": "h1"}},
    )
    changed = MemoryDraft("Lee is vegetarian", MemoryKind.FACT, "mem0-a1", metadata={"mem0": {"hash": "h2"}})
    assert fingerprint(one) == fingerprint(other) != fingerprint(changed)
