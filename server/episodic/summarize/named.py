"""The named things a sentence states: the specifics a rolling summary should not lose to
the next topic. Pure and deterministic.

Four general rules, no word lists of any one conversation:

- a **proper name**: a capitalised word that does not start the sentence ("my cat Zanzibar",
  "a trip to Lisbon", "the Lean Startup"), or all capitals ("NASA"), unless it is a stop word
  written in capitals for emphasis ("JUST", "The"), "I" or one of the conversation's
  speakers (who says what is the summary's label, not a thing said);
- the word after **"called"**, **"named"** or **"name is"**, capitalised or not ("a dog
  called biscuit");
- a **number** (a run of digits, with its inner separators: "250", "7:30", "3.5");
- a **month or weekday** name, even at the start of a sentence ("May" only past it: there it
  is the verb).

Each sentence is read once, word by word (a sentence is at most `text.MAX_SENTENCE_CHARS`),
and at most `MAX_NAMED` things are kept of it, so hostile text (a page of capitalised words)
costs what prose of the same size costs and never makes a sentence weigh more than a few
names."""

from __future__ import annotations

import re
from collections.abc import Collection

from episodic.summarize.text import STOPWORDS, fold

MAX_NAMED = 8
_EDGES = "\"'()[]{}<>.,;:!?…“”‘’*_~-–—/+&#%$€£"
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
_NAMING = frozenset({"called", "named"})
_NOT_NAMES = frozenset({"ok", "am", "pm", "i", "u"})
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CALENDAR = frozenset((*_MONTHS, "october", "november", "december", *_DAYS))


def named_things(text: str, speakers: Collection[str] = ()) -> tuple[str, ...]:
    """The distinct named things of one sentence, folded, in order. `speakers` are the folded
    names of who speaks (never a thing said, nor is a name they start: "Mel" of "melanie");
    the caller bounds how many there are."""
    found: dict[str, None] = {}
    naming = False  # the previous word names what follows ("called", "name is")
    previous = ""
    for position, raw in enumerate(text.split()):
        if len(found) >= MAX_NAMED:
            break
        word = raw.strip(_EDGES)
        if not word:
            continue
        folded = fold(word)
        if folded.endswith("'s"):
            word, folded = word[:-2], folded[:-2]
        if any(char.isdigit() for char in word):
            found.update(dict.fromkeys(_NUMBER.findall(word)))
        elif _is_named(word, folded, position, naming) and not _speaker(folded, speakers):
            found[folded] = None
        naming = folded in _NAMING or (folded == "is" and previous == "name")
        previous = folded
    return tuple(found)[:MAX_NAMED]


def _speaker(folded: str, speakers: Collection[str]) -> bool:
    """A speaker's name, or the start of one ("Mel" of "melanie")."""
    return folded in speakers or (len(folded) > 2 and any(name.startswith(folded) for name in speakers))


def _is_named(word: str, folded: str, position: int, naming: bool) -> bool:
    if folded in _CALENDAR:
        return word[0].isupper() and (position > 0 or folded != "may")
    if folded in STOPWORDS or folded in _NOT_NAMES or folded.startswith("i'"):
        return False
    if naming:
        return word[0].isalpha()
    return position > 0 and word[0].isupper() and len(word) > 1
