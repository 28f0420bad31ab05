"""Issue 9, item 12: the first turn after a big import. The work it does — rows read,
messages held, messages summarized — is bounded by the budget, not by the import size;
what it leaves out is reported, and no summary claims messages it never saw."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from episodic.domain.agents import MemoryDraft
from episodic.domain.context import Compaction, ModelCall, Section
from episodic.domain.model import Message, NewMessage, Role
from episodic.domain.ports.models import Summarizer
from episodic.domain.recall import DigestText
from episodic.service.context import ContextRequest, ContextService
from tests.integration.conftest import Stack
from tests.integration.test_working_set import CountingStore, conversation, restarted, turn

BUDGET = 600


class CountingSummarizer:
    """The real summarizer, recording how many messages each summary was made from."""

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.transcripts: list[int] = []

    def summarize(self, transcript: Sequence[Message]) -> DigestText:
        self.transcripts.append(len(transcript))
        return self.inner.summarize(transcript)


@dataclasses.dataclass
class Counted:
    service: ContextService
    store: CountingStore
    summarizer: CountingSummarizer

    @property
    def rows_read(self) -> int:
        return sum(len(read.messages) for read in self.store.reads)


def counted(stack: Stack) -> Counted:
    """A fresh service (nothing cached, as right after the import) that counts its work."""
    service, store = restarted(stack)
    compaction = service.compaction
    summarizer = CountingSummarizer(compaction.inline.summarizer)
    inline = dataclasses.replace(compaction.inline, summarizer=summarizer)
    return Counted(
        dataclasses.replace(service, compaction=dataclasses.replace(compaction, inline=inline)),
        store,
        summarizer,
    )


async def import_more(stack: Stack, episode_id: str, count: int) -> None:
    batch = [
        NewMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, f"Imported line {i}.") for i in range(count)
    ]
    for start in range(0, count, 500):
        await stack.services.episodes.add_messages(stack.caller, episode_id, batch[start : start + 500])


def history_of(call: ModelCall) -> list[int]:
    return [m.seq for m in call.messages if m.section is Section.HISTORY]


async def test_the_first_turn_after_an_import_does_the_same_work_for_2k_and_8k_messages(stack: Stack) -> None:
    work = {}
    for size in (2000, 8000):
        episode_id = await conversation(stack, size, budget=BUDGET)
        run = counted(stack)
        call = await turn(run.service, stack, episode_id)
        assert call.report.compaction is Compaction.SUMMARIZED
        held = run.service.cache.get((stack.caller.tenant_id, episode_id))
        assert held is not None
        work[size] = (run.rows_read, run.summarizer.transcripts, len(held.tail))
    assert work[8000] == work[2000], work
    rows_read, (summarized,), _ = work[8000]
    assert rows_read < 1000 and summarized < 1000  # of 8000 imported


async def test_what_the_first_turn_leaves_in_sql_is_counted_as_pruned_not_claimed_by_the_summary(
    stack: Stack,
) -> None:
    episode_id = await conversation(stack, 5000, budget=BUDGET)
    run = counted(stack)
    call = await turn(run.service, stack, episode_id)
    (read,) = run.store.reads
    report = call.report
    assert not read.complete and read.messages[-1].seq == 5000
    assert report.summary_span.from_seq == read.messages[0].seq  # it summarized what it read
    history = history_of(call)
    assert history == list(range(report.summary_span.to_seq + 1, 5001))
    assert report.pruned == read.messages[0].seq - 1  # everything before it, left in SQL
    assert report.pruned + report.summarized + len(history) == 5000


async def test_a_big_import_into_a_cached_conversation_is_one_bounded_delta_read(stack: Stack) -> None:
    episode_id = await conversation(stack, 200, budget=BUDGET)
    run = counted(stack)
    before = await turn(run.service, stack, episode_id)
    await import_more(stack, episode_id, 6000)
    after = await turn(run.service, stack, episode_id)
    delta = run.store.reads[-1]
    assert not delta.complete and len(delta.messages) < 1000 and delta.messages[-1].seq == 6200
    assert after.report.compaction is Compaction.SUMMARIZED
    assert after.report.summary_span.from_seq == delta.messages[0].seq  # not the earlier summary's
    assert after.report.summary_span.from_seq > before.report.summary_span.to_seq + 1
    assert history_of(after)[-1] == 6200


async def test_a_turn_asking_for_a_larger_budget_reads_as_much_as_it_can_show(stack: Stack) -> None:
    episode_id = await conversation(stack, 5000, budget=BUDGET)
    await stack.services.episodes.close_episode(stack.caller, episode_id)  # never compacted
    run = counted(stack)
    small = await turn(run.service, stack, episode_id)
    larger = ContextRequest(
        episode_id, user_message="More?", memory=MemoryDraft(max_working_memory_tokens=20_000)
    )
    large, _ = await run.service.build(stack.caller, larger)
    assert small.report.compaction is large.report.compaction is Compaction.SKIPPED_CLOSED
    assert len(run.store.reads) == 2 and not run.store.reads[-1].complete  # read again, deeper
    shown = large.report.section_tokens[Section.HISTORY]
    assert 19_000 < shown <= 20_000 and history_of(large)[-1] == 5000
    assert large.report.pruned + len(history_of(large)) == 5000
