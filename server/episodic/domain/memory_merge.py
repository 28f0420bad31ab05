"""When a new memory repeats or contradicts one the user already has. Pure.

The rules (docs/memories.md):
1. Exact duplicate: the same text once case, spacing and end punctuation are folded
   (`memories.normalized`), in the same scope -> merged into the older memory (its
   merge_count goes up; the newer one is not stored).
2. Near duplicate: cosine similarity of the embeddings >= NEAR_DUPLICATE and the same set of
   entities (both may be empty) and the same kind -> merged likewise.
3. Contradiction: the same kind and the same *frame* -- the text with its entities, capitalised
   names, numbers and negations taken out -- but different texts, where the frame either
   states a single-valued relation (lives in, works at, is, favourite, prefers, moved to...)
   or the two differ in negation ("likes sushi" / "doesn't like sushi") -> the newer
   supersedes the older: the older is kept for history with superseded_by set, and is not
   recalled unless asked for. "Likes Python" and "likes Rust" are both kept: liking is not
   single-valued.
Newer means later in time: an episode's memories are newer than everything stored before.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from episodic.domain.memories import Memory, mentioned, normalized

NEAR_DUPLICATE = 0.92
_NEGATION = re.compile(
    r"\b(?:not|no|never|no longer|n't|don't|doesn't|didn't|isn't|aren't|wasn't|won't|cannot)\b"
)
_NAMES = re.compile(r"\b[A-Z][\w'-]*|\d[\d.,:/-]*")
_WORD = re.compile(r"[\w']+")
_SINGLE_VALUED = frozenset(
    [
        "is",
        "am",
        "are",
        "was",
        "'m",
        "'s",
        "live",
        "lives",
        "living",
        "lived",
        "work",
        "works",
        "working",
        "worked",
        "moved",
        "move",
        "favourite",
        "favorite",
        "prefer",
        "prefers",
        "preferred",
        "name",
        "named",
        "age",
        "old",
        "born",
        "married",
        "engaged",
        "single",
        "divorced",
        "based",
        "from",
        "job",
        "title",
        "studying",
        "study",
        "studies",
    ]
)
_MAX_FRAME_CHARS = 400  # frames are short: a long text is compared by its start only


def frame_of(text: str, entities: Sequence[str]) -> str:
    """The text without what it says about whom: entities, names, numbers, negations."""
    return _frame(text[:_MAX_FRAME_CHARS], tuple(entities))


# A batch compares each new memory with every one before it: remembered, each memory's
# frame and folded text are worked out once, not once per comparison (pure functions).
_REMEMBERED = 4096
_folded = functools.lru_cache(maxsize=_REMEMBERED)(normalized)


@functools.lru_cache(maxsize=_REMEMBERED)
def _frame(head: str, entities: tuple[str, ...]) -> str:
    for entity in sorted({e for e in entities if e.strip()}, key=len, reverse=True)[:16]:
        head = head.replace(entity, " ")
    head = _NAMES.sub(" ", head)
    folded = _NEGATION.sub(" ", _folded(head).replace("\u2019", "'"))
    return " ".join(_WORD.findall(folded))


def frame_key(kind: str, text: str, entities: Sequence[str]) -> str:
    return hashlib.sha256(f"{kind}\x00{frame_of(text, entities)}".encode()).hexdigest()


def negated(text: str) -> bool:
    return _NEGATION.search(_folded(text[:_MAX_FRAME_CHARS]).replace("\u2019", "'")) is not None


@dataclass(frozen=True, slots=True)
class Candidate:
    """An existing memory the new one is compared with, and its similarity (0 if unknown)."""

    memory: Memory
    similarity: float = 0.0


def duplicate_of(new: Memory, candidates: Sequence[Candidate]) -> Memory | None:
    """The oldest existing memory the new one repeats (rules 1 and 2), if any."""
    key = _folded(new.text)
    entities = mentioned(new.entities)
    repeats = [
        c.memory
        for c in candidates
        if c.memory.memory_id != new.memory_id
        and c.memory.kind == new.kind
        and (
            _folded(c.memory.text) == key
            or (c.similarity >= NEAR_DUPLICATE and mentioned(c.memory.entities) == entities)
        )
    ]
    return min(repeats, key=lambda m: (m.created_at, m.memory_id), default=None)


def contradicted(new: Memory, candidates: Sequence[Candidate]) -> list[Memory]:
    """Existing memories the new one supersedes (rule 3)."""
    frame = frame_of(new.text, new.entities)
    if not frame:
        return []
    key, single = _folded(new.text), _single_valued(frame)
    found = []
    for c in candidates:
        old = c.memory
        if old.memory_id == new.memory_id or old.kind != new.kind or _folded(old.text) == key:
            continue
        if frame_of(old.text, old.entities) != frame:
            continue
        if single or negated(old.text) != negated(new.text):
            found.append(old)
    return found


def _single_valued(frame: str) -> bool:
    return any(word in _SINGLE_VALUED for word in frame.split())
