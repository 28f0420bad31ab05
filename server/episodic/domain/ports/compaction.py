"""Compaction beside the turn: summaries made in the background and who hears of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from episodic.domain.model import Episode, Message

if TYPE_CHECKING:  # the working set module imports this one
    from episodic.domain.working_set import WorkingSet


class BackgroundCompactions(Protocol):
    """Summaries made off the request path (an LLM summarizer): a turn schedules one and
    goes on with its reducers and the previous summary."""

    def schedule(self, key: tuple[str, str], working_set: WorkingSet, through: int) -> None: ...


class CompactionListener(Protocol):
    """Told what a new summary of a live episode folded in, so memories can be extracted
    from it while the episode is still open (seed 001's memories awaiting promotion)."""

    def compacted(self, episode: Episode, messages: Sequence[Message]) -> None:
        """Called on the event loop right after the summary is stored, with the messages it
        newly covers (retracted ones left out), oldest first. Must not block: the work runs
        in the background, and a failure there is logged, never raised to the turn."""
