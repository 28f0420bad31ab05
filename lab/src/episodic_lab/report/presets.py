"""What "small" and "full" mean: every count and duration of a report run. Small finishes in
about five minutes on two cores (the brief allowed ten); full adds the 1M-episode corpus,
longer cells, more cold trials and conversations, and takes longer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    warmup: float  # seconds per throughput cell, then
    seconds: float  # measured seconds per cell (also the warm history cells)
    history: tuple[int, ...]  # messages in the logs timed warm and cold
    cold_trials: int  # fresh server processes, each one cold call per compacted log
    imported: int  # messages imported into one episode, then its cold first call
    conversations: tuple[int, ...]  # RSS read after warming this many conversations
    corpus_sizes: tuple[int, ...]  # episodes indexed for SearchEpisodes
    search_calls: int  # per mode and size, at most
    search_seconds: float  # per mode and size, at most (warm-up included)
    embed_queries: int  # MiniLM query embeddings timed
    digest_episodes: int


SMALL = Preset(
    name="small",
    warmup=1.0,
    seconds=4.0,
    history=(100, 1_000, 10_000),
    cold_trials=3,
    imported=100_000,  # written at ~10k messages/s: affordable even here
    conversations=(50, 100, 200),
    corpus_sizes=(1_000, 10_000, 100_000),  # 100k: ~15 s to write and measure
    search_calls=300,
    search_seconds=4.0,
    embed_queries=200,
    digest_episodes=50,
)
FULL = Preset(
    name="full",
    warmup=1.0,
    seconds=5.0,
    history=(100, 1_000, 10_000),
    cold_trials=5,
    imported=100_000,
    conversations=(100, 250, 500, 1_000),
    corpus_sizes=(1_000, 10_000, 100_000, 1_000_000),
    search_calls=1_000,
    search_seconds=20.0,
    embed_queries=500,
    digest_episodes=200,
)
PRESETS = {preset.name: preset for preset in (SMALL, FULL)}
