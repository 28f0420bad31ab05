"""The "[Knowledge]" section of BuildContext: caller-supplied items rendered after the system
prompt, best first, deduplicated, trimmed at a token boundary or dropped when they do not
fit, each item's rendered text findable in the stored call by the report's span; bad items
refused before anything is written. Tokens are words (tests/fakes_tokens.py)."""

from __future__ import annotations

import math

import pytest

from episodic.domain.agents import MemoryDraft
from episodic.domain.context import ModelCall, Section
from episodic.domain.knowledge import MAX_REQUEST_ITEMS, KnowledgeFate, KnowledgeItem
from episodic.domain.knowledge_block import KNOWLEDGE_HEADER, MIN_TRIM_TOKENS, knowledge_block
from episodic.domain.model import RecallMode
from episodic.errors import InvalidArgument
from episodic.service.context import ContextRequest
from tests.fakes_tokens import WordTokenCounter
from tests.unit.use_cases import CALLER, UseCases, use_cases

NO_RECALL = MemoryDraft(recall_mode=RecallMode.NONE, known_facts=False)
WORDS = WordTokenCounter()


def count(text: str) -> int:
    return WORDS.count(text, "cl100k_base")


def trim(text: str, tokens: int) -> str:
    return WORDS.prefix(text, tokens, "cl100k_base")


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent(memory=NO_RECALL)
    return built


async def build(app: UseCases, episode_id: str, *items: KnowledgeItem, **fields: object) -> ModelCall:
    request = ContextRequest(episode_id, "What is the leave policy?", knowledge=items, **fields)  # type: ignore[arg-type]
    call, _ = await app.context.build(CALLER, request)
    return call


def knowledge_text(call: ModelCall) -> str:
    (message,) = [m for m in call.messages if m.section is Section.KNOWLEDGE]
    return message.content


async def test_items_are_rendered_after_the_system_prompt_best_score_first(app: UseCases) -> None:
    episode_id = await app.open()
    call = await build(
        app,
        episode_id,
        KnowledgeItem("Unscored note about parking.", source_id="parking"),
        KnowledgeItem("Leave is 25 days a year.", source_id="leave", title="Leave policy", score=0.4),
        KnowledgeItem("Sick leave needs a note after 3 days.", source_id="sick", score=0.9),
    )
    assert [m.section for m in call.messages] == [Section.SYSTEM, Section.KNOWLEDGE, Section.USER_MESSAGE]
    text = knowledge_text(call)
    assert text.startswith(KNOWLEDGE_HEADER)
    assert "Source: Leave policy\nLeave is 25 days a year." in text
    report = call.report.knowledge
    assert [k.source_id for k in report] == ["sick", "leave", "parking"]
    assert all(k.fate is KnowledgeFate.WHOLE for k in report)
    assert [text[k.start : k.end] for k in report] == [
        "Sick leave needs a note after 3 days.",
        "Leave is 25 days a year.",
        "Unscored note about parking.",
    ]
    assert call.report.section_tokens[Section.KNOWLEDGE] == call.messages[1].tokens


async def test_the_same_text_twice_is_rendered_once_and_reported_as_a_duplicate(app: UseCases) -> None:
    episode_id = await app.open()
    call = await build(
        app,
        episode_id,
        KnowledgeItem("Leave is 25 days a year.", source_id="a", score=0.9),
        KnowledgeItem("  leave is 25 DAYS a year. ", source_id="b", score=0.5),
    )
    assert knowledge_text(call).count("25 days") == 1
    assert [k.fate for k in call.report.knowledge] == [KnowledgeFate.WHOLE, KnowledgeFate.DUPLICATE]


async def test_items_that_alone_pass_the_budget_are_trimmed_then_dropped_within_the_share() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, max_working_memory_tokens=400))
    episode_id = await app.open()
    long = " ".join(f"word{i}" for i in range(1000))
    call = await build(
        app,
        episode_id,
        KnowledgeItem(long, source_id="first", score=1.0),
        KnowledgeItem(long + " more", source_id="second", score=0.5),
    )
    first, second = call.report.knowledge
    assert (first.fate, second.fate) == (KnowledgeFate.TRIMMED, KnowledgeFate.DROPPED)
    rendered = knowledge_text(call)[first.start : first.end]
    assert long.startswith(rendered) and long[len(rendered)] == " "  # cut between two words
    assert call.report.section_tokens[Section.KNOWLEDGE] <= 400 * 25 // 100
    assert call.report.total_tokens <= 400
    assert (second.start, second.end, second.tokens) == (0, 0, 0)


async def test_a_share_of_zero_renders_no_knowledge_and_says_so() -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, knowledge_budget_percent=0))
    episode_id = await app.open()
    call = await build(app, episode_id, KnowledgeItem("Leave is 25 days a year.", source_id="leave"))
    assert Section.KNOWLEDGE not in [m.section for m in call.messages]
    assert [k.fate for k in call.report.knowledge] == [KnowledgeFate.DROPPED]


async def test_a_request_can_override_the_share_like_any_memory_setting(app: UseCases) -> None:
    episode_id = await app.open()
    item = KnowledgeItem("Leave is 25 days a year.", source_id="leave")
    call = await build(app, episode_id, item, memory=MemoryDraft(knowledge_budget_percent=0))
    assert [k.fate for k in call.report.knowledge] == [KnowledgeFate.DROPPED]


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ((KnowledgeItem("   "),), "knowledge[0].text"),
        ((KnowledgeItem("ok"), KnowledgeItem("x" * (64 * 1024 + 1))), "knowledge[1].text"),
        ((KnowledgeItem("nul \x00"),), "knowledge[0].text"),
        ((KnowledgeItem("ok", score=math.nan),), "knowledge[0].score"),
        ((KnowledgeItem("ok", title="t" * 513),), "knowledge[0].title"),
        ((KnowledgeItem("ok", uri="u" * 2049),), "knowledge[0].uri"),
        ((KnowledgeItem("ok", source_id="s" * 257),), "knowledge[0].source_id"),
        ((KnowledgeItem("ok", metadata=tuple((f"k{i}", "v") for i in range(33))),), "knowledge[0].metadata"),
        (tuple(KnowledgeItem("ok") for _ in range(MAX_REQUEST_ITEMS + 1)), "knowledge"),
        (tuple(KnowledgeItem("y" * 60_000) for _ in range(20)), "knowledge"),
    ],
)
async def test_a_malformed_item_is_refused_naming_its_field_and_nothing_is_appended(
    app: UseCases, items: tuple[KnowledgeItem, ...], field: str
) -> None:
    episode_id = await app.open()
    with pytest.raises(InvalidArgument) as refused:
        await build(app, episode_id, *items, append_user_message=True)
    assert field in [v.field for v in refused.value.violations]
    assert (await app.episodes.list_messages(CALLER, episode_id, 10, "")).items == []


def test_the_block_never_passes_its_allowance_and_reports_every_item() -> None:
    items = [KnowledgeItem(" ".join(["alpha"] * n), source_id=f"s{n}", score=float(n)) for n in (5, 40, 9, 3)]
    for allowance in range(0, 120, 7):
        message, report = knowledge_block(items, allowance, count, trim)
        assert len(report) == len(items)
        if message is None:
            assert all(k.fate is KnowledgeFate.DROPPED for k in report)
            continue
        assert message.tokens <= allowance
        for k in report:
            shown = k.fate in (KnowledgeFate.WHOLE, KnowledgeFate.TRIMMED)
            assert shown == (k.end > k.start)
            if k.fate is KnowledgeFate.TRIMMED:
                assert k.tokens >= MIN_TRIM_TOKENS


def test_without_a_trim_an_item_that_does_not_fit_whole_is_dropped() -> None:
    items = [
        KnowledgeItem(" ".join(["beta"] * 50), source_id="big"),
        KnowledgeItem("small fact", source_id="s"),
    ]
    message, report = knowledge_block(items, 30, count, None)
    assert [k.fate for k in report] == [KnowledgeFate.DROPPED, KnowledgeFate.WHOLE]
    assert message is not None and "small fact" in message.content
