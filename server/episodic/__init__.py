"""Episodic: a gRPC memory service for LLM agents."""

__version__ = "0.1.0"
