"""The printed report (tables per corpus size, query embedding, digest throughput, the
target verdict, the command to reproduce) and the JSON of the same figures."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from episodic_lab.bench_recall.digest import DigestRun
from episodic_lab.bench_recall.embedding import EmbeddingCost
from episodic_lab.bench_recall.latency import Budget, Figures
from episodic_lab.bench_recall.options import Options
from episodic_lab.bench_recall.rows import PHRASES_PER_ROW
from episodic_lab.bench_recall.stages import MatchCounts, Stage
from episodic_lab.bench_recall.words import PHRASE_WORDS, QUERY_WORDS, VOCABULARY, ZIPF_EXPONENT

TARGET_P99_MS = 5.0
TARGET_SIZE = 1_000_000
CALL_HEADERS = (
    "call", "calls", "p50 ms", "p90 ms", "p99 ms", "max ms", "calls/s", "p50/echo", "rps/echo", "full GCs",
)  # fmt: skip
STEP_HEADERS = (
    "step, called directly (no gRPC)",
    "calls",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "max ms",
    "full GCs",
)


@dataclass(frozen=True, slots=True)
class SizeReport:
    episodes: int
    users: int
    corpus_seconds: dict[str, float]
    file_mib: float
    index_seconds: float
    rss_mib: float
    peak_rss_mib: float
    echo: Figures
    searches: dict[str, Figures]  # by mode
    stages: list[Stage] = field(default_factory=list)
    matches: tuple[MatchCounts, ...] = ()  # all query words, then rare words only


def header(machine: dict[str, str], options: Options, dimension: int) -> str:
    facts = ", ".join(f"{key} {value}" for key, value in machine.items())
    words = f"Zipf(s={ZIPF_EXPONENT:g}) over {VOCABULARY:,} made-up words"
    text_words = PHRASES_PER_ROW * PHRASE_WORDS
    warmup = Budget.of(options.calls, options.max_seconds).warmup
    row_time = f"at most {options.max_seconds:g} s in all"
    return "\n".join(
        [
            "Episodic bench-recall: SearchEpisodes against Echo, one call in flight",
            f"machine: {facts}",
            "server: in this process (open_app + serve_app, SQLite file, hashing query embedder, no access",
            "        log, no background work); client: episodic_client on the same event loop (one GIL)",
            "corpus: N closed episodes with READY digests, one agent, U = min(10k, N/10) users;",
            f"        one random unit vector (dim {dimension}) per episode in FaissVectorIndex;",
            f"        digest texts of ~{text_words} words, queries of {QUERY_WORDS} words,",
            f"        both {words}",
            f"each row: up to {options.calls} measured calls after {warmup} warm-up calls, {row_time}; "
            "random user per call; top_k 5",
        ]
    )


def size_section(r: SizeReport) -> str:
    per_user = r.episodes / r.users
    steps = ", ".join(f"{name} {seconds:.1f}" for name, seconds in r.corpus_seconds.items())
    lines = [
        f"== {r.episodes:,} episodes, {r.users:,} users ({per_user:g} per user) ==",
        f"corpus: SQL {sum(r.corpus_seconds.values()):.1f} s ({steps}), file {r.file_mib:,.0f} MiB; "
        f"index {r.index_seconds:.1f} s; RSS {r.rss_mib:,.0f} MiB after build (peak {r.peak_rss_mib:,.0f})",
    ]
    for m, words in zip(r.matches, ("all words", "rare words"), strict=False):
        lines.append(
            f"texts of all users a query matches ({words}; FTS5 filters by user after matching): "
            f"median {m.median:,.0f}, max {m.largest:,} of {r.episodes:,} ({m.queries} queries)"
        )
    lines += ["", _table(CALL_HEADERS, [_call_cells("Echo", r.echo, r.echo), *_search_rows(r)])]
    if r.stages:
        lines += ["", _table(STEP_HEADERS, [_step_cells(s) for s in r.stages])]
    return "\n".join(lines)


def _search_rows(r: SizeReport) -> list[tuple[str, ...]]:
    return [_call_cells(f"SearchEpisodes {mode}", f, r.echo) for mode, f in r.searches.items()]


def _call_cells(name: str, f: Figures, echo: Figures) -> tuple[str, ...]:
    ratio = f.p50_ms / echo.p50_ms if echo.p50_ms else float("nan")
    rps_ratio = f.rps / echo.rps if echo.rps else float("nan")
    return (name, *_ms(f)[:-1], f"{f.rps:,.0f}", f"{ratio:.1f}x", f"{rps_ratio:.0%}", _ms(f)[-1])


def _step_cells(s: Stage) -> tuple[str, ...]:
    return (s.name, *_ms(s.figures))


def _ms(f: Figures) -> tuple[str, ...]:
    """Calls, latencies, then the full collections."""
    gcs = f"{f.full_gcs}" + (f" (max {f.full_gc_max_ms:.0f} ms)" if f.full_gcs else "")
    return (f"{f.calls:,}", *(_short(value) for value in (f.p50_ms, f.p90_ms, f.p99_ms, f.max_ms)), gcs)


def _short(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = [tuple(headers), *rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    lines = ["  ".join(_aligned(i, text, widths[i]) for i, text in enumerate(line)) for line in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _aligned(column: int, text: str, width: int) -> str:
    return text.ljust(width) if column == 0 else text.rjust(width)


def embedding_section(cost: EmbeddingCost) -> str:
    f = cost.figures
    return "\n".join(
        [
            f"== query embedding: {cost.model_id} (the default embedder; not in the search figures) ==",
            f"{f.calls} short questions, one per call: p50 {f.p50_ms:.2f} ms, p90 {f.p90_ms:.2f} ms, "
            f"p99 {f.p99_ms:.2f} ms, max {f.max_ms:.2f} ms (model load {cost.load_seconds:.1f} s)",
        ]
    )


def digest_section(run: DigestRun) -> str:
    rest = run.seconds - run.summarize_seconds - run.embed_seconds
    rate = f"{run.seconds:.1f} s, {run.episodes_per_second:.1f} episodes/s, {run.ms_per_episode:.0f} ms each"
    per_text = run.embed_seconds * 1000 / run.texts_embedded if run.texts_embedded else 0.0
    return "\n".join(
        [
            f"== digest throughput: {run.summarizer} summarizer + {run.embedder} ==",
            f"{run.episodes} episodes x {run.messages_per_episode} messages (~150 chars): {rate}",
            f"  summarize {run.summarize_seconds:.1f} s; embed {run.embed_seconds:.1f} s "
            f"({run.texts_embedded} texts, {per_text:.1f} ms each); SQL and the rest {rest:.1f} s",
            f"  (not counted: model load {run.load_seconds:.1f} s, "
            f"writing the episodes {run.fill_seconds:.1f} s)",
        ]
    )


def target_line(sizes: Sequence[SizeReport]) -> str:
    """The issue's target, judged at 1M (or, said so, at the largest size measured)."""
    if not sizes:
        return "target: no corpus size measured"
    judged = max(sizes, key=lambda r: r.episodes)
    where = f"{judged.episodes:,}" + ("" if judged.episodes >= TARGET_SIZE else " (1M not measured)")
    verdicts = [
        f"{mode} {f.p99_ms:.2f} ms {'met' if f.p99_ms <= TARGET_P99_MS else 'MISSED'}"
        for mode, f in judged.searches.items()
    ]
    embed = next((s.figures for s in judged.stages if s.name.startswith("embed query")), None)
    note = f" (figures include the hashing query embedding, p99 {embed.p99_ms:.3f} ms)" if embed else ""
    return f"target SearchEpisodes p99 <= {TARGET_P99_MS:g} ms at {where}: {'; '.join(verdicts)}{note}"


def reproduce(options: Options) -> str:
    command = [
        "episodic-lab bench-recall",
        f"--sizes {','.join(map(str, options.sizes))}",
        f"--calls {options.calls}",
        f"--digest-episodes {options.digest_episodes}",
        f"--embed-queries {options.embed_queries}",
        f"--max-seconds {options.max_seconds:g}",
        f"--seed {options.seed}",
    ]
    return "\n".join(
        [
            "reproduce: " + " ".join(command) + " [--json PATH]",
            "  without the console script: python -m episodic_lab bench-recall " + " ".join(command[1:]),
            "  the index kernel alone: python -m episodic_lab.bench_index --dim 256 --batch 100",
            "  the smoke test: pytest tests/integration/test_bench_recall_smoke.py",
        ]
    )


def to_json(
    machine: dict[str, str],
    options: Options,
    sizes: Sequence[SizeReport],
    embedding: EmbeddingCost | None,
    digest: DigestRun | None,
) -> str:
    document: dict[str, Any] = {
        "machine": machine,
        "options": dataclasses.asdict(options),
        "sizes": [_size_json(r) for r in sizes],
        "query_embedding": dataclasses.asdict(embedding) if embedding else None,
        "digest": _digest_json(digest) if digest else None,
    }
    return json.dumps(_finite(document), indent=2) + "\n"


def _size_json(r: SizeReport) -> dict[str, Any]:
    document = dataclasses.asdict(r)
    document["echo"]["rps"] = r.echo.rps
    for mode, figures in r.searches.items():
        document["searches"][mode]["rps"] = figures.rps
    return document


def _digest_json(run: DigestRun) -> dict[str, Any]:
    return {
        **dataclasses.asdict(run),
        "episodes_per_second": run.episodes_per_second,
        "ms_per_episode": run.ms_per_episode,
    }


def _finite(value: Any) -> Any:
    """NaN as null: strict JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value
