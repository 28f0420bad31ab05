"""Search indexes: vectors per scope and words per agent, caches of SQL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from episodic.domain.recall import Hit, Scope, Vector


class VectorIndex(Protocol):
    """Nearest-neighbour search, partitioned by scope by construction: a search can only
    ever see the vectors of the scope it names. Scores are cosine similarities."""

    def add(self, scope: Scope, keys: Sequence[str], vectors: Sequence[Sequence[float]]) -> None: ...

    def remove(self, scope: Scope, keys: Sequence[str]) -> None: ...

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]: ...

    def keys(self, scope: Scope) -> set[str]: ...

    def count(self, scope: Scope) -> int: ...

    def scopes(self) -> list[Scope]: ...


class ScopeVectorSource(Protocol):
    """SQL's vectors of one index (digests' or memories'), of the current embedding model:
    what a scope's cache is loaded and refreshed from."""

    async def scope_vectors(self, scope: Scope) -> tuple[list[str], list[Vector]]:
        """(keys, vectors) of the whole scope."""
        ...

    async def item_vectors(self, scope: Scope, items: Sequence[str]) -> tuple[list[str], list[Vector]]:
        """(keys, vectors) of some episodes (digests: every chunk) or memories of the scope."""
        ...


@runtime_checkable
class ScopeVectorPages(Protocol):
    """A `ScopeVectorSource` that also reads a scope a page at a time: how a scope too large
    for its cache is searched without being held (state/index_cache.py)."""

    async def scope_vector_page(self, scope: Scope, after: str, limit: int) -> tuple[list[str], list[Vector]]:
        """At most `limit` (keys, vectors) of the scope, in the source's one order of keys,
        those after the key `after` ("" for the first page). A page shorter than `limit` is
        the last."""
        ...

    async def scope_vectors_upto(self, scope: Scope, limit: int) -> tuple[list[str], list[Vector]]:
        """At most `limit` (keys, vectors) of the scope, in no particular order: the whole
        scope when it holds fewer (how a load finds a scope too large reading no more than fits)."""
        ...


class WordIndex(Protocol):
    """One agent's chunks by their words (index/words.py): BM25 over an inverted index in
    RAM. Thread-safe: searched off the event loop while the change owner writes."""

    def __len__(self) -> int: ...

    @property
    def held_bytes(self) -> int: ...

    def add(self, chunks: Iterable[tuple[str, str]]) -> None:
        """(chunk key, text) each; a key held already is replaced."""
        ...

    def remove_documents(self, document_ids: Iterable[str]) -> None: ...

    def search(self, query: str, k: int) -> list[Hit]:
        """The k best chunks holding the query's words, best first (Hit.episode_id holds
        the chunk key)."""
        ...


class KnowledgeWords(Protocol):
    """Each agent's chunks by their words, loaded from SQL on first use and kept in step by
    the change owner's changes (state/knowledge_words.py)."""

    async def search(self, tenant_id: str, agent_id: str, query: str, limit: int) -> list[Hit]:
        """Chunks holding the query's words, best first by BM25 (Hit.episode_id holds the
        chunk key); expired documents' chunks too (the caller filters)."""
        ...


class ScopeIndex(Protocol):
    """A `VectorIndex` whose scopes are loaded from SQL on first use (state/index_cache.py)."""

    async def ensure(self, scope: Scope) -> None:
        """Makes the scope searchable; call before `search`."""
        ...

    def search(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]: ...

    async def nearest(self, scope: Scope, vector: Sequence[float], k: int) -> list[Hit]:
        """`ensure` + `search` off the event loop."""
        ...

    def keys(self, scope: Scope) -> set[str]: ...

    def holds_nothing(self, scope: Scope) -> bool:
        """True when the scope is known to hold no vectors (loaded and empty): a search there
        finds nothing, so its query need not be embedded. Never loads."""
        ...

    def resident(self) -> list[Scope]:
        """The scopes held now."""
        ...

    def too_large(self, scope: Scope) -> bool:
        """True while the scope is known to be larger than its cache: never held, each search
        reads its vectors from SQL (so they are SQL's, whatever the index holds)."""
        ...


class StoredVectorKeys(Protocol):
    """(scope, key) of every vector SQL holds, to compare the index with."""

    async def vector_keys(
        self, tenant_id: str, model: str, agent_id: str = ""
    ) -> list[tuple[Scope, str]]: ...
