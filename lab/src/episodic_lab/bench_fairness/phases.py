"""One phase: tenant B's calls, Echo, Health/Check and the server's RSS for --seconds,
alone (the baseline) or while tenant A's process runs one abuse."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from episodic_lab.bench.server_process import cpu_seconds
from episodic_lab.bench_fairness.attack import GO
from episodic_lab.bench_fairness.plan import Plan, Tally
from episodic_lab.bench_fairness.probes import Health, Latencies, Rss, poll_health, sample_rss, steady
from episodic_lab.bench_fairness.victim import ECHO, METHODS, Victim

BASELINE = "alone"
START_TIMEOUT_SECONDS = 120.0  # the attacker's imports and connections (1,100 sockets take a while)
END_GRACE_SECONDS = 60.0  # past the phase, for the attacker to stop and report
SETTLE_SECONDS = 2.0  # between phases: what an abuse left behind drains before the next


@dataclass(frozen=True, slots=True)
class PhaseResult:
    name: str
    b: Latencies
    health: Health
    rss: Rss
    server_cpu_seconds: float
    a: Tally | None = None  # None for the baseline


@dataclass(frozen=True, slots=True)
class Phases:
    victim: Victim
    plan: Plan  # every abuse's plan but its name
    server_pid: int
    b_rate: float
    workdir: Path

    async def warm_up(self) -> None:
        await self._measure(min(self.plan.seconds, 3.0))

    async def baseline(self) -> PhaseResult:
        return PhaseResult(BASELINE, *await self._measure(self.plan.seconds))

    async def abuse(self, name: str) -> PhaseResult:
        plan = dataclasses.replace(self.plan, abuse=name)
        log = (self.workdir / f"attack-{name}.log").open("wb")
        attacker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "episodic_lab.bench_fairness.attack",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
        )  # fmt: skip
        try:
            return await self._against(name, plan, attacker)
        finally:
            if attacker.returncode is None:
                attacker.kill()
                await attacker.wait()
            log.close()
            await asyncio.sleep(SETTLE_SECONDS)

    async def _against(self, name: str, plan: Plan, attacker: asyncio.subprocess.Process) -> PhaseResult:
        assert attacker.stdin is not None and attacker.stdout is not None
        attacker.stdin.write(plan.to_json().encode())
        attacker.stdin.close()
        line = await asyncio.wait_for(attacker.stdout.readline(), START_TIMEOUT_SECONDS)
        if line.decode().strip() != GO:
            return PhaseResult(name, *await self._measure(0.0), a=self._failed(name, line))
        measured = await self._measure(plan.seconds)
        try:
            report = await asyncio.wait_for(attacker.stdout.readline(), END_GRACE_SECONDS)
            tally = Tally.from_json(report.decode())
        except (TimeoutError, ValueError):
            tally = self._failed(name, b"no tally")
        return PhaseResult(name, *measured, a=tally)

    async def _measure(self, seconds: float) -> tuple[Latencies, Health, Rss, float]:
        calls, cpu_before = self.victim.calls(), cpu_seconds(self.server_pid)
        b, echo, health, rss = await asyncio.gather(
            steady(calls, METHODS, self.b_rate, seconds),
            steady(calls, (ECHO,), self.b_rate / len(METHODS), seconds),
            poll_health(self.plan.target, seconds),
            sample_rss(self.server_pid, seconds),
        )
        b.seconds.update(echo.seconds)
        b.errors.update(echo.errors)
        b.first_error = b.first_error or echo.first_error
        return b, health, rss, cpu_seconds(self.server_pid) - cpu_before

    def _failed(self, name: str, line: bytes) -> Tally:
        tail = (self.workdir / f"attack-{name}.log").read_text(errors="replace")[-500:]
        tally = Tally()
        tally.error(f"attacker did not run ({line.decode(errors='replace').strip()}): {tail}")
        return tally
