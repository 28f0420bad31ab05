"""An address another process listens on is the first and only thing `episodic serve` says
(before the dev banner, the open-file limit or any database work): one line, exit code 2."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from episodic.cli.main import main

pytestmark = pytest.mark.usefixtures("restored_logging")  # main() sets up logging


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_a_port_in_use_is_the_first_thing_said(
    taken_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EPISODIC_API_KEYS", raising=False)
    database = tmp_path / "never.db"
    argv = ["serve", "--insecure-dev", "--address", f"127.0.0.1:{taken_port}", "--log-level", "DEBUG"]
    assert main([*argv, "--database-url", f"sqlite:///{database}"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()  # no banner, no open-file limit, no log line before it
    assert line.startswith(f"episodic: address: cannot listen on 127.0.0.1:{taken_port}: the port is in use")
    assert not database.exists()
