"""SearchKnowledge's top_k over 50 (the candidate pool each signal brings): a search by
meaning, or hybrid, of top_k 100 over an agent of 120 documents returns 100 chunks, not the
pool's 50 (SciFact's R@100 in eval-knowledge counted only the first 50 by meaning)."""

from __future__ import annotations

import pytest

from episodic.domain.agents import MemoryDraft
from episodic.domain.chunking import DocumentFormat
from episodic.domain.knowledge import DocumentDraft
from episodic.domain.model import RecallMode
from episodic.domain.recall import SearchMode
from episodic.service.knowledge import POOL, KnowledgeQuery
from tests.unit.use_cases import CALLER, use_cases


@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_a_top_k_above_the_pool_returns_top_k_chunks(mode: SearchMode) -> None:
    app = use_cases()
    await app.new_agent(memory=MemoryDraft(recall_mode=RecallMode.NONE, known_facts=False))
    drafts = [
        DocumentDraft(f"note-{i}", f"Note {i}: the heron waded by the reeds at dawn.", DocumentFormat.TEXT)
        for i in range(120)
    ]
    for at in range(0, len(drafts), 100):
        await app.knowledge.create(CALLER, "helper", drafts[at : at + 100])
    hits = await app.knowledge.search(CALLER, KnowledgeQuery("helper", mode, "heron reeds at dawn", 100))
    assert POOL < 100
    assert len(hits) == 100
    assert len({h.chunk.key for h in hits}) == 100
