"""`episodic-lab report`: every benchmark at one size, in one command, as Markdown tables and
PNG plots in one directory. It measures nothing of its own: each section calls the benches'
functions (bench, bench_context, bench_recall). Kept import-light: the CLI imports `options`
to build its parser on every start-up."""
