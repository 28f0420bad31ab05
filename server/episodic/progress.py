"""Progress bars for operator and lab commands (`episodic reindex`, `episodic-lab eval-recall`).

A bar is drawn on stderr only when stderr is a terminal: one line redrawn in place with a
carriage return, a few times a second at most. Anywhere else (a pipe, a file, a container's
log) it prints nothing, so a log collector sees only the JSON log lines.

Log lines share that terminal: the log handler (episodic.logs) writes each record inside
`suspended()`, which clears the bar's line first and redraws the bar after, under one lock,
so a log line never lands in the middle of a bar. Output of a command's own (a table on
stdout) goes through `suspended()` as well when it may be printed while a bar is up."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TextIO

REDRAW_SECONDS = 0.2  # at most five redraws a second: a tight loop must not flood the terminal
_BAR_WIDTH = 24
_CLEAR_LINE = "\r\x1b[2K"  # carriage return, then erase the whole line

# One lock for the bar and every writer that coordinates with it (the log handler). Reentrant:
# a record logged while the bar itself is being drawn must not deadlock.
_lock = threading.RLock()
_shown: Progress | None = None  # the bar on the terminal now, if any


class Progress:
    """`with Progress("reindex", total, unit="digests") as bar: bar.advance(n)`."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = max(total, 0)
        self.unit = unit
        self.done = 0
        self.note = ""
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._started = clock()
        self._drawn_at: float | None = None
        self._closed = False
        self.enabled = _is_terminal(self._stream)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def advance(self, count: int = 1, note: str | None = None) -> None:
        self.update(self.done + count, note=note)

    def update(self, done: int, *, total: int | None = None, note: str | None = None) -> None:
        """Sets the count (and the total, or the note after it); redraws when it is time to."""
        with _lock:
            self.done = done
            if total is not None:
                self.total = max(total, 0)
            if note is not None:
                self.note = note
            now = self._clock()
            due = self._drawn_at is None or now - self._drawn_at >= REDRAW_SECONDS
            if due or (self.total and done >= self.total):
                self._draw(now)

    def close(self) -> None:
        """Draws the final state and ends the bar's line; the terminal is free again."""
        global _shown
        with _lock:
            if self._closed:
                return
            self._closed = True
            if self.enabled and self._drawn_at is not None:
                self._write(_CLEAR_LINE + self.line() + "\n")
            if _shown is self:
                _shown = None

    def line(self) -> str:
        """`reindex [#######-----] 12/40 digests  3.1 s  note`, cut to the terminal's width."""
        total = max(self.total, 1)
        filled = _BAR_WIDTH * min(self.done, total) // total if self.total else 0
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        count = f"{self.done}/{self.total}" + (f" {self.unit}" if self.unit else "")
        elapsed = self._clock() - self._started
        text = f"{self.label} [{bar}] {count}  {elapsed:.1f} s" + (f"  {self.note}" if self.note else "")
        return text[: max(_columns() - 1, 10)]  # a wrapped line could not be redrawn in place

    def _draw(self, now: float) -> None:
        global _shown
        if not self.enabled or self._closed:
            return
        self._drawn_at = now
        _shown = self
        self._write(_CLEAR_LINE + self.line())

    def _redraw(self) -> None:
        if self.enabled and not self._closed and self._drawn_at is not None:
            self._write(_CLEAR_LINE + self.line())

    def _clear(self) -> None:
        if self.enabled and self._drawn_at is not None:
            self._write(_CLEAR_LINE)

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


@contextmanager
def suspended() -> Iterator[None]:
    """Takes the bar (if one is shown) off its line for the duration: whatever is written
    inside starts on a clean line, and the bar is drawn again below it."""
    with _lock:
        bar = _shown
        if bar is not None:
            bar._clear()
        try:
            yield
        finally:
            if bar is not None and _shown is bar:
                bar._redraw()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or detached stream
        return False


def _columns() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def say(line: str, stream: TextIO | None = None) -> None:
    """A status line of a command's own on stderr (a phase starting, a figure), on a line of
    its own even while a bar is up."""
    with suspended():
        print(line, file=stream if stream is not None else sys.stderr, flush=True)
