"""Offline evaluations of recall quality (not shipped data: they read it from a path)."""
