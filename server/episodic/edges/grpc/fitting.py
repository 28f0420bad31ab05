"""Responses that fit the server's max_send_message_bytes. grpc refuses a larger one only
after the work is done, with a bare RESOURCE_EXHAUSTED; here a list page stops early
instead (its next_page_token continues from there), and a response that cannot be made
smaller is FAILED_PRECONDITION (reason RESPONSE_TOO_LARGE), as for the model-call RPCs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from google.protobuf.message import Message

from episodic.domain.model import Page
from episodic.errors import FailedPrecondition

R = TypeVar("R", bound=Message)
T = TypeVar("T")

# Room left for next_page_token when a page is cut: a token is ~150 bytes of base64 JSON.
_TOKEN_ROOM = 512


def too_large(what: str, size: int, limit: int, advice: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"{what} is {size} bytes, over the server's max_send_message_bytes ({limit}); {advice}",
        reason="RESPONSE_TOO_LARGE",
    )


def require_fits(response: R, limit: int, advice: str) -> R:
    size = response.ByteSize()
    if size > limit:
        raise too_large("the response", size, limit, advice)
    return response


async def fitted_page(
    read: Callable[[int], Awaitable[Page[T]]],
    respond: Callable[[Page[T]], R],
    entries: Callable[[R], Sequence[Message]],
    page_size: int,
    limit: int,
    noun: str,
) -> R:
    """The page `read(page_size)` as a response of at most `limit` bytes. When it is larger,
    the page is read again with as many items as fit, so its next_page_token is the one the
    listing itself issues for that position (the items of a re-read are checked again: the
    listing may have changed in between)."""
    page = await read(page_size)
    while True:
        response = respond(page)
        size = response.ByteSize()
        if size <= limit:
            return response
        items = entries(response)
        fewer = min(count_that_fit([e.ByteSize() for e in items], limit - _TOKEN_ROOM), len(items) - 1)
        if fewer < 1:
            raise too_large(f"the next {noun}", items[0].ByteSize(), limit, "raise the limit")
        page = await read(fewer)


def count_that_fit(sizes: Sequence[int], budget: int) -> int:
    """How many of the first entries of a repeated message field fit in `budget` bytes,
    each encoded as a one-byte tag, a varint length and the entry."""
    used = 0
    for count, size in enumerate(sizes):
        used += 1 + _varint_size(size) + size
        if used > budget:
            return count
    return len(sizes)


def _varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)
