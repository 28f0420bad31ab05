"""Summarizers: the extractive default (deterministic, pattern-found key facts, within limits
and time) and choosing one. The OpenAI-compatible one against a local fake endpoint, and the
extractive one in processes of other hash seeds, are in tests/integration/test_summarizers.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from episodic.domain.model import Message, Role, ToolCall, ToolResult
from episodic.domain.recall import DigestText
from episodic.summarize import (
    ExtractiveSummarizer,
    OpenAIChatConfig,
    OpenAIChatSummarizer,
    make_summarizer,
)

START = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str = ""
    calls: tuple[ToolCall, ...] = ()
    result: ToolResult | None = None


def user(text: str) -> Turn:
    return Turn(Role.USER, text)


def assistant(text: str, *calls: ToolCall) -> Turn:
    return Turn(Role.ASSISTANT, text, calls)


def tool(result: ToolResult, payload: str = "") -> Turn:
    return Turn(Role.TOOL, payload, result=result)


def conversation(*turns: Turn) -> list[Message]:
    return [
        Message(
            "ep-1",
            seq,
            turn.role,
            turn.content,
            token_count=max(1, len(turn.content) // 4),
            token_encoding="cl100k_base",
            created_at=START + timedelta(seconds=seq),
            tool_calls=turn.calls,
            tool_result=turn.result,
        )
        for seq, turn in enumerate(turns, start=1)
    ]


def leave_request() -> list[Message]:
    """An HR assistant episode with a system prompt, recalled context, two tool calls (one
    failing) and a preference, a personal fact, numbers, dates and a decision."""
    return conversation(
        Turn(Role.SYSTEM, "You are Orchid, an HR assistant. Quote the staff handbook verbatim."),
        Turn(Role.CONTEXT, "[Past Conversations] Date: 2025-01-02 Summary: Asked about a parking permit."),
        user("Hi, my name is Priya Nair and I work at the Dundee office."),
        user("How many days of annual leave do I have left?"),
        assistant("", ToolCall("c1", "leave_balance", {"employee": "pnair"})),
        tool(ToolResult("c1", {"remaining_days": 14, "carried_over": 3}, True), '{"remaining_days": 14}'),
        assistant("You have 14 days of annual leave remaining this year."),
        user("Great. I prefer short answers in formal English, by the way."),
        user("I'm going to visit my sister in Lisbon in July, from 7 July to 18 July."),
        assistant("Let me check the team calendar.", ToolCall("c2", "team_calendar", {"month": "July"})),
        tool(ToolResult("c2", None, False, "timeout after 5s")),
        assistant(
            "I could not reach the calendar, but we decided to file the request for 7 July to 18 July. "
            "The request uses 9 days of leave and costs nothing extra."
        ),
        user("Thanks! Let's submit it on Friday."),
    )


def labelled_chat() -> list[Message]:
    """Two friends chatting, every line prefixed with the speaker's name."""
    return conversation(
        user("Tomas: Hey Ines! How was your week?"),
        assistant("Ines: Busy! I started a ceramics course on Tuesday and I love it."),
        user("Tomas: Nice. I ran a 10 km race last Sunday - my best time yet."),
        assistant("Ines: Wow! I'm going to cheer for you at the next one."),
        user("Tomas: My favourite part was the last hill, honestly."),
    )


# --- the extractive summarizer ---------------------------------------------------------------


def test_extractive_output_is_deterministic() -> None:
    first = ExtractiveSummarizer().summarize(leave_request())
    again = ExtractiveSummarizer().summarize(leave_request())
    assert first == again
    assert repr(first).encode() == repr(again).encode()


def test_captures_a_stated_preference_a_number_with_unit_a_date_and_a_decision() -> None:
    facts = ExtractiveSummarizer().summarize(leave_request()).key_facts
    assert "I prefer short answers in formal English" in facts
    assert "You have 14 days of annual leave remaining this year" in facts
    assert "I'm going to visit my sister in Lisbon in July, from 7 July to 18 July" in facts
    assert "We decided to file the request for 7 July to 18 July" in facts
    assert "Let's submit it on Friday" in facts
    assert "My name is Priya Nair" in facts and "I work at the Dundee office" in facts


def test_key_facts_are_short_distinct_and_at_most_eight() -> None:
    facts = ExtractiveSummarizer().summarize(leave_request()).key_facts
    assert 0 < len(facts) <= 8
    assert len(set(facts)) == len(facts)
    assert all(0 < len(fact) <= 120 and fact == fact.strip() for fact in facts)


def test_summary_keeps_informative_sentences_in_their_original_order() -> None:
    summary = ExtractiveSummarizer().summarize(leave_request()).summary
    assert "Priya Nair" in summary and "Lisbon" in summary
    assert summary.index("Priya Nair") < summary.index("Lisbon")
    assert "Thanks!" not in summary


def test_ignores_system_and_context_messages() -> None:
    digest = ExtractiveSummarizer().summarize(leave_request())
    text = " ".join([digest.summary, *digest.key_facts])
    for word in ("Orchid", "handbook", "parking", "Past Conversations", "2025-01-02"):
        assert word not in text


def test_handles_tool_calls_and_results_naming_tools_and_outcomes_without_payloads() -> None:
    digest = ExtractiveSummarizer().summarize(leave_request())
    assert digest.summary.endswith("Tools used: leave_balance, team_calendar.")
    assert "team_calendar tool failed: timeout after 5s" in digest.key_facts
    text = " ".join([digest.summary, *digest.key_facts])
    assert "remaining_days" not in text and "{" not in text


def test_a_successful_tool_call_is_a_fact_when_there_is_room() -> None:
    digest = ExtractiveSummarizer().summarize(
        conversation(
            user("What's the weather in Oslo?"),
            assistant("", ToolCall("w1", "get_weather", {"city": "Oslo"})),
            tool(ToolResult("w1", {"temp_c": -3}, True), '{"temp_c": -3}'),
            assistant("It is -3 degrees and snowing in Oslo."),
        )
    )
    assert digest.key_facts == ("get_weather tool succeeded", "It is -3 degrees and snowing in Oslo")
    assert digest.summary == (
        "User: What's the weather in Oslo? Assistant: It is -3 degrees and snowing in Oslo. "
        "Tools used: get_weather."
    )


def test_empty_transcript_gives_an_empty_summary_and_no_facts() -> None:
    summarizer = ExtractiveSummarizer()
    assert summarizer.summarize([]) == DigestText("", ())
    only_setup = conversation(Turn(Role.SYSTEM, "You are helpful."), Turn(Role.CONTEXT, "Nothing yet."))
    assert summarizer.summarize(only_setup) == DigestText("", ())


def test_speaker_labels_are_kept_so_the_digest_says_who() -> None:
    assert ExtractiveSummarizer().summarize(labelled_chat()) == DigestText(
        "Ines: I started a ceramics course on Tuesday and I love it. "
        "Tomas: I ran a 10 km race last Sunday - my best time yet. "
        "Ines: I'm going to cheer for you at the next one. "
        "Tomas: My favourite part was the last hill, honestly.",
        (
            "Ines: I started a ceramics course on Tuesday",
            "Tomas: I ran a 10 km race last Sunday",
            "Ines: I'm going to cheer for you at the next one",
            "Tomas: My favourite part was the last hill",
        ),
    )


def test_the_assistant_speaking_of_itself_is_not_a_fact_and_questions_are_not_facts() -> None:
    digest = ExtractiveSummarizer().summarize(
        conversation(
            user("Do you like jazz? Are we meeting next Tuesday?"),
            assistant("I am an AI assistant and I love helping. I will look that up for you."),
        )
    )
    assert digest.key_facts == ()


def test_long_transcript_stays_within_the_caps() -> None:
    transcript = _long_episode(50)
    summarizer = ExtractiveSummarizer()
    digest = summarizer.summarize(transcript)
    assert 0 < len(digest.summary) <= 400 and len(digest.summary.split()) <= 60
    assert 0 < len(digest.key_facts) <= 8
    assert all(len(fact) <= 120 for fact in digest.key_facts)


def test_a_single_overlong_sentence_is_cut_to_the_cap() -> None:
    ramble = " ".join(f"word{i} Glasgow" for i in range(200))
    digest = ExtractiveSummarizer().summarize(conversation(user(ramble)))
    assert len(digest.summary) <= 400 and len(digest.summary.split()) <= 60
    assert digest.summary.endswith("…")


def _long_episode(messages: int) -> list[Message]:
    topics = ["the Berlin offsite", "a new laptop", "the Q3 budget", "Spanish lessons", "a dentist visit"]
    turns: list[Turn] = []
    for i in range(messages // 2):
        topic = topics[i % len(topics)]
        turns.append(
            user(
                f"About {topic}: I'd like to spend about ${120 + i} on it. Can we do it by {1 + i % 28} May?"
            )
        )
        turns.append(
            assistant(
                f"Sure. I noted {topic} for {1 + i % 28} May with a budget of ${120 + i}. "
                f"That leaves {40 - i % 9} hours for the rest of the project, "
                "and we agreed to review it weekly."
            )
        )
    return conversation(*turns)


# --- choosing a summarizer ---------------------------------------------------------------------


def test_make_summarizer_defaults_to_extractive_and_passes_options() -> None:
    assert isinstance(make_summarizer(), ExtractiveSummarizer)
    assert make_summarizer("extractive", max_facts=3) == ExtractiveSummarizer(max_facts=3)


def test_make_summarizer_builds_the_openai_summarizer() -> None:
    made = make_summarizer("openai", base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
    assert isinstance(made, OpenAIChatSummarizer)
    assert made.config == OpenAIChatConfig("http://127.0.0.1:9/v1", "m", api_key="k")


def test_make_summarizer_rejects_unknown_kinds_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="extractive, openai"):
        make_summarizer("gpt-magic")


def test_openai_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatConfig("ftp://example", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAIChatConfig("http://127.0.0.1/v1", " ")
