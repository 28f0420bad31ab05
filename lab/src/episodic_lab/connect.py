"""How every tool of the lab reaches a server: the typed `episodic_client`, plaintext, as the
insecure-dev tenant."""

from __future__ import annotations

from episodic_client import AsyncEpisodicClient

# The tools measure, they do not give up: a deadline that only a hung server reaches (a cold
# BuildContext over a 10k-message log, or a digest-waiting close, takes seconds).
CALL_TIMEOUT_SECONDS = 600.0


def lab_client(target: str) -> AsyncEpisodicClient:
    """Use as `async with lab_client(server.target) as client:`."""
    return AsyncEpisodicClient(target, timeout=CALL_TIMEOUT_SECONDS)
