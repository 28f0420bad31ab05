"""The one error every embedder raises."""

from __future__ import annotations


class EmbeddingError(Exception):
    """No vectors could be produced: a missing or altered model file, or a remote endpoint
    that failed or answered something unusable. Deliberately not an EpisodicError: the
    service decides what a failed embedding means for a request."""
