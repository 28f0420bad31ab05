"""Facts about where the figures were taken, printed with them: without the core count
and versions, a throughput number cannot be compared with another run's."""

from __future__ import annotations

import os
import platform
import sqlite3
from importlib import metadata
from pathlib import Path


def machine_facts() -> dict[str, str]:
    return {
        "cores": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "grpcio": metadata.version("grpcio"),
        "sqlite": sqlite3.sqlite_version,
        # Other work on the machine skews every figure; a high load here says so.
        "load average at start": f"{os.getloadavg()[0]:.2f}",
    }


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    names = (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    return next(names, platform.processor() or "unknown")
