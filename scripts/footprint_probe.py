"""footprint.py's part 1 with a probe in the server: where RSS goes beyond the objects.

    .venv/bin/python scripts/footprint_probe.py [--trim] [--census] -- <footprint.py's arguments>
    MALLOC_ARENA_MAX=1 .venv/bin/python scripts/footprint_probe.py -- --conversations 100,200 ...

Before each RSS sample the server (`sitecustomize`, on PYTHONPATH from a temporary directory:
nothing in the product) is sent SIGUSR1 and records, after a gc: its RSS and anonymous
memory (smaps_rollup); glibc's mallinfo2 (bytes malloc holds from the system, in use, free
inside its heaps, free chunks); Python's allocated blocks; `--trim`: then calls
malloc_trim(0), so footprint.py's table shows RSS after it; `--census`: the shallow bytes
of every Python object reachable from the gc's, by type (str, bytes, ndarray data
included): the live objects, to set beside what malloc holds.
A table per point follows footprint.py's: marginal KiB per conversation of each figure.

What it showed (issue 47 item 4; hashing embedder, the seed's sizing, 2 turns; ±8 KiB):
the live objects (census, 173.5 KiB per conversation at 100→200) are the breakdown walk's
172.3; RSS's 185-190 beyond them is the allocator's: malloc's free space inside its heaps
(~9-15 KiB per conversation from 500 on: ~15-20 more free chunks of ~1 KiB each, holes
below a page that malloc_trim(0) cannot return: it gave back ~3 MiB, whatever the count),
malloc's chunk headers (~2 KiB) and pymalloc's pools. Per heap (malloc_info): the tails'
texts sit in the 8 SQLite reader threads' arenas (~80 KiB per conversation between them),
the compacted logs in the main one (~91). MALLOC_ARENA_MAX=1 or 2 took a few KiB off the
free space's growth, within the noise of RSS (1,000→2,000: 184.7 against 187.3). The
readers' arenas' ~30% free space went once the working set held its own copy of each text
(domain/working_set.py `_own_text`: 500→1,000 from ~189 to ~180 KiB per conversation).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import footprint  # scripts/, on the path above

# Runs inside the server. Kept to the standard library; a failure is written down, never
# raised (an exception in a signal handler would surface in the server's event loop).
PROBE = '''
import collections, ctypes, gc, json, os, signal, sys, traceback

_OUT = os.environ["FOOTPRINT_PROBE_OUT"]
_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
           "uordblks", "fordblks", "keepcost")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _FIELDS]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _Mallinfo2


def _memory():
    found = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts[0] in ("Rss:", "Anonymous:"):
                found[parts[0][:-1]] = int(parts[1]) * 1024
    return found


def _census():
    """Shallow bytes by type of every object reachable from the gc's (each once)."""
    seen, size = set(), collections.Counter()
    stack = gc.get_objects()
    seen.add(id(seen)); seen.add(id(stack))
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        try:
            size[type(o).__qualname__] += sys.getsizeof(o)
        except Exception:
            pass
        stack.extend(gc.get_referents(o))  # untracked containers too (a tuple of str)
    return dict(size)


def _probe(signum, frame):
    try:
        gc.collect()
        info = _libc.mallinfo2()
        record = {"memory": _memory(), "malloc": {n: getattr(info, n) for n in _FIELDS},
                  "blocks": sys.getallocatedblocks()}
        if os.environ.get("FOOTPRINT_PROBE_CENSUS"):
            record["census"] = _census()
        if os.environ.get("FOOTPRINT_PROBE_TRIM"):
            _libc.malloc_trim(0)
            record["trimmed"] = _memory()
    except BaseException:
        record = {"error": traceback.format_exc()}
    with open(_OUT, "a") as f:
        f.write(json.dumps(record) + "\\n")


signal.signal(signal.SIGUSR1, _probe)
'''
WAIT_SECONDS = 600.0


class Probe:
    def __init__(self, directory: Path) -> None:
        self.out = directory / "probe.jsonl"
        (directory / "sitecustomize.py").write_text(PROBE)
        self.records: list[dict[str, Any]] = []

    async def sample(self, pid: int) -> None:
        """A record from the server, then footprint.py reads its RSS."""
        os.kill(pid, signal.SIGUSR1)
        for _ in range(int(WAIT_SECONDS / 0.1)):
            await asyncio.sleep(0.1)
            lines = self.out.read_text().splitlines() if self.out.exists() else []
            if len(lines) > len(self.records):
                self.records.append(json.loads(lines[-1]))
                if "error" in self.records[-1]:
                    raise RuntimeError(self.records[-1]["error"])
                return
        raise RuntimeError("the server's probe did not answer")


def table(records: list[dict[str, Any]], counts: list[int]) -> str:
    """Marginal KiB per conversation between points (the first is 0 warmed)."""
    figures: dict[str, Callable[[dict[str, Any]], int]] = {
        "RSS": lambda r: r["memory"]["Rss"],
        "anonymous": lambda r: r["memory"]["Anonymous"],
        "malloc from the system (arena)": lambda r: r["malloc"]["arena"] + r["malloc"]["hblkhd"],
        "malloc in use (uordblks + hblkhd)": lambda r: r["malloc"]["uordblks"] + r["malloc"]["hblkhd"],
        "malloc free in its heaps (fordblks)": lambda r: r["malloc"]["fordblks"],
        "anonymous beside malloc (pymalloc, stacks)": lambda r: (
            r["memory"]["Anonymous"] - r["malloc"]["arena"] - r["malloc"]["hblkhd"]
        ),
    }
    if all("census" in r for r in records):
        figures["live Python objects (census)"] = lambda r: sum(r["census"].values())
    if all("trimmed" in r for r in records):
        figures["RSS after malloc_trim(0)"] = lambda r: r["trimmed"]["Rss"]
    spans = list(zip([0, *counts], counts, strict=False))
    head = " | ".join(f"{a:,}→{b:,}" for a, b in spans)
    lines = [
        "Marginal KiB per conversation, by what holds it (the server's probe):",
        f"| figure | {head} |",
        "|---|" + "---:|" * len(spans),
    ]
    for name, of in figures.items():
        cells = [(of(records[i + 1]) - of(records[i])) / (b - a) / 1024 for i, (a, b) in enumerate(spans)]
        lines.append(f"| {name} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    free_chunks = [
        records[i + 1]["malloc"]["ordblks"] - records[i]["malloc"]["ordblks"] for i in range(len(spans))
    ]
    lines.append("| malloc's free chunks, more per conversation | " + " | ".join(
        f"{n / (b - a):.1f}" for n, (a, b) in zip(free_chunks, spans, strict=True)) + " |")  # fmt: skip
    return "\n".join(lines)


async def run(args: argparse.Namespace, rest: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="footprint-probe-") as tmp:
        probe = Probe(Path(tmp))
        # the server's environment only: this process is already running
        os.environ["PYTHONPATH"] = os.pathsep.join([tmp, *filter(None, [os.environ.get("PYTHONPATH")])])
        os.environ["FOOTPRINT_PROBE_OUT"] = str(probe.out)
        for flag, name in ((args.trim, "FOOTPRINT_PROBE_TRIM"), (args.census, "FOOTPRINT_PROBE_CENSUS")):
            if flag:
                os.environ[name] = "1"
        idle = footprint.idle

        async def idle_then_probe(pid: int) -> None:
            await idle(pid)
            await probe.sample(pid)

        footprint.idle = idle_then_probe
        sys.argv = [sys.argv[0], *rest, "--bound", "0", "--breakdown", "0"]
        code = int(await footprint.main())
        counts = sorted({int(c) for c in _option(rest, "--conversations", "1000,5000").split(",") if c})
        print(table(probe.records, counts))
    return code


def _option(argv: list[str], name: str, default: str) -> str:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trim", action="store_true", help="malloc_trim(0) in the server before each sample")
    parser.add_argument(
        "--census", action="store_true", help="bytes of the live Python objects at each sample"
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then footprint.py's arguments")
    args = parser.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return asyncio.run(run(args, rest))


if __name__ == "__main__":
    sys.exit(main())
