"""An executor the test runs by hand and a one-number embedder: the order in which the
server's embedding threads take jobs (state/embed_turns.py), shown step by step."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any


class ByHand(Executor):
    """Runs nothing until the test says so: `submitted` holds each job's texts, in order;
    `most_running`, the most jobs ever held at once."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []
        self.submitted: list[list[str]] = []
        self.most_running = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.jobs.append((future, fn, args))
        self.submitted.append(list(args[0]))
        self.most_running = max(self.most_running, len(self.jobs))
        return future

    async def finish(self, at: int = 0) -> None:
        """Runs the job held at `at` (the oldest by default), as a thread would."""
        future, fn, args = self.jobs.pop(at)
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # the model's error, as a thread would hand it back
            future.set_exception(exc)
        await settle()

    async def finish_next(self) -> None:
        await self.finish(0)

    @property
    def running(self) -> int:
        return len(self.jobs)


class Embedder:
    """Each text's vector is its length; a text "bad" fails the whole call."""

    model_id, dimension = "fake", 1

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if "bad" in texts:
            raise RuntimeError("the model failed")
        return [[float(len(t))] for t in texts]


async def settle() -> None:
    """Lets the loop run the callbacks a finished job scheduled."""
    for _ in range(10):
        await asyncio.sleep(0)
