"""This replica's fitness to serve, made of parts (the database, the change feed): SERVING
only while every part is fine. The gRPC health service listens here."""

from __future__ import annotations

from collections.abc import Callable


class Health:
    def __init__(self) -> None:
        self._down: set[str] = set()
        self._listeners: list[Callable[[bool], None]] = []

    @property
    def healthy(self) -> bool:
        return not self._down

    def listen(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def set(self, part: str, ok: bool) -> None:
        before = self.healthy
        if ok:
            self._down.discard(part)
        else:
            self._down.add(part)
        if self.healthy != before:
            for listener in self._listeners:
                listener(self.healthy)

    def part(self, name: str) -> Callable[[bool], None]:
        """A listener that reports for one part."""
        return lambda ok: self.set(name, ok)
