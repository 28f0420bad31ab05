"""The server's resident memory (VmRSS) over the soak: before and after the conversations
are written, then sampled through the load. Bounded means: after the warm-up, the peak
stays within a set share of the RSS at the end of the warm-up."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from episodic_lab.bench_context.server import rss_mib


@dataclass(frozen=True, slots=True)
class Sample:
    elapsed: float  # seconds into the load
    rss_mib: float


@dataclass(slots=True)
class RssTrace:
    pid: int
    samples: list[Sample] = field(default_factory=list)

    def sample(self, elapsed: float) -> Sample:
        self.samples.append(Sample(elapsed, rss_mib(self.pid)))
        return self.samples[-1]


@dataclass(frozen=True, slots=True)
class RssFigures:
    start_mib: float  # serving, before the conversations were written
    setup_mib: float  # conversations written, before the load
    warm_mib: float  # the first sample at or after the warm-up
    max_mib: float  # over the whole load
    peak_after_warmup_mib: float
    end_mib: float  # when the load ended
    limit_pct: float

    @property
    def growth_mib(self) -> float:
        return self.peak_after_warmup_mib - self.warm_mib

    @property
    def growth_pct(self) -> float:
        return self.growth_mib / self.warm_mib * 100 if self.warm_mib else math.nan

    @property
    def bounded(self) -> bool:
        return self.growth_pct <= self.limit_pct


def rss_figures(trace: RssTrace, before: tuple[float, float], warmup: float, limit_pct: float) -> RssFigures:
    """`before`: RSS at start and after the setup; the trace holds the load's samples."""
    samples = trace.samples or [Sample(0.0, math.nan)]
    warm = next((s for s in samples if s.elapsed >= warmup), samples[-1])
    after_warmup = [s.rss_mib for s in samples if s.elapsed >= warm.elapsed]
    peaks = (max(s.rss_mib for s in samples), max(after_warmup))
    return RssFigures(*before, warm.rss_mib, *peaks, samples[-1].rss_mib, limit_pct)
