"""Time and ids, as the core receives them (never read from the system inside the core)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

Clock = Callable[[], datetime]
IdFactory = Callable[[], str]
