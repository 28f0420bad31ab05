"""What `episodic serve` writes at start, seen from another process: a terminal on
stderr gets readable lines, a pipe gets JSON (the formatters themselves are tested in
tests/unit/test_start_output.py)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

SCRIPT = """
import logging
from episodic.logs import configure_logging
configure_logging("INFO")
logging.getLogger("episodic.server").info("serving", extra={"port": 1})
"""


def run_logging_process(stderr: int) -> None:
    subprocess.run([sys.executable, "-c", SCRIPT], stderr=stderr, check=True, timeout=60)


def test_a_process_whose_stderr_is_a_terminal_logs_readable_lines() -> None:
    controller, terminal = pty.openpty()
    try:
        run_logging_process(terminal)
        output = os.read(controller, 4096).decode()
    finally:
        os.close(controller)
        os.close(terminal)
    assert " INFO  episodic.server  serving  port=1" in output
    assert "{" not in output


def test_a_process_whose_stderr_is_a_pipe_logs_json() -> None:
    completed = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, check=True, timeout=60)
    assert json.loads(completed.stderr)["port"] == 1
