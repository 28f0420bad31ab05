"""Times a fresh start: `episodic serve --insecure-dev --migrate-on-start` on port 0, each run
in a new temporary directory (so a new SQLite file), from launching the process until its
health service answers SERVING; and counts the lines it printed (stdout and stderr) before
its "serving" log line, which names the port the health checks then poll.

Every run shares one cache home (HOME and XDG_CACHE_HOME point at it), new and empty unless
--cache-home names one: the first run starts cold (it derives the int8 model and caches it,
and compiles the modules into the cache home's pycache, as an installed package has them),
the others warm. Prints each run, then the cold run and the median of the warm ones.

    .venv/bin/python scripts/time_start.py [--runs 6] [--cache-home DIR] [--restart] [--no-bytecode]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

EPISODIC = Path(sys.executable).parent / "episodic"
START_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class Start:
    seconds: float
    lines_before_serving: int
    output: list[str]


def serving_port(line: str) -> int | None:
    """The port of the "serving" log line (JSON, since our stderr is a pipe), else None."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if isinstance(entry, dict) and entry.get("message") == "serving" and isinstance(entry.get("port"), int):
        return int(entry["port"])
    return None


def is_serving(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2.0)
        except grpc.RpcError:
            return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def one_start(cache_home: Path, *, bytecode: bool = True, database: Path | None = None) -> Start:
    """One start in a new directory, on a new SQLite file there unless `database` names one
    (a restart: the schema is there, only checked)."""
    with tempfile.TemporaryDirectory(prefix="episodic-start-") as workdir:
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("EPISODIC_") and name != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(
            HOME=str(cache_home),
            XDG_CACHE_HOME=str(cache_home / ".cache"),
            # compiled modules kept with the cache, as an installed package keeps its .pyc
            # files: the first run compiles them, the others load them (unless --no-bytecode)
            PYTHONPYCACHEPREFIX=str(cache_home / ".cache" / "pycache"),
            EPISODIC_DATABASE_URL=f"sqlite:///{database or Path(workdir) / 'episodic.db'}",
        )
        if not bytecode:  # neither written nor read from the cache home
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            del env["PYTHONPYCACHEPREFIX"]
        command = [str(EPISODIC), "serve", "--insecure-dev", "--migrate-on-start", "--address", "127.0.0.1:0"]
        started = time.perf_counter()
        process = subprocess.Popen(  # our own entry point, fixed arguments
            command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        lines: queue.Queue[str | None] = queue.Queue()
        assert process.stdout is not None
        reader = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
        reader.start()
        output: list[str] = []
        try:
            port = _wait_for_port(lines, output, started)
            while not is_serving(port):
                if time.perf_counter() - started > START_TIMEOUT_SECONDS:
                    raise SystemExit(f"not SERVING after {START_TIMEOUT_SECONDS} s:\n" + "".join(output))
                time.sleep(0.01)
            seconds = time.perf_counter() - started
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            reader.join(timeout=5)
        return Start(seconds, len(output) - 1, output)


def _pump(stream: object, lines: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put(None)


def _wait_for_port(lines: queue.Queue[str | None], output: list[str], started: float) -> int:
    while True:
        remaining = START_TIMEOUT_SECONDS - (time.perf_counter() - started)
        try:
            line = lines.get(timeout=max(remaining, 0.01))
        except queue.Empty:
            raise SystemExit("no 'serving' line in time:\n" + "".join(output)) from None
        if line is None:
            raise SystemExit("the server exited before serving:\n" + "".join(output))
        output.append(line)
        port = serving_port(line)
        if port is not None:
            return port


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=6, help="starts in all (the first is cold); default 6")
    parser.add_argument("--cache-home", type=Path, help="HOME for the server (default: a new, empty one)")
    parser.add_argument("--show-output", action="store_true", help="print what the first run printed")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="no compiled modules of ours (PYTHONDONTWRITEBYTECODE, no pycache): every run compiles them",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="the warm runs restart on one database the first run made (its schema only checked), "
        "instead of each making a new one",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="episodic-cache-home-") as fresh:
        cache_home = args.cache_home or Path(fresh)
        starts = []
        database = Path(fresh) / "restarted.db" if args.restart else None
        for run in range(args.runs):
            start = one_start(cache_home, bytecode=not args.no_bytecode, database=database)
            starts.append(start)
            lines = start.lines_before_serving
            print(f"run {run + 1}: {start.seconds:.2f} s to SERVING, {lines} lines before serving")
            if args.show_output and run == 0:
                print("".join(start.output), end="")
    cold, warm = starts[0], starts[1:]
    print(f"cold: {cold.seconds:.2f} s, {cold.lines_before_serving} lines before serving")
    if warm:
        median = statistics.median(s.seconds for s in warm)
        counts = "/".join(str(n) for n in sorted({s.lines_before_serving for s in warm}))
        print(f"warm: median {median:.2f} s over {len(warm)} runs, {counts} lines before serving")


if __name__ == "__main__":
    main()
