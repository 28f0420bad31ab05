"""The load: BuildContext streams and AddMessage workers, two closed loops at once over the
same open conversations, so that working sets are read while their logs grow and get
compacted. Every outcome is tallied: calls, compactions reported, errors by status code,
and the appends each conversation acknowledged."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from episodic_client import EpisodicClientError
from episodic_client.v1 import context_pb2
from episodic_lab.bench.load import Call, LoadResult, closed_loop
from episodic_lab.bench.server_process import cpu_seconds
from episodic_lab.bench_context.client import Client
from episodic_lab.bench_context.conversations import chat
from episodic_lab.soak.options import Options
from episodic_lab.soak.rss import RssTrace, Sample

BUILD = "BuildContext"
APPEND = "AddMessage"
SHARED_CALL_SHARE = 0.125  # of a stream's calls, those that go to a random conversation
MESSAGE_POOL = 500  # distinct turns the appenders cycle through
SEED = 20_240_601
SAMPLE_SECONDS = 0.5  # RSS is read this often; a line is printed every --report-every


@dataclass(slots=True)
class Tally:
    builds: int = 0
    compactions: Counter[str] = field(default_factory=Counter)  # e.g. "COMPACTION_SUMMARIZED" -> reports
    appended: Counter[str] = field(default_factory=Counter)  # episode_id -> acknowledged appends
    errors: Counter[str] = field(default_factory=Counter)  # e.g. "AddMessage UNAVAILABLE" -> calls
    first_errors: dict[str, str] = field(default_factory=dict)  # the same keys -> the first one's detail

    @property
    def appends(self) -> int:
        return sum(self.appended.values())

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def built(self, report: context_pb2.ContextReport) -> None:
        self.builds += 1
        self.compactions[context_pb2.Compaction.Name(report.compaction)] += 1

    def failed(self, method: str, exc: Exception) -> None:
        key = f"{method} {_status(exc)}"
        self.errors[key] += 1
        self.first_errors.setdefault(key, _detail(exc))


def _status(exc: Exception) -> str:
    return exc.code.name if isinstance(exc, EpisodicClientError) else type(exc).__name__


def _detail(exc: Exception) -> str:
    return exc.message if isinstance(exc, EpisodicClientError) else str(exc)[:300]


@dataclass(frozen=True, slots=True)
class LoadRun:
    builds: LoadResult
    appends: LoadResult
    tally: Tally
    rss: RssTrace
    server_cpu_seconds: float


async def run_load(
    client: Client, conversations: Sequence[str], server_pid: int, options: Options
) -> LoadRun:
    """Both loops for options.seconds, the server's RSS sampled meanwhile."""
    tally, rng, trace = Tally(), random.Random(SEED), RssTrace(server_pid)
    calls = (build_call(client, conversations, tally, rng), append_call(client, conversations, tally, rng))
    cpu_before, began = cpu_seconds(server_pid), time.perf_counter()
    sampler = asyncio.create_task(watch(trace, tally, began, options.report_every))
    builds, appends = await asyncio.gather(
        closed_loop(calls[0], options.streams, options.seconds),
        closed_loop(calls[1], options.appenders, options.seconds),
    )
    sampler.cancel()
    with suppress(asyncio.CancelledError):
        await sampler
    print(progress_line(trace.sample(time.perf_counter() - began), tally), "(end)", flush=True)
    return LoadRun(builds, appends, tally, trace, cpu_seconds(server_pid) - cpu_before)


async def watch(trace: RssTrace, tally: Tally, began: float, report_every: float) -> None:
    """Samples RSS until cancelled; prints a progress line every `report_every` seconds."""
    next_line = report_every
    while True:
        await asyncio.sleep(SAMPLE_SECONDS)
        sample = trace.sample(time.perf_counter() - began)
        if sample.elapsed >= next_line:
            print(progress_line(sample, tally), flush=True)
            next_line += report_every


def progress_line(sample: Sample, tally: Tally) -> str:
    return (
        f"{sample.elapsed:6.1f} s  BuildContext {tally.builds:>8,}  appends {tally.appends:>8,}  "
        f"errors {tally.error_count:>4,}  server RSS {sample.rss_mib:7.1f} MiB"
    )


def build_call(client: Client, conversations: Sequence[str], tally: Tally, rng: random.Random) -> Call:
    """Stream i renders conversation i (mod the count), now and then another one."""

    async def call(worker: int) -> None:
        shared = rng.random() < SHARED_CALL_SHARE
        episode_id = rng.choice(conversations) if shared else conversations[worker % len(conversations)]
        tally.built(await client.build(episode_id))

    return _counted(BUILD, tally, call)


def append_call(client: Client, conversations: Sequence[str], tally: Tally, rng: random.Random) -> Call:
    """One chat turn to a random conversation; acknowledged only once the server answered."""
    pool = chat(MESSAGE_POOL, seed=SEED)

    async def call(_worker: int) -> None:
        episode_id = rng.choice(conversations)
        message = pool[rng.randrange(len(pool))]
        await client.append(episode_id, message)
        tally.appended[episode_id] += 1

    return _counted(APPEND, tally, call)


def _counted(method: str, tally: Tally, call: Call) -> Call:
    async def counted(worker: int) -> None:
        try:
            await call(worker)
        except Exception as exc:
            tally.failed(method, exc)
            raise  # closed_loop counts it too, and the worker goes on

    return counted
