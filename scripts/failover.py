"""Measures losing the database primary: a primary + synchronous standby pair of throwaway
local clusters, two `episodic serve` replicas on the libpq multi-host URL, writers under
load through one, the primary SIGKILLed, the standby promoted once the service noticed.
Prints what the clients saw: writes acknowledged and lost, the codes of failed calls, the
seconds until the first write on the new primary, health over time, the feed tail on the
other replica, the cluster jobs.

    .venv/bin/python scripts/failover.py        # promoted as soon as the service noticed
    .venv/bin/python scripts/failover.py 3      # promoted 3 s later (a failover manager's delay)
    .venv/bin/python scripts/failover.py 0 3000 # 3,000 writes acknowledged before the kill

Needs the PostgreSQL server binaries (/usr/lib/postgresql/*/bin); as root they run as the
`postgres` user. The shared cluster on 5432 is never touched."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.failover import WRITES_BEFORE, measure_failover


async def main(promote_after: float, writes_before: int) -> None:
    with tempfile.TemporaryDirectory(prefix="episodic-failover-") as workdir:
        figures = await measure_failover(Path(workdir), promote_after, writes_before)
    print("\n".join(figures.lines()))
    for problem in figures.problems:
        print(f"  ERROR logged: {problem}")


if __name__ == "__main__":
    promote_after = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    writes_before = int(sys.argv[2]) if len(sys.argv) > 2 else WRITES_BEFORE
    asyncio.run(main(promote_after, writes_before))
