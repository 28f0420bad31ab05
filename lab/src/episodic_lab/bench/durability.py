"""After the load: does the server hold exactly the messages it acknowledged? Counted two
ways per episode: the episode's message_count, and the newest seq (seqs are dense)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from episodic_client import AsyncEpisodicClient


@dataclass(frozen=True, slots=True)
class DurabilityCheck:
    acknowledged: int
    stored: int  # sum of message_count
    newest_seq_total: int  # sum of each episode's newest seq, from ListMessages

    @property
    def passed(self) -> bool:
        return self.acknowledged == self.stored == self.newest_seq_total

    def line(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        agree = "agrees" if self.newest_seq_total == self.stored else f"says {self.newest_seq_total}"
        return (
            f"durability check {verdict}: acknowledged {self.acknowledged}, stored {self.stored} "
            f"(message_count; newest seq {agree})"
        )


async def check_durability(client: AsyncEpisodicClient, acknowledged: Mapping[str, int]) -> DurabilityCheck:
    stored = newest = 0
    for episode_id in acknowledged:
        got = await client.get_episode(episode_id)
        page = await client.list_messages(episode_id, page_size=1)
        stored += got.episode.message_count
        newest += page.messages[0].seq if page.messages else 0
    return DurabilityCheck(sum(acknowledged.values()), stored, newest)
