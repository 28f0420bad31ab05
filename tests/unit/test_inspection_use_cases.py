"""The inspector's phrase search: bounded by phrase length, and so few run at once that one
tenant's searches cannot hold the database from the others."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from episodic.domain.model import Caller, Message
from episodic.errors import InvalidArgument, ResourceExhausted
from episodic.service.inspection import MAX_SEARCHES_PER_TENANT, InspectionService


class HeldLog:
    """Reads of the log wait until released, so searches stay in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def list_messages(self, *_: object) -> list[Message]:
        await self.release.wait()
        return []

    async def list_calls(self, *_: object) -> list[object]:
        return []

    async def ensure_visible(self, *_: object) -> None:
        return None


def service(log: HeldLog) -> InspectionService:
    nothing = cast(Any, None)
    return InspectionService(
        agents=nothing,
        episodes=cast(Any, log),
        context=nothing,
        users=nothing,
        log=cast(Any, log),
        calls=cast(Any, log),
    )


async def test_a_tenant_running_its_share_of_searches_is_told_to_retry_while_others_still_search() -> None:
    log = HeldLog()
    inspect = service(log)
    busy = Caller("busy-tenant")
    held = [asyncio.create_task(inspect.where(busy, "ep", "cat")) for _ in range(MAX_SEARCHES_PER_TENANT)]
    await asyncio.sleep(0)
    with pytest.raises(ResourceExhausted):
        await inspect.where(busy, "ep", "cat")
    other = asyncio.create_task(inspect.where(Caller("quiet-tenant"), "ep", "cat"))
    log.release.set()
    assert not (await other).trace.messages
    await asyncio.gather(*held)
    assert not (await inspect.where(busy, "ep", "cat")).truncated  # slots are given back


@pytest.mark.parametrize("phrase", ["", "   ", "x" * 1001])
async def test_an_empty_or_overlong_phrase_is_refused_naming_it(phrase: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await service(HeldLog()).where(Caller("t"), "ep", phrase)
    assert [v.field for v in refused.value.violations] == ["phrase"]
