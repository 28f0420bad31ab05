"""What one backend's soak found, and the verdict: it passes only with no failed call, RSS
bounded after the warm-up, every acknowledged append stored, and the server SERVING."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from episodic_lab.bench.report import Figures
from episodic_lab.soak.checks import StoredCheck
from episodic_lab.soak.load import LoadRun
from episodic_lab.soak.rss import RssFigures

SUMMARIZED = "COMPACTION_SUMMARIZED"


@dataclass(frozen=True, slots=True)
class LoadFigures:
    build: Figures
    append: Figures
    errors: dict[str, int]  # "method STATUS" -> failed calls
    first_errors: dict[str, str]  # the same keys -> the first failure's detail
    compactions: dict[str, int]  # report.compaction name -> BuildContext reports
    server_cpu_seconds: float  # user+sys over the load
    rss: RssFigures

    @classmethod
    def of(cls, run: LoadRun, rss: RssFigures) -> LoadFigures:
        # Both kinds of call share the server's CPU: it is shown in total, not per call.
        build, append = Figures.of(run.builds, math.nan), Figures.of(run.appends, math.nan)
        tally = run.tally
        counts = (dict(tally.errors), dict(tally.first_errors), dict(tally.compactions))
        return cls(build, append, *counts, run.server_cpu_seconds, rss)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def summarized(self) -> int:
        return self.compactions.get(SUMMARIZED, 0)


@dataclass(frozen=True, slots=True)
class SoakResult:
    backend: str
    database: str = ""  # e.g. "SQLite 3.46.1"
    server_command: tuple[str, ...] = ()
    load: LoadFigures | None = None
    stored: StoredCheck | None = None
    healthy: bool = False  # SERVING after the load
    server_log: dict[str, int] = field(default_factory=dict)  # WARNING and worse -> times
    not_run: str = ""  # why the soak could not run; empty when it ran

    @property
    def failures(self) -> list[str]:
        if self.not_run or self.load is None or self.stored is None:
            return [f"not run: {self.not_run or 'no load'}"]
        found = _load_failures(self.load)
        found += [] if self.stored.passed else ["stored messages differ from the acknowledged ones"]
        return found + ([] if self.healthy else ["the server is not SERVING after the load"])

    @property
    def passed(self) -> bool:
        return not self.failures


def _load_failures(load: LoadFigures) -> list[str]:
    found = [f"{load.error_count:,} failed calls"] if load.error_count else []
    found += [] if load.build.calls else ["no BuildContext call completed"]
    found += [] if load.append.calls else ["no append completed"]
    rss = load.rss
    bounded = f"RSS grew {rss.growth_pct:.1f}% after the warm-up (limit {rss.limit_pct:g}%)"
    return found + ([] if rss.bounded else [bounded])
