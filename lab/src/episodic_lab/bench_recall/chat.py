"""Synthetic but realistic English for the two MiniLM measurements: chat turns of about
150 characters for the episodes the digest pipeline works through, and short questions like
those an agent would ask its memory. Real words matter here (unlike in the corpus): the
model's cost depends on how many word pieces a text becomes. The vocabulary is public: the
context bench builds its user messages from it too."""

from __future__ import annotations

import numpy as np

TOPICS = (
    "the quarterly report", "my trip to Lisbon", "the new onboarding flow", "our database migration",
    "the birthday party", "my knee injury", "the apartment lease", "the team offsite",
    "the budget review", "my Spanish lessons", "the garden project", "the car insurance claim",
)  # fmt: skip
TIMES = ("last week", "in March", "yesterday", "on Friday", "a month ago", "before the holidays")
PEOPLE = ("Sam", "Priya", "my manager", "the landlord", "Dr. Okafor", "my sister", "the vendor")
_USER_TURNS = (
    "Can you remind me what {person} said about {topic} {time}? I think we agreed on a plan "
    "but I have lost track of the details.",
    "I need to follow up on {topic}. {person} mentioned a deadline {time}, and I want to make "
    "sure nothing slipped through.",
    "Quick update on {topic}: {person} called {time} and said the numbers look better than "
    "expected, so we can move forward.",
)
_ASSISTANT_TURNS = (
    "Sure. You told me {time} that {person} wanted to revisit {topic} once the estimates were "
    "in, and that you would send a summary by Monday.",
    "Noted. I will keep track of {topic}. Last time, {person} asked for a short written "
    "proposal; should I draft one based on our notes?",
    "Thanks for the update on {topic}. I have recorded that {person} confirmed it {time}. Is "
    "there anything else you want me to remember?",
)
_QUESTIONS = (
    "What did {person} say about {topic}?",
    "When is the deadline for {topic}?",
    "What did we decide about {topic} {time}?",
    "Who was handling {topic}?",
    "Did I mention {topic} {time}?",
)


def _fill(templates: tuple[str, ...], rng: np.random.Generator) -> str:
    def pick(options: tuple[str, ...]) -> str:
        return options[int(rng.integers(len(options)))]

    return pick(templates).format(topic=pick(TOPICS), time=pick(TIMES), person=pick(PEOPLE))


def turns(rng: np.random.Generator, count: int) -> list[str]:
    """`count` chat turns, user and assistant alternately, ~150 characters each."""
    return [_fill(_USER_TURNS if i % 2 == 0 else _ASSISTANT_TURNS, rng) for i in range(count)]


def questions(rng: np.random.Generator, count: int) -> list[str]:
    return [_fill(_QUESTIONS, rng) for _ in range(count)]
