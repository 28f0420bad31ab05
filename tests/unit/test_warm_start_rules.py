"""The warm start reads conversations most recent first until its count or half the cache is
reached; one erased meanwhile is skipped, an outage ends it (turns then read for themselves)."""

from __future__ import annotations

from episodic.errors import NotFound, Unavailable
from episodic.workers.warm_start import Key, WarmStart

LISTED = [("t", f"ep-{n}") for n in range(5)]


class Recent:
    def __init__(self, fails: bool = False) -> None:
        self.fails = fails

    async def recently_active(self, limit: int) -> list[Key]:
        if self.fails:
            raise Unavailable("database unreachable")
        return LISTED[:limit]


def warm_start(
    limit: int = 5, room: int = 99, erased: str = "", down_at: str = ""
) -> tuple[WarmStart, list[str]]:
    warmed: list[str] = []

    async def warm(key: Key) -> bool:
        if key[1] == erased:
            raise NotFound("episode", key[1])
        if key[1] == down_at:
            raise Unavailable("database unreachable")
        warmed.append(key[1])
        return True

    return WarmStart(recent=Recent(), warm=warm, full=lambda: len(warmed) >= room, limit=limit), warmed


async def test_it_warms_the_listed_conversations_in_order_up_to_its_count() -> None:
    start, warmed = warm_start(limit=3)
    assert await start.run() == 3 and warmed == ["ep-0", "ep-1", "ep-2"]


async def test_it_stops_when_the_cache_holds_what_it_may_fill() -> None:
    start, warmed = warm_start(room=2)
    assert await start.run() == 2 and warmed == ["ep-0", "ep-1"]


async def test_a_conversation_erased_since_it_was_listed_is_skipped() -> None:
    start, warmed = warm_start(erased="ep-1")
    assert await start.run() == 4 and "ep-1" not in warmed


async def test_an_outage_ends_it_quietly() -> None:
    start, warmed = warm_start(down_at="ep-2")
    assert await start.run() == 2 and warmed == ["ep-0", "ep-1"]
    start.recent = Recent(fails=True)
    assert await start.run() == 0
