"""`episodic-lab bench`: durable AddMessage throughput and latency against the Echo baseline.
Kept import-light: the CLI imports `options` to build its parser on every start-up."""


class BenchError(Exception):
    """The bench cannot go on (a server did not start, a database cannot be made)."""
