"""Following page tokens, for both clients: fetch a page, yield it, repeat with its token."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Protocol, TypeVar


class PageRequest(Protocol):
    page_token: str


class PageResponse(Protocol):
    @property
    def next_page_token(self) -> str: ...


Req = TypeVar("Req", bound=PageRequest)
Resp = TypeVar("Resp", bound=PageResponse)


def pages(fetch: Callable[[Req], Resp], request: Req) -> Iterator[Resp]:
    """Every page from request's page_token on. Mutates request's page_token."""
    while True:
        page = fetch(request)
        yield page
        if not _advance(request, page):
            return


async def apages(fetch: Callable[[Req], Awaitable[Resp]], request: Req) -> AsyncIterator[Resp]:
    """The asyncio twin of `pages`."""
    while True:
        page = await fetch(request)
        yield page
        if not _advance(request, page):
            return


def _advance(request: PageRequest, page: PageResponse) -> bool:
    """Moves request to the next page; False on the last page (or a token that repeats)."""
    token = page.next_page_token
    if not token or token == request.page_token:
        return False
    request.page_token = token
    return True
