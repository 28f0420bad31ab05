"""The lab of Episodic: benchmarks, soak and evaluations, installed apart from the server."""
