"""The progress bar of operator and lab commands: drawn only on a terminal, redrawn a few
times a second at most, and never sharing a line with a JSON log line."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from episodic import progress
from episodic.logs import JsonFormatter, JsonLineHandler
from episodic.progress import Progress, say

CONTROL = re.compile(r"\x1b\[2K")


class Terminal(io.StringIO):
    """What a terminal was sent; `isatty()` is what makes the bar draw."""

    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def screen(written: str) -> list[str]:
    """The lines a terminal would show: each carriage return starts its line over."""
    lines = []
    for line in CONTROL.sub("", written).split("\n"):
        lines.append(line.rsplit("\r", 1)[-1])
    return lines


@pytest.fixture
def log_to() -> Iterator[logging.Logger]:
    logger = logging.getLogger("tests.progress")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    yield logger
    logger.handlers.clear()
    logger.propagate = True


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_ends_its_line() -> None:
    stream, clock = Terminal(), Clock()
    with Progress("reindex", 4, unit="digests", stream=stream, clock=clock) as bar:
        for _ in range(4):
            clock.now += 1
            bar.advance()
    written = stream.getvalue()
    assert written.count("\r") >= 4 and written.endswith("\n")
    final = screen(written)[0]
    assert final.startswith("reindex [########################] 4/4 digests")
    assert screen(written)[1:] == [""]


def test_off_a_terminal_the_bar_prints_nothing() -> None:
    stream = io.StringIO()
    with Progress("reindex", 3, stream=stream) as bar:
        bar.advance(3, note="done")
    say("a status line", stream=stream)
    assert stream.getvalue() == "a status line\n"


def test_redraws_are_throttled_to_a_few_a_second() -> None:
    stream, clock = Terminal(), Clock()
    bar = Progress("eval", 1000, stream=stream, clock=clock)
    for _ in range(999):
        clock.now += 0.001  # a thousand steps in one second
        bar.advance()
    draws = stream.getvalue().count("\r")
    assert 2 <= draws <= 1 / progress.REDRAW_SECONDS + 2
    bar.close()
    assert "999/1000" in screen(stream.getvalue())[0]  # closing draws the last count


def test_the_last_step_is_always_drawn() -> None:
    stream, clock = Terminal(), Clock()
    with Progress("ask", 3, stream=stream, clock=clock) as bar:
        bar.advance()
        bar.advance()
        bar.advance()  # within the throttle window, but the end
        assert "3/3" in screen(stream.getvalue())[-1]


def test_a_log_line_written_while_a_bar_is_shown_gets_a_line_of_its_own(log_to: logging.Logger) -> None:
    stream, clock = Terminal(), Clock()
    handler = JsonLineHandler(stream)
    handler.setFormatter(JsonFormatter())
    log_to.addHandler(handler)
    with Progress("reindex", 10, unit="digests", stream=stream, clock=clock) as bar:
        clock.now += 1
        bar.advance(3)
        log_to.info("digested a batch", extra={"count": 3})
        clock.now += 1
        bar.advance(7)
    lines = screen(stream.getvalue())
    logged = [line for line in lines if line.startswith("{")]
    assert len(logged) == 1 and json.loads(logged[0])["message"] == "digested a batch"
    assert all(line.startswith(("{", "reindex [")) or line == "" for line in lines)
    # the bar came back below the log line and finished there
    assert (
        lines.index(logged[0]) < len(lines) - 2 and lines[-2].startswith("reindex [") and "10/10" in lines[-2]
    )


def test_a_status_line_said_while_a_bar_is_shown_clears_the_bar_first() -> None:
    stream, clock = Terminal(), Clock()
    with Progress("import", 2, stream=stream, clock=clock) as bar:
        bar.advance()
        say("server started", stream=stream)
        raw = stream.getvalue()
        assert "\r\x1b[2Kserver started\n" in raw
        assert raw.endswith("import [" + raw.rsplit("import [", 1)[1])  # drawn again after the line
        clock.now += 1
        bar.advance()
    assert "server started" in screen(stream.getvalue())


def test_the_bar_never_outgrows_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_columns", lambda: 40)
    stream = Terminal()
    with Progress("reindex", 10, unit="digests", stream=stream) as bar:
        bar.advance(5, note="with a very long model name that would wrap the line")
    assert all(len(line) < 40 for line in screen(stream.getvalue()))


def test_a_bar_whose_total_grows_keeps_counting() -> None:
    stream, clock = Terminal(), Clock()
    with Progress("reindex", 2, stream=stream, clock=clock) as bar:
        bar.update(2)
        clock.now += 1
        bar.update(5, total=5)
    assert "5/5" in screen(stream.getvalue())[0]
