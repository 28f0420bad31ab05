"""The "[Knowledge]" message: the caller's knowledge items and the chunks of the agent's
documents found for this turn, as many as fit the section's allowance. Pure.

Order: the caller's items first, best score first (items without a score after those with
one, as given), then the stored chunks in their search rank: the caller retrieved its items
for this very turn, and says how much it trusts each. An item whose text repeats one
already placed (compared with whitespace and case folded) is a DUPLICATE. Each item is
rendered WHOLE if it fits the room left; else TRIMMED to a start of its text that ends on a
token boundary (`Trim`), when at least MIN_TRIM_TOKENS of it fit; else DROPPED. The report
says which, with where each rendered text sits in the message, so the stored model call
holds every item exactly as the model saw it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from episodic.domain.context import RenderedMessage, Section
from episodic.domain.knowledge import KnowledgeFate, KnowledgeItem, KnowledgeOrigin, RenderedKnowledge
from episodic.domain.model import Role
from episodic.domain.reducers import MESSAGE_OVERHEAD, CountTokens, rendered

KNOWLEDGE_HEADER = "[Knowledge]\nReference material for this turn; name the source when you use it:\n"
ENTRY_END = "\n---\n"
MIN_TRIM_TOKENS = 16  # a passage cut shorter than this misleads more than it helps: dropped

# The longest start of a text of at most n tokens, ending on a token boundary.
Trim = Callable[[str, int], str]


def ranked(items: Sequence[KnowledgeItem]) -> list[KnowledgeItem]:
    """The caller's items by score (unscored last, in the order given), then stored chunks."""
    asked = [i for i in items if i.origin is KnowledgeOrigin.REQUEST]
    scored = sorted((i for i in asked if i.score is not None), key=lambda i: -(i.score or 0.0))
    found = [i for i in items if i.origin is KnowledgeOrigin.STORED]
    return scored + [i for i in asked if i.score is None] + found


@dataclass(slots=True)
class _Placed:
    item: KnowledgeItem
    head: str
    body: str  # the item's text as rendered (whole or trimmed)
    fate: KnowledgeFate


def knowledge_block(
    items: Sequence[KnowledgeItem], allowance: int, count: CountTokens, trim: Trim | None
) -> tuple[RenderedMessage | None, tuple[RenderedKnowledge, ...]]:
    """The message (None when nothing is rendered) and the report's line for every item,
    in rank order. `trim` None: an item that does not fit whole is dropped."""
    order = ranked(items)
    placed = _place(order, allowance - count(KNOWLEDGE_HEADER) - MESSAGE_OVERHEAD, count, trim)
    while any(p.fate in _SHOWN for p in placed):
        message, spans = _message(placed, count)
        if message.tokens <= allowance:
            return message, _report(placed, spans, count)
        last = max(i for i, p in enumerate(placed) if p.fate in _SHOWN)  # counts are not exactly additive
        placed[last].fate = KnowledgeFate.DROPPED
    return None, _report(placed, {}, count)


_SHOWN = (KnowledgeFate.WHOLE, KnowledgeFate.TRIMMED)


def _place(order: Sequence[KnowledgeItem], room: int, count: CountTokens, trim: Trim | None) -> list[_Placed]:
    placed: list[_Placed] = []
    seen: set[str] = set()
    for n, item in enumerate(order, start=1):
        head = _head(item, n)
        key = " ".join(item.text.split()).casefold()
        if key in seen:
            placed.append(_Placed(item, head, "", KnowledgeFate.DUPLICATE))
            continue
        whole = count(head + item.text + ENTRY_END)
        if whole <= room:
            seen.add(key)
            placed.append(_Placed(item, head, item.text, KnowledgeFate.WHOLE))
            room -= whole
            continue
        body = _trimmed(item.text, room - count(head + ENTRY_END), trim)
        if body:
            seen.add(key)
            placed.append(_Placed(item, head, body, KnowledgeFate.TRIMMED))
            room -= count(head + body + ENTRY_END)
        else:
            placed.append(_Placed(item, head, "", KnowledgeFate.DROPPED))
    return placed


def _trimmed(text: str, room: int, trim: Trim | None) -> str:
    if trim is None or room < MIN_TRIM_TOKENS:
        return ""
    return trim(text, room).rstrip()


def _head(item: KnowledgeItem, n: int) -> str:
    label = " ".join((item.title or item.source_id or f"item {n}").split())
    where = f" <{item.uri.strip()}>" if item.uri.strip() else ""
    return f"Source: {label}{where}\n"


def _message(
    placed: Sequence[_Placed], count: CountTokens
) -> tuple[RenderedMessage, dict[int, tuple[int, int]]]:
    """The message and, per rendered item (by index), its text's span in the content."""
    parts, spans, at = [KNOWLEDGE_HEADER], {}, len(KNOWLEDGE_HEADER)
    for i, p in enumerate(placed):
        if p.fate not in _SHOWN:
            continue
        start = at + len(p.head)
        spans[i] = (start, start + len(p.body))
        entry = p.head + p.body + ENTRY_END
        parts.append(entry)
        at += len(entry)
    text = "".join(parts).rstrip("\n").removesuffix("\n---")
    return rendered(Role.CONTEXT, text, Section.KNOWLEDGE, count), spans


def _report(
    placed: Sequence[_Placed], spans: dict[int, tuple[int, int]], count: CountTokens
) -> tuple[RenderedKnowledge, ...]:
    lines = []
    for i, p in enumerate(placed):
        start, end = spans.get(i, (0, 0))
        fate = p.fate if i in spans or p.fate is KnowledgeFate.DUPLICATE else KnowledgeFate.DROPPED
        tokens = count(p.body) if i in spans else 0
        item = p.item
        source = item.source_id or item.document_id
        lines.append(
            RenderedKnowledge(
                source, item.origin, fate, item.score, tokens, start, end, item.document_id, item.chunk_index
            )
        )
    return tuple(lines)
