"""Embedding threads run below the event loop and the database writer in the OS scheduler.

A turn's path alternates between the loop (gRPC, searches) and the writer thread (its
append and its record), while its query embedding runs beside them for ~2 ms of native
code. On 2 cores that is three runnable threads: when the writer woke it waited for a core
(the append's hop to the writer took 1.5-2.3 ms p50 beside an embedding, 0.15 ms without).
Niced, the embedding yields the core whenever the loop or the writer has work, and takes it
back the moment they wait: `scripts/turn_breakdown.py` put the hop back at ~0.35 ms and a
new-question turn's rate from 10.2-10.9 % of Echo's to 11.1-11.5 % (since the writer has a
thread of its own, +10 and no nice measure the same: on 2 cores the wait only moves between
the append and the embedding; what the nice still buys is the order under load). Bulk embeddings
(documents, memories, digests: nobody waits on them this turn) sit lower still, so a
tenant's ingest takes what the turns leave.

Linux only: there a thread is a task of its own and `setpriority` on its id nices that thread
alone; elsewhere the same call would nice the whole process, so it is not made.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("episodic.threads")

# Steps of nice below the process (CFS weights: +10 gets ~1/9 of a contended core, +15 ~1/29).
QUERY_EMBED_NICE = 10
BULK_EMBED_NICE = 15
_MOST_NICE = 19


def niced(steps: int) -> Callable[[], None]:
    """A thread initializer: lowers the calling thread's priority by `steps` (nothing to do
    off Linux, or when the OS refuses: a thread that runs at normal priority is only slower
    to give way, never wrong)."""

    def lower() -> None:
        if sys.platform != "linux" or steps <= 0:
            return
        tid = threading.get_native_id()
        try:
            current = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(current + steps, _MOST_NICE))
        except OSError as exc:
            log.warning("could not lower an embedding thread's priority: %s", exc.strerror)

    return lower


def niced_pool(threads: int, name: str, steps: int) -> ThreadPoolExecutor:
    """`threads` threads named `name`_N, each `steps` below the process's priority."""
    return ThreadPoolExecutor(threads, thread_name_prefix=name, initializer=niced(steps))
