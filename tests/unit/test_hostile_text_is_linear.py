"""Every text algorithm run on user input costs at most linear time in its size, whatever the
shape of the text: 256 KiB of a hostile shape may cost about 16x what 16 KiB costs, never 16^2.

Timing compares two sizes on the same machine in the same run (a ratio, never a wall time) of
this thread's CPU time (time.thread_time: what other processes on a busy machine take is not
counted), takes the fastest of a few runs of each, and measures again before failing, so what
load is left (caches, frequency) slows both sizes alike rather than failing the test."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from episodic.domain.excerpts import spoken
from episodic.domain.model import Message, Role
from episodic.domain.pii import redact
from episodic.domain.text_analysis import fold
from episodic.domain.text_analysis import terms as query_terms
from episodic.store.lexical import terms
from episodic.summarize import ExtractiveSummarizer
from episodic.tokens import TiktokenCounter

SMALL = 16 * 1024
LARGE = 256 * 1024
# Linear is 16x, quadratic 256x. The slack covers caches and allocation growing with the
# size: cases that make an object a word ("a fact in every word") measure ~20x in a fresh
# process, 23-40x in one holding 3M objects with two thirds freed at random, and 45-46x late in
# a fresh-clone CI run (2026-11-28), linear as they are.
MAX_RATIO = 64.0
# tiktoken merges one long piece (a run of full stops) in about n log n: ~24x at rest, which a
# loaded machine can push past the bound for a measurement or two. A burst of load on the
# host can outlast several measurements (a fresh-clone CI run once saw 40-54x on nine linear
# cases in a row, all ~16x alone): each measurement again waits a moment first.
REMEASURES = 6
REMEASURE_PAUSE_SECONDS = 0.25

SHAPES = {
    "repetition": "the stream will be cancelled ",
    "no punctuation": "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima ",
    "one giant token": "abcdefghij",
    "only digits": "0123456789",
    "only emoji": "😀",
    "a run of one character": "a",
    "a run of a-dot": "a.",
    "a fact in every word": "my dog ",
    "pii in every word": "a@b.co +44 20 7946 0958 ",
    "a run of full stops": ".",
}

NOW = datetime(2025, 1, 1, tzinfo=UTC)
TOKENS = TiktokenCounter()
SUMMARIZER = ExtractiveSummarizer()
# Reads every character, so the summarizer's algorithms are measured, not its bound on input.
UNBOUNDED_SUMMARIZER = ExtractiveSummarizer(max_message_chars=LARGE)


def _transcript(text: str) -> list[Message]:
    return [Message("ep", 1, Role.USER, text, 1, "cl100k_base", NOW)]


ALGORITHMS: dict[str, Callable[[str], object]] = {
    "summary and key facts": lambda text: SUMMARIZER.summarize(_transcript(text)),
    "summary and key facts, whole message read": lambda text: UNBOUNDED_SUMMARIZER.summarize(
        _transcript(text)
    ),
    "pii redaction": redact,
    "cl100k token count": lambda text: TOKENS.count(text, "cl100k_base"),
    "o200k token count": lambda text: TOKENS.count(text, "o200k_base"),
    "lexical query terms": terms,
    "query terms": query_terms,
    "folding": fold,
    "messages read for excerpts": lambda text: spoken(_transcript(text)),
}


def of_size(unit: str, size: int) -> str:
    """`unit` repeated to `size` characters (emoji are 4 bytes each: a quarter as many)."""
    return (unit * (size // len(unit) + 1))[:size]


def fastest(run: Callable[[str], object], text: str, repeats: int) -> float:
    """The best CPU time of the runs, the cyclic garbage collector off while each runs: late
    in a full suite the process holds the objects of 2,500 tests, and a collection the large
    text's allocations set off walks all of them (measured: 43-48x where alone it is ~16x).
    No gc.collect() here: in that process each one costs a walk of everything too (run before
    every timing, it added minutes to the suite)."""
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        try:
            started = time.thread_time()
            run(text)
            best = min(best, time.thread_time() - started)
        finally:
            gc.enable()
    return best


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_sixteen_times_the_text_costs_about_sixteen_times_the_time(algorithm: str, shape: str) -> None:
    run, unit = ALGORITHMS[algorithm], SHAPES[shape]
    small, large = of_size(unit, SMALL), of_size(unit, LARGE)
    run(small)  # warm-up: encodings, compiled patterns
    small_time, large_time = fastest(run, small, 5), fastest(run, large, 2)
    for _ in range(REMEASURES):
        if large_time <= MAX_RATIO * small_time:
            break
        time.sleep(REMEASURE_PAUSE_SECONDS)
        small_time = min(small_time, fastest(run, small, 5))  # a burst of load during one of them
        large_time = min(large_time, fastest(run, large, 3))
    ratio = large_time / small_time
    assert ratio <= MAX_RATIO, f"{algorithm} on {shape}: 256 KiB took {ratio:.0f}x the time of 16 KiB"


def test_the_summarizer_reads_a_bounded_prefix_of_each_message() -> None:
    """Beyond its prefix a message cannot change the digest, so its size cannot change the cost."""
    hostile = SHAPES["repetition"]
    assert SUMMARIZER.summarize(_transcript(of_size(hostile, LARGE))) == SUMMARIZER.summarize(
        _transcript(of_size(hostile, SUMMARIZER.max_message_chars + len(hostile)))
    )
