"""Everything one report run found, section by section, in the order they ran: what the
Markdown and the plots are drawn from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from episodic_lab.bench_recall.digest import DigestRun
from episodic_lab.report.history import History
from episodic_lab.report.memory import RssCurve
from episodic_lab.report.options import Options
from episodic_lab.report.search import SearchBySize
from episodic_lab.report.sections import Section
from episodic_lab.report.throughput import Cell


@dataclass(frozen=True, slots=True)
class BackendResults:
    backend: str
    database: str  # "SQLite 3.40.1", or why the database could not be reached
    throughput: Section[list[Cell]]
    history: Section[History]
    rss: Section[RssCurve]


@dataclass(frozen=True, slots=True)
class Results:
    options: Options
    command: str
    machine: dict[str, str]
    server_code: str
    started: str  # UTC, ISO 8601
    seconds: float
    backends: tuple[BackendResults, ...]
    search: Section[SearchBySize]
    digest: Section[DigestRun]

    def sections(self) -> list[Section[Any]]:
        per_backend = [s for b in self.backends for s in (b.throughput, b.history, b.rss)]
        return [*per_backend, self.search, self.digest]

    @property
    def failed(self) -> bool:
        return any(section.error for section in self.sections())
