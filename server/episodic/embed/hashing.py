"""A deterministic bag-of-words embedder, for tests only."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from episodic.embed.vectors import as_lists, unit_rows

DEFAULT_DIMENSION = 256

_WORD = re.compile(r"\w+")
# Gives texts without a single word a unit vector too; every such text gets the same one.
_NO_WORDS = "\x00no-words"


def _features(text: str) -> list[str]:
    """Lower-cased word unigrams and bigrams; prefixes keep the bigram "a b" apart from a
    hypothetical unigram with the same spelling."""
    words = _WORD.findall(text.lower())
    unigrams = [f"u:{word}" for word in words]
    bigrams = [f"b:{first} {second}" for first, second in pairwise(words)]
    # n words give 2n-1 features, an odd count of +-1 terms, so no vector sums to zero.
    return unigrams + bigrams or [_NO_WORDS]


def _bucket_and_sign(feature: str, dimension: int) -> tuple[int, float]:
    # blake2b rather than hash(): str hashes are salted per process, and the vectors must
    # be equal across runs and machines.
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    sign = 1.0 if digest & 1 else -1.0
    return (digest >> 1) % dimension, sign


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams, L2-normalised.

    FOR TESTS ONLY. It has no notion of meaning (synonyms and paraphrases with different
    words score near zero), but it is fast, needs no model, and texts that share words score
    higher than texts that do not, which is what recall tests need.
    """

    # ~0.4 us a character: a query this long costs ~0.1 ms, less than a hop to a thread
    # (domain/ports/models.py embeds_inline).
    inline_chars = 256

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        return f"hashing-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float64)
        for row, text in enumerate(texts):
            for feature in _features(text):
                bucket, sign = _bucket_and_sign(feature, self._dimension)
                matrix[row, bucket] += sign
        return as_lists(unit_rows(matrix))
