"""HYBRID recall and the time a question names: a dated day, a month without its year, and a
period whose episode the question's other words do not point at."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from episodic.domain.recall import Hit, SearchMode, Signal, fuse_with_passages
from episodic.domain.when import Period, period_in
from episodic.service.recall import FUSION_WEIGHTS, SearchRequest, latest_holding
from tests.unit.use_cases import CALLER, UseCases, use_cases

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent()
    return built


async def remembered_on(app: UseCases, when: datetime, episode_id: str, *lines: str) -> None:
    app.clock.now = when
    await app.remembered(episode_id, *lines)


async def first(app: UseCases, query: str) -> str:
    app.clock.now = NOW
    request = SearchRequest("helper", "mary", SearchMode.HYBRID, query, top_k=3)
    return (await app.recall.search(CALLER, request)).snippets[0].episode_id


def day(year: int, month: int, d: int) -> datetime:
    return datetime(year, month, d, 12, 0, tzinfo=UTC)


async def three_camping_talks(app: UseCases) -> None:
    await remembered_on(app, day(2023, 5, 8), "may", "We went camping by the lake.", "Lovely.")
    await remembered_on(app, day(2023, 6, 27), "june", "We went camping in the forest.", "Nice.")
    await remembered_on(app, day(2023, 7, 17), "july", "We went camping on the beach.", "Fun.")


async def test_a_month_named_without_its_year_means_the_latest_one_the_users_talks_were_in(
    app: UseCases,
) -> None:
    await three_camping_talks(app)  # asked in December 2026: June means June 2023
    assert await first(app, "when did we go camping in June?") == "june"


async def test_a_month_named_without_its_year_stays_this_years_when_this_years_holds_a_talk(
    app: UseCases,
) -> None:
    await three_camping_talks(app)
    await remembered_on(app, day(2026, 6, 9), "june-2026", "I want to rent a bike.", "Try the shop.")
    app.clock.now = NOW
    request = SearchRequest("helper", "mary", SearchMode.HYBRID, "when did we go camping in June?", top_k=5)
    found = {s.episode_id: s.signals for s in (await app.recall.search(CALLER, request)).snippets}
    assert Signal.RECENCY in found["june-2026"]
    assert Signal.RECENCY not in found["june"]


async def test_a_question_naming_a_day_ranks_the_episode_that_ended_that_day_first(app: UseCases) -> None:
    await three_camping_talks(app)
    await remembered_on(app, day(2023, 7, 3), "early-july", "Camping gear is on sale.", "Buy a tent.")
    assert await first(app, "what did we say about camping on July 17, 2023?") == "july"
    assert await first(app, "what did we say about camping on 3 July 2023?") == "early-july"


def test_the_named_periods_episode_outranks_one_the_questions_words_fit_only_somewhat_better() -> None:
    """ "What did I ask support about in April?": the April talk is second by meaning and third
    by full text; another is first by meaning and by passage, second by full text."""
    rankings = {
        Signal.SEMANTIC: [Hit("may", 0.9), Hit("april", 0.8), Hit("june", 0.7)],
        Signal.LEXICAL: [Hit("june", 3.0), Hit("may", 2.0), Hit("april", 1.0)],
        Signal.RECENCY: [Hit("april", 1.0)],
    }
    fused = fuse_with_passages(rankings, {"may": 2.0, "june": 1.0}, weights=FUSION_WEIGHTS)
    assert fused[0][0].episode_id == "april"
    assert fuse_with_passages(rankings, {"may": 2.0, "june": 1.0})[0][0].episode_id == "may"  # once


def test_dated_days_resolve_to_that_day_and_a_day_without_a_year_to_its_latest_occurrence() -> None:
    midnight = datetime(2023, 2, 1, tzinfo=UTC)
    assert period_in("on 1 February, 2023", NOW) == Period(midnight, midnight.replace(day=2))
    found = period_in("what did she paint on October 13th?", NOW)
    assert found is not None and found.any_year
    assert (found.start.date(), found.end.date()) == (day(2026, 10, 13).date(), day(2026, 10, 14).date())
    assert period_in("May 5 of us come?", NOW) is None  # "May" a verb, no "on", ordinal or year
    assert period_in("the 31 June party", NOW) is None


def test_a_month_without_a_year_stays_put_when_no_candidate_ended_in_it() -> None:
    june = period_in("in June", NOW)
    assert june is not None
    assert latest_holding(june, [day(2023, 7, 1), day(2024, 6, 30)]).start.year == 2024
    assert latest_holding(june, [day(2023, 7, 1)]) == june
