"""Which memories "[Known Facts]" renders (domain/known_facts.py): the words a fact says about
the user, the profile that fills the slots a turn's match leaves, and the facts that repeat
one rendered before them (first or third person, client-written or extracted)."""

from __future__ import annotations

from datetime import UTC, datetime

from episodic.domain.known_facts import (
    KnownFact,
    content_words,
    distinct,
    profile_fill,
    selected,
    subject_words,
)

ALICE = subject_words("alice")


def fact(
    memory_id: str, text: str, kind: str = "fact", *, client: bool = False, score: float = 0.5
) -> KnownFact:
    return KnownFact(memory_id, text, kind, score, client=client)


def ids(facts: list[KnownFact]) -> list[str]:
    return [f.memory_id for f in facts]


def test_the_user_is_named_by_the_words_of_their_id_and_by_user() -> None:
    assert subject_words("alice.smith") >= {"alice", "smith", "user"}
    assert "u" not in subject_words("u_81f3") and "81f3" not in subject_words("u_81f3")


def test_first_and_third_person_say_the_same_words() -> None:
    assert (
        content_words("Alice is vegetarian", ALICE)
        == content_words("I'm vegetarian.", ALICE)
        == {"vegetarian"}
    )
    assert content_words("The user prefers aisle seats", ALICE) == content_words(
        "I prefer aisle seats", ALICE
    )
    assert content_words("Alice's sister lives in Leeds", ALICE) == {"sister", "live", "leed"}
    assert "7" in content_words("My daughter is 7", ALICE)  # numbers are what a fact says


def test_a_fact_covered_by_one_rendered_before_is_not_rendered_again() -> None:
    kept = distinct(
        [fact("x1", "I'm vegetarian"), fact("x2", "Alice is vegetarian"), fact("x3", "I live in Porto")],
        ALICE,
    )
    assert ids(kept) == ["x1", "x3"]


def test_what_the_client_wrote_wins_over_the_extracted_repeat() -> None:
    kept = distinct(
        [fact("x1", "I'm vegetarian", "preference"), fact("c1", "Alice is vegetarian", client=True)], ALICE
    )
    assert ids(kept) == ["c1"]


def test_an_extracted_fact_that_says_more_stays_after_the_clients() -> None:
    compound = fact("x1", "I'm vegetarian and I want to visit Lisbon in May", "preference")
    kept = distinct([compound, fact("c1", "Alice is vegetarian", client=True)], ALICE)
    assert ids(kept) == ["c1", "x1"]


def test_opposites_and_different_numbers_are_not_duplicates() -> None:
    kept = distinct([fact("a", "I eat meat"), fact("b", "I don't eat meat"), fact("c", "My daughter is 7"),
                     fact("d", "My daughter is 8")], ALICE)  # fmt: skip
    assert ids(kept) == ["a", "b", "c", "d"]


def test_a_fact_without_content_words_is_kept() -> None:
    assert ids(distinct([fact("a", "I am"), fact("b", "I am")], ALICE)) == ["a", "b"]


def test_the_profile_fills_what_the_match_left_with_facts_and_preferences_before_events() -> None:
    matched = [fact("m1", "I live in Porto")]
    newest = [fact("e1", "I ran a marathon", "event"), fact("m1", "I live in Porto"),
              fact("p1", "I'm vegetarian", "preference"), fact("f1", "I have two cats")]  # fmt: skip
    assert ids(profile_fill(matched, newest, 3)) == ["m1", "p1", "f1"]
    assert ids(profile_fill(matched, newest, 5)) == ["m1", "p1", "f1", "e1"]
    assert ids(profile_fill([], newest, 0)) == []


def test_a_repeat_frees_its_slot_for_the_next_profile_fact_and_pending_facts_all_stay() -> None:
    held = [KnownFact("h1", "I'm vegetarian", "preference", 1.0, pending=True)]
    newest = [
        fact("c1", "Alice is vegetarian", client=True),
        fact("f1", "I have two cats"),
        fact("f2", "I live in Porto"),
    ]
    assert ids(selected(held, [], newest, 2, ALICE)) == ["h1", "f1", "f2"]
    assert ids(selected(held, [], newest, 0, ALICE)) == ["h1"]


def test_the_same_event_on_another_day_is_another_event() -> None:
    def run(memory_id: str, day: int) -> KnownFact:
        return KnownFact(
            memory_id,
            "I ran the Lisbon marathon",
            "event",
            0.5,
            event_time=datetime(2025, 4, day, tzinfo=UTC),
        )

    assert ids(distinct([run("a", 5), run("b", 6), run("c", 5)], ALICE)) == ["a", "b"]
