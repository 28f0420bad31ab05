"""`episodic-lab bench-context`: BuildContext throughput and latency against the Echo baseline,
latency as the log grows, and the server's memory per conversation.
Kept import-light: the CLI imports `options` to build its parser on every start-up."""

from episodic.progress import say


def progress(line: str) -> None:
    """To stderr, so stdout holds only the report (and never inside a progress bar)."""
    say(line)
