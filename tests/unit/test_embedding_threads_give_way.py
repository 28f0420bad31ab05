"""Embedding threads run below the event loop and the writer (bootstrap/thread_priority.py)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from episodic.bootstrap.thread_priority import BULK_EMBED_NICE, QUERY_EMBED_NICE, niced
from episodic.bootstrap.wiring import new_embed_pool, new_query_pool

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def _own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_query_embedding_threads_are_niced_below_the_process() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    pool = new_query_pool()
    try:
        assert pool.submit(_own_nice).result() == min(base + QUERY_EMBED_NICE, 19)
    finally:
        pool.shutdown()


def test_bulk_embedding_threads_sit_below_the_query_threads() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    pool = new_embed_pool(1)
    try:
        assert pool.submit(_own_nice).result() == min(base + BULK_EMBED_NICE, 19)
    finally:
        pool.shutdown()
    assert BULK_EMBED_NICE > QUERY_EMBED_NICE


def test_niceness_is_the_pool_thread_s_alone() -> None:
    before = _own_nice()
    pool = new_query_pool()
    try:
        pool.submit(_own_nice).result()
    finally:
        pool.shutdown()
    assert _own_nice() == before  # the caller's thread (the loop's) keeps its priority


def test_an_initializer_of_no_steps_leaves_the_thread_as_it_is() -> None:
    seen: list[int] = []

    def run() -> None:
        niced(0)()
        seen.append(_own_nice())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [os.getpriority(os.PRIO_PROCESS, 0)]
