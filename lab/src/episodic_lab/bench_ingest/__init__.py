"""`episodic-lab bench-ingest`: knowledge ingestion through CreateDocuments (documents/s and
tokens/s), by bulk embedding threads and onnxruntime threads, with query latency meanwhile.
Kept import-light: the CLI imports `options` to build its parser on every start-up."""
