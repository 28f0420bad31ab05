"""Benchmark of FaissVectorIndex: build N random unit vectors over U = min(10k, N/10) scopes,
then time random-scope searches.

    episodic-lab bench-index [--sizes 1000,100000,1000000] [--searches 2000]

Vectors are added a few at a time, round-robin over the scopes, the way a digest task adds
an episode's chunks; keys have the length of real ones ("ep_" + 26 characters + "#n").
Queries are passed as Python lists, as an Embedder returns them, so the figures include
converting the query. RSS is the process's resident memory after the build; the delta is
what the build added (memory of earlier sizes is freed first, but the allocator may keep
some of it)."""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from episodic.domain.recall import Scope
from episodic.index.faiss_index import FaissVectorIndex

_CHUNK_ROWS = 65_536  # vectors generated at a time, to bound the generator's own memory


@dataclass(frozen=True, slots=True)
class Result:
    vectors: int
    scopes: int
    add_s: float
    rss_mib: float
    delta_mib: float
    p50_us: float
    p99_us: float
    max_us: float


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m episodic_lab.bench_index",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser)
    run_bench_index(parser.parse_args(argv))


def run_bench_index(args: argparse.Namespace) -> int:
    """The `episodic-lab bench-index` command."""
    print(
        f"cores={os.cpu_count()} load={os.getloadavg()[0]:.2f} faiss={faiss.__version__} "
        f"numpy={np.__version__} dim={args.dim} k={args.k} searches={args.searches} batch={args.batch}"
    )
    if args.scope_sizes:
        _one_scope_table(args)
    if args.sizes:
        _spread_table(args)
    return 0


def _spread_table(args: argparse.Namespace) -> None:
    print(
        f"{'vectors':>9} {'scopes':>7} {'add s':>8} {'RSS MiB':>8} {'+MiB':>7} "
        f"{'p50 µs':>7} {'p99 µs':>7} {'max µs':>8}"
    )
    for size in args.sizes:
        result, index, scopes = _run(size, args)
        print(
            f"{result.vectors:>9} {result.scopes:>7} {result.add_s:>8.1f} {result.rss_mib:>8.0f} "
            f"{result.delta_mib:>7.0f} {result.p50_us:>7.1f} {result.p99_us:>7.1f} {result.max_us:>8.0f}",
            flush=True,
        )
        del index
        gc.collect()
        if args.scope_loads:
            _time_scope_loads(size, scopes, args)
            gc.collect()


def _one_scope_table(args: argparse.Namespace) -> None:
    """Search latency as a function of the size of the searched scope."""
    print(f"{'one scope of':>12} {'p50 µs':>8} {'p99 µs':>8}")
    rng = np.random.default_rng(args.seed)
    scope = _scope(0)
    for size in args.scope_sizes:
        index = FaissVectorIndex(args.dim)
        index.add(scope, [f"ep_{row:026d}#0" for row in range(size)], _unit_vectors(rng, size, args.dim))
        p50, p99 = np.percentile(_search_times(index, [scope], args, rng), [50, 99])
        print(f"{size:>12} {p50:>8.1f} {p99:>8.1f}", flush=True)
        del index


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes", type=_sizes, default=[1_000, 100_000, 1_000_000], help="vector counts, comma-separated"
    )
    parser.add_argument(
        "--scope-sizes",
        type=_sizes,
        default=[],
        help="also time searches of one scope of each of these sizes",
    )
    parser.add_argument("--searches", type=int, default=2000)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=2, help="vectors per add call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--scope-loads",
        action="store_true",
        help="also time adding the same vectors one whole scope per add, as a scope loads from SQL",
    )


def _sizes(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part]


def _run(size: int, args: argparse.Namespace) -> tuple[Result, FaissVectorIndex, list[Scope]]:
    rng = np.random.default_rng(args.seed)
    scopes = [_scope(number) for number in range(max(1, min(10_000, size // 10)))]
    rss_before = _rss_mib()
    index, add_s = _build(size, scopes, args, rng)
    rss = _rss_mib()
    times = _search_times(index, scopes, args, rng)
    p50, p99 = np.percentile(times, [50, 99])
    result = Result(size, len(scopes), add_s, rss, rss - rss_before, p50, p99, float(times.max()))
    return result, index, scopes


def _scope(number: int) -> Scope:
    return Scope(f"tenant-{number % 10}", f"agent-{number % 7}", f"user-{number:06d}")


def _build(
    size: int, scopes: list[Scope], args: argparse.Namespace, rng: np.random.Generator
) -> tuple[FaissVectorIndex, float]:
    """The index and the seconds spent in `add` (the "add s" column; generating the vectors
    is not counted)."""
    index = FaissVectorIndex(args.dim)
    spent = 0.0
    for start in range(0, size, _CHUNK_ROWS):
        vectors = _unit_vectors(rng, min(_CHUNK_ROWS, size - start), args.dim)
        for offset in range(0, len(vectors), args.batch):
            row = start + offset
            batch = vectors[offset : offset + args.batch]
            keys = [f"ep_{row:026d}#{chunk}" for chunk in range(len(batch))]
            scope = scopes[(row // args.batch) % len(scopes)]
            began = time.perf_counter()
            index.add(scope, keys, batch)
            spent += time.perf_counter() - began
    return index, spent


def _search_times(
    index: FaissVectorIndex, scopes: list[Scope], args: argparse.Namespace, rng: np.random.Generator
) -> np.ndarray:
    """Microseconds per search, each of a random scope."""
    queries = _unit_vectors(rng, args.searches, args.dim).tolist()
    picks = rng.integers(0, len(scopes), args.searches).tolist()
    times = np.empty(args.searches)
    for i, (query, pick) in enumerate(zip(queries, picks, strict=True)):
        began = time.perf_counter_ns()
        hits = index.search(scopes[pick], query, args.k)
        times[i] = (time.perf_counter_ns() - began) / 1e3
        assert hits, "every scope holds vectors"
    return times


def _time_scope_loads(size: int, scopes: list[Scope], args: argparse.Namespace) -> None:
    """The same number of vectors added one whole scope per `add`, as a scope is loaded from
    SQL on its first search (the SQL read itself not counted)."""
    rng = np.random.default_rng(args.seed)
    index = FaissVectorIndex(args.dim)
    spent, row = 0.0, 0
    for number, scope in enumerate(scopes):
        count = size // len(scopes) + (1 if number < size % len(scopes) else 0)
        vectors = _unit_vectors(rng, count, args.dim)
        keys = [f"ep_{row + offset:026d}#0" for offset in range(count)]
        row += count
        began = time.perf_counter()
        index.add(scope, keys, vectors)
        spent += time.perf_counter() - began
    print(
        f"{'':>9} the same, one whole scope per add (as loaded from SQL): add {spent:.2f} s",
        flush=True,
    )
    del index


def _unit_vectors(rng: np.random.Generator, count: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((count, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def _rss_mib() -> float:
    # /proc is Linux-only; elsewhere the column shows 0 rather than a wrong figure.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


if __name__ == "__main__":
    main()
