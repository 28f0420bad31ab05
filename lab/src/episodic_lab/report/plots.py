"""The report's PNG plots, one per section that has a curve or bars, drawn on matplotlib's
Agg canvas (files only: no display, and no pyplot state shared with anything else). Each
function writes its file and returns its name."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, LogLocator

from episodic_lab.report.history import History
from episodic_lab.report.memory import RssCurve
from episodic_lab.report.search import SearchBySize
from episodic_lab.report.throughput import Cell

DPI = 120


def throughput_plot(path: Path, cells: Sequence[Cell]) -> str:
    """Grouped bars: per RPC, its share of Echo at each level of calls in flight."""
    rpcs = list(dict.fromkeys(cell.rpc for cell in cells))
    levels = sorted({cell.in_flight for cell in cells})
    figure, axes = _figure(9, 4.8)
    width = 0.8 / len(levels)
    for offset, level in enumerate(levels):
        shares = {cell.rpc: cell.ratio * 100 for cell in cells if cell.in_flight == level}
        xs = [i + (offset - (len(levels) - 1) / 2) * width for i in range(len(rpcs))]
        bars = axes.bar(xs, [shares.get(rpc, 0.0) for rpc in rpcs], width, label=f"{level} in flight")
        axes.bar_label(bars, fmt="%.0f%%", fontsize=8)
    axes.set_xticks(range(len(rpcs)), [rpc.replace(" ", "\n", 1) for rpc in rpcs], fontsize=8)
    axes.set_ylabel("calls/s as % of Echo's (same server, same run)")
    axes.set_title("Throughput as a share of Echo")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend()
    return _save(figure, path)


def history_plot(path: Path, found: History) -> str:
    lengths = [row.messages for row in found.rows]
    figure, axes = _figure(7.5, 4.8)
    axes.plot(lengths, [row.warm.p50_ms for row in found.rows], "o-", label="warm p50")
    axes.plot(lengths, [row.warm.p99_ms for row in found.rows], "s--", label="warm p99")
    cold_compacted = [statistics.median(c.ms for c in row.cold_compacted) for row in found.rows]
    cold_never = [statistics.median(c.ms for c in row.cold_never) for row in found.rows]
    fresh = f"median of {found.trials} fresh processes" if found.trials > 1 else "a fresh process"
    axes.plot(lengths, cold_compacted, "^:", label=f"cold, compacted before ({fresh})")
    axes.plot(lengths, cold_never, "v:", label=f"cold, never compacted ({fresh})")
    imported = found.imported
    axes.plot([imported.messages], [imported.cold.ms], "X", markersize=10, label="cold, imported log")
    _log_axes(axes, [*lengths, imported.messages])
    axes.set_xlabel("messages in the conversation's log")
    axes.set_ylabel("BuildContext latency, ms (HYBRID, MiniLM, 1 in flight)")
    axes.set_title("BuildContext latency vs history length")
    axes.legend(fontsize=8)
    return _save(figure, path)


def search_plot(path: Path, found: SearchBySize) -> str:
    sizes = [size.episodes for size in found.sizes]
    figure, axes = _figure(7.5, 4.8)
    modes = list(found.sizes[0].searches)
    for mode in modes:
        (line,) = axes.plot(sizes, [s.searches[mode].p50_ms for s in found.sizes], "o-", label=f"{mode} p50")
        axes.plot(
            sizes, [s.searches[mode].p99_ms for s in found.sizes], "--", color=line.get_color(), alpha=0.6
        )
    axes.plot(sizes, [s.echo.p50_ms for s in found.sizes], "o-", color="grey", label="Echo p50")
    embedding = found.embedding.figures.p50_ms
    axes.axhline(
        embedding, color="black", linestyle=":", label=f"MiniLM query embedding p50 ({embedding:.1f} ms)"
    )
    _log_axes(axes, sizes)
    axes.set_xlabel("episodes in the corpus")
    axes.set_ylabel("SearchEpisodes latency, ms (p50 solid, p99 dashed)")
    axes.set_title("SearchEpisodes latency vs corpus size (hashing query embedder)")
    axes.legend(fontsize=8)
    return _save(figure, path)


def rss_plot(path: Path, curve: RssCurve) -> str:
    figure, axes = _figure(7, 4.5)
    axes.plot([n for n, _ in curve.points], [mib for _, mib in curve.points], "o-")
    axes.set_xlabel(f"active conversations ({curve.messages_each} messages each)")
    axes.set_ylabel("server VmRSS, MiB")
    axes.set_title("Server RSS vs active conversations")
    axes.grid(True, alpha=0.3)
    return _save(figure, path)


def _log_axes(axes: Axes, ticks: Sequence[int]) -> None:
    """Both axes logarithmic: x ticked at the measured sizes, y at 1-2-5 steps written plainly
    (latencies often span less than a decade, where plain powers of ten would show none)."""
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.minorticks_off()
    shown = sorted(set(ticks))
    axes.set_xticks(shown, [f"{tick:,}" for tick in shown])
    axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    axes.grid(True, which="both", alpha=0.3)


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)  # attaches itself: savefig renders with Agg
    return figure, figure.subplots()


def _save(figure: Figure, path: Path) -> str:
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    return path.name
