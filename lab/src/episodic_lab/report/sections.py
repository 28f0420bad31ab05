"""One section of the report run as a unit: its wall time, the 1-minute load average before
and after it (other work on the machine skews every figure; the load says how much), and
its result, or why it failed. A failing section is reported and the next one still runs."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from episodic_lab.bench_context import progress

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Section(Generic[T]):
    name: str
    seconds: float
    load_before: float
    load_after: float
    result: T | None
    error: str = ""  # the failure, when result is None


async def run_section(name: str, work: Callable[[], Awaitable[T]]) -> Section[T]:
    progress(f"== {name}")
    load_before, began = os.getloadavg()[0], time.perf_counter()
    try:
        result: T | None = await work()
        error = ""
    except Exception as exc:  # any failure of the server or a bench: shown in the report, not fatal
        result, error = None, f"{type(exc).__name__}: {exc}"[:500]
        progress(f"{name} failed:\n{traceback.format_exc()}")
    seconds = time.perf_counter() - began
    progress(f"   {name}: {seconds:.0f} s")
    return Section(name, seconds, load_before, os.getloadavg()[0], result, error)
