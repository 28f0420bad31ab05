"""The latency plot (--plot): warm p50 and p99 of BuildContext against the length of the
log, one pair of lines per backend, and the cold first calls as points. matplotlib is a
dev extra, imported only here and only when a plot is drawn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from episodic_lab.bench_context.report import BackendReport


def write_plot(path: str, reports: Sequence[BackendReport]) -> str:
    """Draws the plot; returns the line that says where it went, or why it did not."""
    measured = [report for report in reports if len(report.history) > 0]
    if not measured:
        return "plot: no history length was measured"
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        from matplotlib import pyplot
    except ImportError:
        return "plot: skipped, matplotlib is not installed (pip install 'episodic[dev]' or matplotlib)"
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for report in measured:
        _draw(axes, report)
    _label(axes, sorted({row.messages for report in measured for row in report.history}))
    figure.savefig(path, dpi=120, bbox_inches="tight")
    pyplot.close(figure)
    return f"plot: {path}"


def _draw(axes: Any, report: BackendReport) -> None:
    lengths = [row.messages for row in report.history]
    axes.plot(lengths, [row.warm.p50_ms for row in report.history], "o-", label=f"{report.backend} p50")
    axes.plot(lengths, [row.warm.p99_ms for row in report.history], "s--", label=f"{report.backend} p99")
    axes.plot(
        lengths, [row.cold.ms for row in report.history], "x", label=f"{report.backend} cold (first call)"
    )


def _label(axes: Any, lengths: list[int]) -> None:
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.minorticks_off()
    axes.set_xticks(lengths, [f"{length:,}" for length in lengths])
    axes.set_xlabel("messages in the conversation's log")
    axes.set_ylabel("BuildContext latency, ms (1 in flight)")
    axes.set_title("BuildContext latency vs history length")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
