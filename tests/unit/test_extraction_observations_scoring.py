"""`episodic-lab eval-extraction --observations`: how memories are scored against annotated
observations (the server run itself is exercised by the command)."""

from __future__ import annotations

from episodic_lab.evals.extraction_observations import covers, meaning, score_session, stem


def test_inflections_and_possessives_fold_to_one_stem() -> None:
    assert stem("attended") == stem("attending") == "attend"
    assert stem("stories") == "story" and stem("anna's") == stem("anna") == "anna"
    assert stem("named") == stem("name") == "nam"
    assert stem("is") == "is"  # too short to strip


def test_the_speakers_name_is_no_content_word_the_memory_must_hold() -> None:
    observation = meaning("Ana adopted a rescue greyhound named Pip.", ("Ana",))
    memory = meaning("Ana: I adopted a rescue greyhound", ("Ana",))
    assert "ana" not in observation and covers(memory, observation)


def test_kept_needs_half_the_observation_and_precise_half_the_memory() -> None:
    tally = score_session(
        ["Ana adopted a rescue greyhound named Pip.", "Ana works as a nurse in Leeds."],
        ["Ana: I adopted a rescue greyhound", "Ana: I love sunny afternoons at the lake"],
        "Ana",
    )
    assert (tally.kept, tally.observations, tally.precise, tally.memories) == (1, 2, 1, 2)
    assert tally.recall == 0.5 and tally.precision == 0.5
