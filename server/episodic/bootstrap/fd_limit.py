"""Open files at process start: the soft limit raised to the hard one (every socket is a
file, and a 1,024 default is soon reached by clients and the HTTP listeners together), and,
if the limit is reached anyway, asyncio's "socket.accept() out of system resource" kept to
one counted line per interval instead of one per failed accept."""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable

log = logging.getLogger("episodic.server")

ACCEPT_FAILED = "socket.accept() out of system resource"
NOTE_EVERY_SECONDS = 10.0


def raise_open_files_limit() -> tuple[int, int]:
    """Raises the soft RLIMIT_NOFILE to the hard limit where allowed and returns (soft, hard)
    as they end up. Says so (INFO) only when it raised the limit, warns when it could not;
    a limit already at its hardest is a DEBUG line."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # e.g. a hard limit above the kernel's nr_open
            log.warning("open-file limit not raised", extra={"soft": soft, "hard": hard, "error": str(exc)})
    level = logging.INFO if soft != before else logging.DEBUG
    log.log(level, "open-file limit", extra={"soft_before": before, "soft": soft, "hard": _shown(hard)})
    return soft, hard


def quiet_accept_failures(logger: logging.Logger | None = None) -> AcceptFailureFilter:
    """Installs (once) the filter that thins asyncio's accept failures on its logger."""
    target = logger or logging.getLogger("asyncio")
    for existing in target.filters:
        if isinstance(existing, AcceptFailureFilter):
            return existing
    thinning = AcceptFailureFilter()
    target.addFilter(thinning)
    return thinning


class AcceptFailureFilter(logging.Filter):
    """Lets one accept-failure record through per `every` seconds, its message saying how
    many were held back; other records pass untouched."""

    def __init__(
        self, every: float = NOTE_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._every = every
        self._clock = clock
        self._held = 0
        self._next_line = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(ACCEPT_FAILED):
            return True
        now = self._clock()
        if now < self._next_line:
            self._held += 1
            return False
        record.msg = f"{ACCEPT_FAILED} ({self._held} more like it held back in the last {self._every:g} s)"
        record.args = None
        record.exc_info = None  # the same OSError each time: its traceback says nothing new
        record.exc_text = None
        self._held = 0
        self._next_line = now + self._every
        return True


def _shown(limit: int) -> int | str:
    return "unlimited" if limit == resource.RLIM_INFINITY else limit
