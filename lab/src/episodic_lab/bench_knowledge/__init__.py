"""`episodic-lab bench-knowledge`: SearchKnowledge latency at 100k chunks in one agent against
the Echo baseline, and what a BuildContext turn's knowledge search costs.
Kept import-light: the CLI imports `options` to build its parser on every start-up."""
