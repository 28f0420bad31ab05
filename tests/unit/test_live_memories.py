"""Memories while the episode is live, over the fakes: a compaction's turns are extracted in
the background into PENDING memories of the episode, which the next turn's "[Known Facts]"
shows; the close writes none of them twice (same text: one id; a near repeat merges) and
keeps their provenance; an agent without extraction gets none; an erasure while an
extraction is in flight leaves nothing; a failing extractor never fails a turn."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from episodic.domain.agents import MemoryDraft as AgentMemory
from episodic.domain.context import Compaction, ModelCall, Section
from episodic.domain.memories import ExtractedMemory, Memory, MemoryKind, MemoryOrigin, MemoryState
from episodic.domain.memory_rules import MAX_PENDING_PER_EPISODE
from episodic.domain.model import Message, NewMessage, RecallMode, Role
from episodic.domain.ports.memories import MemoryFilter
from episodic.domain.recall import Scope
from episodic.service.compaction import SummaryMaker
from episodic.service.context import ContextRequest
from episodic.service.memories import Extraction
from episodic.state.embed_turns import FairEmbeddings
from episodic.summarize.memories import ExtractiveMemoryExtractor
from episodic.workers.compactor import BackgroundCompactor
from tests.fakes import WordEmbedder
from tests.polling import eventually
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases

SCOPE = Scope(TENANT, "helper", "mary")
BUDGET = 200  # tokens: words, plus 4 a message (tests/fakes_tokens.py)
CAT = "My cat is called Zanzibar."
# Other talk that states nothing about the user: questions, and answers to them.
OTHER = [
    "What is the tallest mountain in the Alps?",
    "Mont Blanc, at about 4808 metres above the sea.",
    "How long is the Danube river from its source to the sea?",
    "About 2850 kilometres, through ten countries of Europe.",
]


async def agent(uc: UseCases, **memory: object) -> None:
    config = AgentMemory(recall_mode=RecallMode.NONE, max_working_memory_tokens=BUDGET, **memory)  # type: ignore[arg-type]
    await uc.new_agent(memory=config)


@pytest.fixture
async def uc() -> UseCases:
    cases = use_cases()
    await agent(cases)
    return cases


async def build(uc: UseCases, episode_id: str, user_message: str) -> ModelCall:
    request = ContextRequest(episode_id, user_message, append_user_message=True)
    call, _ = await uc.context.build(CALLER, request)
    await uc.episodes.add_messages(CALLER, episode_id, [NewMessage(Role.ASSISTANT, "Noted.")])
    return call


async def compacted_conversation(uc: UseCases) -> tuple[str, ModelCall]:
    """The user states a fact, then talks of other things until a turn compacts it away."""
    episode = await uc.open()
    await uc.say(episode, CAT, "What a lovely name!", *(OTHER * 8))
    call = await build(uc, episode, "Which of the two is older?")
    assert call.report.compaction is Compaction.SUMMARIZED
    return episode, call


def known_facts(call: ModelCall) -> str:
    found = [m.content for m in call.messages if m.section is Section.KNOWN_FACTS]
    return found[0] if found else ""


async def memories(uc: UseCases) -> list[Memory]:
    return await uc.memory_store.page(SCOPE, MemoryFilter(), uc.clock(), None, 100)


async def test_a_compaction_makes_the_users_facts_pending_memories_the_next_turn_knows(uc: UseCases) -> None:
    episode, call = await compacted_conversation(uc)
    assert "Zanzibar" not in known_facts(call)  # extraction runs off the turn
    assert uc.live_memories.waiting == 1 and await uc.live_memories.drain() == 1
    (held,) = [m for m, _ in await uc.memory_store.pending(TENANT, episode)]
    assert held.text == "My cat is called Zanzibar" and held.state is MemoryState.PENDING
    assert held.source.origin is MemoryOrigin.EXTRACTED and held.source.episode_id == episode
    assert (held.source.from_seq, held.source.to_seq) == (1, 1)
    assert uc.memory_index.keys(SCOPE) == set()  # not long-term yet
    after = await build(uc, episode, "Tell me something about rivers.")
    assert "Zanzibar" in known_facts(after)
    (recalled,) = after.report.memories
    assert recalled.memory_id == held.memory_id and recalled.pending and recalled.rendered


async def test_the_close_writes_a_memory_extracted_live_once_and_keeps_its_provenance(uc: UseCases) -> None:
    episode, _ = await compacted_conversation(uc)
    await uc.live_memories.drain()
    (held,) = [m for m, _ in await uc.memory_store.pending(TENANT, episode)]
    await uc.say(episode, "I moved to Lisbon last year.", "Nice!")
    await uc.close(episode)
    assert await uc.digester.run_once() == 1
    stored = await memories(uc)
    assert [m.text for m in stored].count("My cat is called Zanzibar") == 1
    (cat,) = [m for m in stored if "Zanzibar" in m.text]
    assert cat.memory_id == held.memory_id and cat.state is MemoryState.PROMOTED and not cat.episode_id
    assert cat.source == held.source  # the episode and the message that said it
    assert any("Lisbon" in m.text for m in stored)  # what was never compacted is extracted at close
    assert uc.memory_index.keys(SCOPE) == {m.memory_id for m in stored}


async def test_a_near_repeat_extracted_at_close_merges_into_the_pending_memory(uc: UseCases) -> None:
    uc.memories.extraction.extractor = Scripted(
        ["I have a cat that is called Zanzibar", "I have a cat that is now called Zanzibar"]
    )
    episode, _ = await compacted_conversation(uc)
    await uc.live_memories.drain()
    (held,) = [m for m, _ in await uc.memory_store.pending(TENANT, episode)]
    await uc.close(episode)
    await uc.digester.run_once()
    (cat,) = await memories(uc)
    assert cat.memory_id == held.memory_id and cat.text == held.text and cat.merge_count == 1
    assert cat.state is MemoryState.PROMOTED and cat.source == held.source


async def test_the_background_llm_compactor_tells_the_same_listener(uc: UseCases) -> None:
    compactor = BackgroundCompactor(
        summarizer=uc.summarizer, maker=SummaryMaker(tokens=uc.tokens, clock=uc.clock),
        store=uc.context_store, cache=uc.working_sets, listener=uc.live_memories,
    )  # fmt: skip
    uc.context.compaction.background = compactor
    episode = await uc.open()
    await uc.say(episode, CAT, "What a lovely name!", *(OTHER * 8))
    call = await build(uc, episode, "Which of the two is older?")
    assert call.report.compaction is Compaction.SCHEDULED
    await asyncio.gather(*compactor.in_flight.values())
    (span,) = uc.live_memories._waiting.values()
    (summary,) = uc.tables.summaries[(TENANT, episode)]
    assert sorted(span.messages) == list(range(1, summary.to_seq + 1))
    await uc.live_memories.drain()
    assert [m.text for m, _ in await uc.memory_store.pending(TENANT, episode)] == [
        "My cat is called Zanzibar"
    ]


async def test_spans_told_again_are_coalesced_and_extracted_once(uc: UseCases) -> None:
    episode, _ = await compacted_conversation(uc)
    await uc.live_memories.drain()
    first = await uc.memory_store.pending(TENANT, episode)
    e = await uc.episode_store.get_episode(TENANT, episode)
    uc.live_memories.compacted(e, _log(uc, episode))
    uc.live_memories.compacted(e, _log(uc, episode))  # coalesced with the one waiting
    assert uc.live_memories.waiting == 1 and await uc.live_memories.drain() == 1
    assert await uc.memory_store.pending(TENANT, episode) == first


async def test_an_agent_without_extraction_gets_no_live_memories() -> None:
    uc = use_cases()
    await agent(uc, extract_memories=False)
    episode, _ = await compacted_conversation(uc)
    await uc.live_memories.drain()
    assert await uc.memory_store.pending(TENANT, episode) == []
    assert "Zanzibar" not in known_facts(await build(uc, episode, "Tell me about rivers."))


async def test_the_agents_extraction_prompt_reaches_the_extractor() -> None:
    other = use_cases()
    await agent(other, memory_extraction_prompt="Only pets.")
    other.memories.extraction.extractor = scripted = Scripted(["My cat is called Zanzibar"])
    await compacted_conversation(other)
    await other.live_memories.drain()
    assert scripted.instructions == ["Only pets."]


async def test_a_closed_episode_gets_no_pending_memories_from_a_span_still_waiting(uc: UseCases) -> None:
    episode, _ = await compacted_conversation(uc)
    await uc.close(episode)
    assert await uc.live_memories.drain() == 1
    assert await uc.memory_store.pending(TENANT, episode) == []
    await uc.digester.run_once()
    assert [m.text for m in await memories(uc)] == ["My cat is called Zanzibar"]  # by the close


@pytest.mark.parametrize("stage", ["extraction", "embedding"])
async def test_an_erasure_while_an_extraction_is_in_flight_leaves_nothing(uc: UseCases, stage: str) -> None:
    episode, _ = await compacted_conversation(uc)
    gate = Gate()
    threads = ThreadPoolExecutor(1)
    if stage == "extraction":
        uc.memories.extraction = Extraction(extractor=Gated(ExtractiveMemoryExtractor(), gate), pool=threads)
    else:  # tenants in turn, as served
        uc.memories.embeddings = FairEmbeddings(GatedEmbedder(uc.embedder, gate), threads)
    try:
        running = asyncio.create_task(uc.live_memories.drain())
        await asyncio.to_thread(gate.entered.wait)  # the extraction is in flight
        await uc.erasure.erase_user(CALLER, "mary")
        gate.go.set()
        assert await running == 1
    finally:
        gate.go.set()
        threads.shutdown()
    assert await uc.memory_store.pending(TENANT, episode) == []
    assert await memories(uc) == [] and uc.memory_index.keys(SCOPE) == set()


async def test_a_failing_extractor_fails_no_turn_and_logs_no_user_text(
    uc: UseCases, caplog: pytest.LogCaptureFixture
) -> None:
    uc.memories.extraction.extractor = Failing()
    caplog.set_level(logging.WARNING, "episodic.memories")
    episode, _ = await compacted_conversation(uc)
    assert await uc.live_memories.drain() == 1
    assert await uc.memory_store.pending(TENANT, episode) == []
    (record,) = [r for r in caplog.records if r.name == "episodic.memories"]
    assert record.getMessage() == "live memory extraction failed" and record.error == "RuntimeError"  # type: ignore[attr-defined]
    assert "Zanzibar" not in caplog.text
    next_turn = await build(uc, episode, "And rivers?")
    assert next_turn.report.model_call_id


async def test_the_running_workers_extract_in_the_background_and_stop(uc: UseCases) -> None:
    uc.live_memories.start()
    try:
        episode, _ = await compacted_conversation(uc)

        async def held() -> bool:
            return bool(await uc.memory_store.pending(TENANT, episode))

        assert await eventually(held)
        assert [m.text for m, _ in await uc.memory_store.pending(TENANT, episode)] == [
            "My cat is called Zanzibar"
        ]
    finally:
        await uc.live_memories.stop()
    assert all(t.done() for t in asyncio.all_tasks() if t.get_name().startswith("episodic-live"))


async def test_waiting_is_bounded_and_what_finds_no_room_is_left_to_the_close(uc: UseCases) -> None:
    live = uc.live_memories
    live.max_waiting, live.max_messages = 1, 3
    first = await uc.open()
    second = await uc.open()
    await uc.say(first, CAT, "Nice", *OTHER)
    await uc.say(second, CAT, "Nice")
    e1, e2 = [await uc.episode_store.get_episode(TENANT, i) for i in (first, second)]
    live.compacted(e1, _log(uc, first))  # 6 messages: 3 held
    live.compacted(e2, _log(uc, second))  # no room: left to the close
    assert live.waiting == 1 and live.left == 2


async def test_pending_memories_stay_within_the_episodes_bound(uc: UseCases) -> None:
    episode, _ = await compacted_conversation(uc)
    await uc.live_memories.drain()
    texts = [f"I collect rare stamp number {i} from Peru" for i in range(MAX_PENDING_PER_EPISODE + 5)]
    uc.memories.extraction.extractor = Scripted(texts, every=True)
    e = await uc.episode_store.get_episode(TENANT, episode)
    uc.live_memories.compacted(e, _log(uc, episode))
    await uc.live_memories.drain()
    assert len(await uc.memory_store.pending(TENANT, episode)) == MAX_PENDING_PER_EPISODE


# --- helpers ---------------------------------------------------------------------------


def _log(uc: UseCases, episode_id: str) -> list[Message]:
    return list(uc.tables.messages[(TENANT, episode_id)])


class Scripted:
    """An extractor saying one text per call (the last one again after the script): a fact
    about the cat, from the first message that names it."""

    def __init__(self, texts: Sequence[str], every: bool = False) -> None:
        self.texts, self.every = list(texts), every
        self.instructions: list[str] = []

    @property
    def name(self) -> str:
        return "scripted"

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]:
        self.instructions.append(instructions)
        said = [m for m in transcript if m.role is Role.USER]
        if not said:
            return []
        seq = next((m.seq for m in said if "Zanzibar" in m.content), said[0].seq)
        texts = self.texts if self.every else [self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]]
        return [ExtractedMemory(t, MemoryKind.FACT, seq, seq, entities=_names(t)) for t in texts]


def _names(text: str) -> tuple[str, ...]:
    return tuple(w for w in text.split()[1:] if w[:1].isupper())


class Failing:
    @property
    def name(self) -> str:
        return "failing"

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]:
        raise RuntimeError(f"the model choked on {transcript[0].content!r}")


class Gate:
    """Holds a worker thread until the test lets it go, telling the test it got there."""

    def __init__(self) -> None:
        self.entered, self.go = threading.Event(), threading.Event()

    def hold(self) -> None:
        self.entered.set()
        self.go.wait(timeout=60)


class Gated:
    def __init__(self, inner: ExtractiveMemoryExtractor, gate: Gate) -> None:
        self.inner, self.gate = inner, gate

    @property
    def name(self) -> str:
        return self.inner.name

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]:
        self.gate.hold()
        return self.inner.extract(transcript, instructions)


class GatedEmbedder:
    def __init__(self, inner: WordEmbedder, gate: Gate) -> None:
        self.inner, self.gate = inner, gate

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.gate.hold()
        return self.inner.embed(texts)
