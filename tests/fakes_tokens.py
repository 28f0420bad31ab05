"""A deterministic TokenCounter for tests: one token per whitespace-separated word.

Cheap and obvious, so tests can state expected counts by eye without loading BPE ranks.
"""

from __future__ import annotations

import re

from episodic.errors import InvalidArgument

_SUPPORTED = frozenset({"cl100k_base", "o200k_base"})


class WordTokenCounter:
    """Implements episodic.domain.ports.TokenCounter."""

    def supported_encodings(self) -> frozenset[str]:
        return _SUPPORTED

    def encoding_for_model(self, model: str) -> str:
        # The gpt-4o family and the o-series use o200k_base; everything else falls back.
        newer = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4")
        return "o200k_base" if model.startswith(newer) else "cl100k_base"

    def known_model_encoding(self, model: str) -> str | None:
        return self.encoding_for_model(model) if model.startswith(("gpt-", "o1", "o3", "o4")) else None

    def count(self, text: str, encoding: str) -> int:
        if encoding not in _SUPPORTED:
            supported = ", ".join(sorted(_SUPPORTED))
            raise InvalidArgument.of(
                "token_encoding", f"unsupported token encoding {encoding!r}; supported: {supported}"
            )
        return len(text.split())

    def prefix(self, text: str, tokens: int, encoding: str) -> str:
        """Up to the end of the `tokens`-th word."""
        words = list(re.finditer(r"\S+", text))
        if tokens <= 0:
            return ""
        return text if len(words) <= tokens else text[: words[tokens - 1].end()]
