"""Token counting adapters for the `TokenCounter` port (episodic.domain.ports)."""

from episodic.tokens.tiktoken_counter import (
    ASSETS_DIR,
    DEFAULT_ENCODING,
    SUPPORTED_ENCODINGS,
    TiktokenCounter,
    verify_assets,
)

__all__ = [
    "ASSETS_DIR",
    "DEFAULT_ENCODING",
    "SUPPORTED_ENCODINGS",
    "TiktokenCounter",
    "verify_assets",
]
