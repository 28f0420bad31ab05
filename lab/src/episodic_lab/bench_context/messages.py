"""The user message of each BuildContext call, different from call to call as in a real
conversation. SEMANTIC and HYBRID recall embed that text (MiniLM, ~5 ms) and the server keeps
the vectors of its last 1,024 texts, so a bench that repeats one text measures that cache,
not a new turn. Texts come in a fixed shuffled order from a pool of templates x topics x
people x times, larger than the cache: a text comes back only after the cache dropped it."""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field

from episodic_lab.bench_recall.chat import PEOPLE, TIMES, TOPICS

# Questions a user asks mid-conversation, 70-130 characters; each uses every slot, so every
# combination is a different text.
TEMPLATES = (
    "What did {person} say about {topic} {time}, and is that still the plan?",
    "Can you remind me what we decided on {topic} {time}? I think {person} had concerns.",
    "{person} asked about {topic} {time}. What should I tell them about the next steps?",
    "Did {person} ever send the numbers for {topic}? We talked about it {time}.",
    "Summarize what I told you about {topic} {time}, especially anything {person} promised.",
    "Is the deadline for {topic} still what {person} proposed {time}, or did it move?",
)
# The one text of --same-message: every call after the first is a query-cache hit.
REPEATED_MESSAGE = "What did Sam say about the quarterly report, and is the Friday deadline still on?"
SHUFFLE_SEED = 0


@functools.cache
def pool() -> tuple[str, ...]:
    """Every combination once, shuffled so that neighbours differ in more than one word;
    capitalized, since "{person} asked..." may begin with "my manager"."""
    texts = [
        template.format(person=person, topic=topic, time=time)
        for template, topic, person, time in itertools.product(TEMPLATES, TOPICS, PEOPLE, TIMES)
    ]
    random.Random(SHUFFLE_SEED).shuffle(texts)
    return tuple(_capitalized(text) for text in texts)


def _capitalized(text: str) -> str:
    return text[0].upper() + text[1:]


def user_message(number: int) -> str:
    """Call number `number`'s text; the pool repeats only after len(pool()) calls."""
    texts = pool()
    return texts[number % len(texts)]


@dataclass(slots=True)
class UserMessages:
    """Hands out the next call's text; shared by the concurrent workers of one client."""

    repeat: bool = False  # REPEATED_MESSAGE every time, as the bench did before
    _numbers: itertools.count[int] = field(default_factory=itertools.count)

    def next(self) -> str:
        number = next(self._numbers)
        return REPEATED_MESSAGE if self.repeat else user_message(number)
