"""Picks an embedder by name, for the composition root."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from episodic.domain.ports.models import Embedder
from episodic.embed.hashing import HashingEmbedder
from episodic.embed.minilm import MiniLmEmbedder
from episodic.embed.openai_compat import OpenAIEmbedder

DEFAULT_KIND = "minilm"

_CONSTRUCTORS: Mapping[str, Callable[..., Embedder]] = MappingProxyType(
    {
        "minilm": MiniLmEmbedder,
        "minilm-fp32": functools.partial(MiniLmEmbedder, arithmetic="fp32"),
        "openai": OpenAIEmbedder,
        "hashing": HashingEmbedder,
    }
)
KINDS = tuple(_CONSTRUCTORS)


def make_embedder(kind: str = DEFAULT_KIND, **options: Any) -> Embedder:
    """An embedder of `kind`, built with `options` as its constructor's keyword arguments:
    "minilm" and "minilm-fp32" (model_path, model_sha256, vocab_path, threads, batch_size,
    cache_dir: where the int8 graph is cached, see minilm.MiniLmEmbedder),
    "openai" (base_url, model, api_key, dimension, timeout, max_batch_size) or "hashing"
    (dimension)."""
    constructor = _CONSTRUCTORS.get(kind)
    if constructor is None:
        raise ValueError(f"unknown embedder kind {kind!r}; allowed: {', '.join(KINDS)}")
    return constructor(**options)
