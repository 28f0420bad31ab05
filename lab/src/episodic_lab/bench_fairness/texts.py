"""Text for the tenants' messages and memories: words drawn from a fixed vocabulary, so a
message tokenizes like prose (about 5 characters a token) and no two are alike."""

from __future__ import annotations

import random

WORDS = (
    "the",
    "report",
    "deadline",
    "moved",
    "to",
    "friday",
    "and",
    "sam",
    "will",
    "draft",
    "summary",
    "section",
    "first",
    "while",
    "priya",
    "checks",
    "numbers",
    "for",
    "quarterly",
    "budget",
    "review",
    "meeting",
    "with",
    "finance",
    "on",
    "monday",
    "morning",
    "about",
    "hiring",
    "plans",
    "travel",
    "costs",
    "vendor",
    "contracts",
    "server",
    "migration",
    "customer",
    "churn",
    "onboarding",
    "flow",
    "roadmap",
    "launch",
    "date",
    "marketing",
    "copy",
    "pricing",
    "page",
    "invoice",
    "backlog",
    "support",
)


def prose(rng: random.Random, characters: int) -> str:
    """About `characters` characters of words (never cut mid-word)."""
    words: list[str] = []
    length = 0
    while length < characters:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)
