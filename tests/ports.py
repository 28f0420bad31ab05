"""Loopback addresses for tests that must find nobody there, whatever else runs on the machine."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port this process holds bound but not listening: a connection to it is
    refused, and no other program can take the port while the block runs (unlike a fixed
    port such as 1, or a free port found and let go)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])
