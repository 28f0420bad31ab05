"""The models: embedders, summarizers, memory extractors and the token counter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from episodic.domain.memories import ExtractedMemory
from episodic.domain.model import Message
from episodic.domain.recall import DigestText, Vector


class Embedder(Protocol):
    """Turns texts into unit-length vectors. `model_id` and `dimension` are recorded with
    every stored vector, so a change of model is detected."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class TenantEmbeddings(Protocol):
    """The server's embedding threads, taken in turn by tenants (state/embed_turns.py): each
    tenant's jobs wait in a line of their own and a free thread takes the next from the
    tenant served least recently, so one tenant's embeddings never sit in front of a quiet
    tenant's. `query`: texts a call waits for (a turn's query); `bulk`: memories, digests,
    earlier messages, documents' chunks, in a lane of their own (never in front of a query),
    a chunk at a time."""

    async def query(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]: ...

    async def bulk(self, tenant_id: str, texts: Sequence[str]) -> list[Vector]: ...


def embeds_inline(embedder: Embedder, text: str) -> bool:
    """Whether embedding `text` costs less on the calling thread than a hop to another
    (~0.3 ms). An embedder says so with an `inline_chars` attribute (texts up to that many
    characters); a model has none: it is never run on the event loop."""
    chars = getattr(embedder, "inline_chars", 0)
    return isinstance(chars, int) and len(text) <= chars


class MemoryExtractor(Protocol):
    """Finds discrete memories in a closed episode's transcript, each with the seqs that
    state it. `instructions`, when given, replace an LLM extractor's default prompt (the
    agent's memory_extraction_prompt); a deterministic extractor ignores them."""

    @property
    def name(self) -> str: ...

    def extract(self, transcript: Sequence[Message], instructions: str = "") -> list[ExtractedMemory]: ...


class Summarizer(Protocol):
    """Summarizes one episode's transcript into a summary and short key facts."""

    def summarize(self, transcript: Sequence[Message]) -> DigestText: ...


class TokenCounter(Protocol):
    """Counts tokens with a named tiktoken-compatible encoding; never downloads anything."""

    def supported_encodings(self) -> frozenset[str]: ...

    def encoding_for_model(self, model: str) -> str: ...

    def known_model_encoding(self, model: str) -> str | None: ...

    def count(self, text: str, encoding: str) -> int: ...

    def prefix(self, text: str, tokens: int, encoding: str) -> str:
        """The longest start of `text` that is the text of its first `tokens` tokens or fewer:
        it ends on a token boundary (and on a whole character), never inside a token."""
        ...
