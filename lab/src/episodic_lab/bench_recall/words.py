"""Synthetic text for the corpus and the queries: made-up pronounceable words whose
frequencies follow Zipf's law, as natural language does. A handful of words are as common
as English's "the" (in nearly every text) and most are rare, so the lexical leg of HYBRID
meets posting lists of a realistic shape, long ones included.

Texts are built from a pool of short phrases: joining a few phrases per row keeps the
generation of a million rows to seconds, and the words inside each phrase are drawn from
the Zipf distribution, so word frequencies over the corpus follow it too."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

VOCABULARY = 20_000
ZIPF_EXPONENT = 1.0  # English is close to 1
PHRASES = 50_000
PHRASE_WORDS = 4
QUERY_WORDS = 3
RARE_FROM_RANK = 1_000  # "rare" query words: none of the 1,000 most frequent
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True, slots=True)
class Lexicon:
    words: tuple[str, ...]  # most frequent first
    phrases: tuple[str, ...]
    _cdf: NDArray[np.float64]

    def sample(self, rng: np.random.Generator, count: int, from_rank: int = 0) -> list[str]:
        """`count` words drawn by frequency, among the words of rank `from_rank` and below."""
        floor = self._cdf[from_rank - 1] if from_rank else 0.0
        draws = floor + rng.random(count) * (1.0 - floor)
        ranks = np.minimum(np.searchsorted(self._cdf, draws, side="right"), len(self.words) - 1)
        return [self.words[rank] for rank in ranks.tolist()]

    def query(self, rng: np.random.Generator, rare: bool = False) -> str:
        """A few words drawn by frequency, like a short question; `rare` leaves out the
        common words (as a stop list would, and more)."""
        return " ".join(self.sample(rng, QUERY_WORDS, RARE_FROM_RANK if rare else 0))


def lexicon(seed: int) -> Lexicon:
    rng = np.random.default_rng(seed)
    words = _made_up_words(rng, VOCABULARY)
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** ZIPF_EXPONENT
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    draft = Lexicon(words, (), cdf)
    phrases = tuple(" ".join(draft.sample(rng, PHRASE_WORDS)) for _ in range(PHRASES))
    return Lexicon(words, phrases, cdf)


def _made_up_words(rng: np.random.Generator, count: int) -> tuple[str, ...]:
    """Distinct words of 2 or 3 consonant-vowel syllables, in random order."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    two = [a + b for a in syllables for b in syllables]
    three = [w + s for w in two for s in syllables]
    candidates = np.array(two + three)
    picked = rng.choice(len(candidates), size=count, replace=False)
    return tuple(str(word) for word in candidates[picked])
