"""The whole report.md: a header (the command, when, the machine, the server code measured,
the load average and wall time of each section), then each section in the order it ran."""

from __future__ import annotations

from collections.abc import Mapping

from episodic_lab.report.markdown import duration, table
from episodic_lab.report.results import Results
from episodic_lab.report.served import shown_command
from episodic_lab.report.tables import (
    digest_lines,
    history_lines,
    rss_lines,
    search_lines,
    section_lines,
    throughput_lines,
)

NOT_MACHINE_FACTS = ("load average at start",)  # the table of sections has it, and more


def document(results: Results, plots: Mapping[str, str]) -> str:
    """`plots`: section name -> the PNG's file name, beside report.md."""
    preset = results.options.preset
    lines = [*_header(results), *_load_lines(results)]
    for found in results.backends:
        t, h, r = found.throughput, found.history, found.rss
        lines += section_lines(t.name, t, plots.get(t.name), lambda cells: throughput_lines(cells, preset))
        lines += section_lines(h.name, h, plots.get(h.name), lambda history: history_lines(history, preset))
        lines += section_lines(r.name, r, plots.get(r.name), rss_lines)
    s, d = results.search, results.digest
    lines += section_lines(s.name, s, plots.get(s.name), search_lines)
    lines += section_lines(d.name, d, plots.get(d.name), digest_lines)
    return "\n".join(lines).rstrip() + "\n"


def _header(results: Results) -> list[str]:
    facts = [
        ("server code (git)", f"`{results.server_code}`"),
        ("server command", f"`{shown_command()}`"),
        ("databases", "; ".join(f"{b.backend}: {b.database}" for b in results.backends)),
        *((key, value) for key, value in results.machine.items() if key not in NOT_MACHINE_FACTS),
    ]
    return [
        f"# Episodic performance report: size {results.options.preset.name}",
        "",
        f"`{results.command}`, started {results.started} UTC, wall time {duration(results.seconds)}.",
        "",
        table(("fact", "value"), facts, names=2),
        "",
        "The server runs as a subprocess; the load generator (this process) shares the same cores with "
        "it and with whatever else runs on the machine. The load average around each section says how "
        "busy the machine was: compare shares of Echo and the shapes of curves across machines, not "
        "absolute rates.",
        "",
    ]


def _load_lines(results: Results) -> list[str]:
    rows = [
        (
            s.name,
            duration(s.seconds),
            f"{s.load_before:.2f}",
            f"{s.load_after:.2f}",
            "failed" if s.error else "ok",
        )
        for s in results.sections()
    ]
    headers = ("section", "wall time", "1-min load before", "1-min load after", "result")
    return ["### Sections: wall time and load average", "", table(headers, rows), ""]
