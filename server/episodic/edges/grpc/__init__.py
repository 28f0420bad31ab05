"""gRPC transport: translates proto <-> domain and nothing else."""
