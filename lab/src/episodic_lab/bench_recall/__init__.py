"""`episodic-lab bench-recall`: SearchEpisodes latency at 1k, 100k and 1M indexed episodes next to
the Echo baseline, the query-embedding cost, and digest throughput. Kept import-light: the
CLI imports `options` to build its parser on every start-up."""


class BenchRecallError(Exception):
    """The bench cannot go on (the corpus does not answer as built, a server did not start)."""
