"""Vector search for recall: an exact cosine index per scope, and its snapshot file."""

from episodic.index.faiss_index import FaissVectorIndex
from episodic.index.snapshot import SnapshotError, digest_of

__all__ = ["FaissVectorIndex", "SnapshotError", "digest_of"]
