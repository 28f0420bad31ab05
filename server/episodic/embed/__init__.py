"""Adapters for the `Embedder` port (episodic.domain.ports): a local MiniLM model (the
default), any OpenAI-compatible endpoint, and a hashing embedder for tests."""

from episodic.embed.errors import EmbeddingError
from episodic.embed.factory import DEFAULT_KIND, KINDS, make_embedder
from episodic.embed.hashing import HashingEmbedder
from episodic.embed.minilm import MiniLmEmbedder
from episodic.embed.openai_compat import OpenAIEmbedder

__all__ = [
    "DEFAULT_KIND",
    "KINDS",
    "EmbeddingError",
    "HashingEmbedder",
    "MiniLmEmbedder",
    "OpenAIEmbedder",
    "make_embedder",
]
