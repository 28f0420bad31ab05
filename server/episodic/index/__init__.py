"""Vector search for recall: an exact cosine index per scope."""

from episodic.index.faiss_index import FaissVectorIndex

__all__ = ["FaissVectorIndex"]
