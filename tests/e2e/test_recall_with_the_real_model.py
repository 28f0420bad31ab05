"""Semantic recall with the default local model (all-MiniLM-L6-v2), not the test embedder:
a paraphrase with no shared words still finds its conversation."""

from __future__ import annotations

from episodic.config import EmbedderKind
from episodic.v1 import episode_service_pb2 as pb
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from tests.e2e.test_recall import AUTH, remembered, search
from tests.server_harness import running_server, settings_for


async def test_a_paraphrase_finds_its_conversation_with_the_default_model(sqlite_url: str) -> None:
    async with (
        running_server(settings_for(sqlite_url, embedder=EmbedderKind.MINILM)) as server,
        server.channel() as channel,
    ):
        agent_id, ids = await remembered(channel, "mary")
        reply = await EpisodeServiceStub(channel).SearchEpisodes(
            search(agent_id, "mary", pb.SEARCH_MODE_SEMANTIC, "taking my kitten to the animal doctor"),
            metadata=AUTH,
        )
    assert reply.snippets[0].episode_id == ids[1]
    assert reply.snippets[0].score > reply.snippets[-1].score
