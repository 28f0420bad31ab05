"""What a start prints: readable log lines on a terminal and JSON anywhere else, our INFO
lines without other libraries' INFO chatter, and a dev banner whose box stays straight."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from episodic.cli.serve import BANNER_WIDTH, dev_banner
from episodic.logs import HumanFormatter, JsonFormatter, configure_logging


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


pytestmark = pytest.mark.usefixtures("restored_logging")  # main() sets up logging


def test_a_pipe_or_file_gets_json() -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    logging.getLogger("episodic.server").info("serving", extra={"port": 50051})
    entry = json.loads(stream.getvalue())
    assert (entry["level"], entry["logger"], entry["message"], entry["port"]) == (
        "INFO",
        "episodic.server",
        "serving",
        50051,
    )


def test_a_terminal_gets_readable_lines() -> None:
    stream = Terminal()
    configure_logging("INFO", stream=stream)
    logging.getLogger("episodic.server").info(
        "serving", extra={"port": 50051, "database": "sqlite:///x y.db"}
    )
    line = stream.getvalue()
    assert not line.startswith("{")
    assert ' INFO  episodic.server  serving  port=50051 database="sqlite:///x y.db"\n' in line


@pytest.mark.parametrize("human", [True, False])
def test_the_choice_can_be_forced(human: bool) -> None:
    stream = Terminal() if not human else io.StringIO()
    configure_logging("INFO", stream=stream, human=human)
    logging.getLogger("episodic.server").info("serving")
    assert stream.getvalue().startswith("{") is not human


def test_other_libraries_log_only_from_warning_up_and_ours_at_the_level() -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    logging.info("Quantization parameters for tensor ... not specified")  # the quantizer: root
    logging.getLogger("alembic.runtime.migration").info("Running upgrade 0001 -> 0002")
    logging.getLogger("alembic.runtime.migration").warning("a library's warning")
    logging.getLogger("episodic.server").info("our info")
    logging.getLogger("episodic.server").debug("our debug")
    messages = [json.loads(line)["message"] for line in stream.getvalue().splitlines()]
    assert messages == ["a library's warning", "our info"]


def test_debug_is_ours_only_and_a_higher_level_applies_to_everyone() -> None:
    stream = io.StringIO()
    configure_logging("debug", stream=stream)
    logging.getLogger("alembic").debug("a library's debug")
    logging.getLogger("episodic.store").debug("our debug")
    configure_logging("ERROR", stream=stream)
    logging.getLogger("alembic").warning("a library's warning")
    logging.getLogger("episodic.store").warning("our warning")
    logging.getLogger("alembic").error("a library's error")
    messages = [json.loads(line)["message"] for line in stream.getvalue().splitlines()]
    assert messages == ["our debug", "a library's error"]


def record_with_exception() -> logging.LogRecord:
    try:
        try:
            raise KeyError("user-secret@example.com")
        except KeyError as exc:
            raise RuntimeError("SELECT ... WHERE email = 'user-secret@example.com'") from exc
    except RuntimeError:
        return logging.LogRecord(
            "episodic.store", logging.ERROR, __file__, 1, "write failed", None, sys.exc_info()
        )


def test_readable_lines_show_exception_types_and_frames_never_their_message() -> None:
    text = HumanFormatter().format(record_with_exception())
    first, *frames = text.splitlines()
    assert first.endswith(
        'ERROR episodic.store  write failed  error_type="builtins.RuntimeError <- builtins.KeyError"'
    )
    assert frames and all(f.startswith("    at ") for f in frames)
    assert "test_start_output.py" in frames[-1]
    assert "secret" not in text
    assert "secret" not in JsonFormatter().format(record_with_exception())


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain", "plain"),
        ("two words", '"two words"'),
        ("", '""'),
        (True, "true"),
        (1.5, "1.5"),
        (["a"], '["a"]'),
    ],
)
def test_readable_values(value: object, shown: str) -> None:
    record = logging.LogRecord("episodic.x", logging.INFO, __file__, 1, "m", None, None)
    record.field = value
    assert HumanFormatter().format(record).endswith(f"  m  field={shown}")


@pytest.mark.parametrize("tenant", ["dev", "", "t" * 10, "a-very-long-tenant-name-that-pushes-the-box-wider"])
def test_the_dev_banner_box_is_straight(tenant: str) -> None:
    lines = dev_banner(tenant).splitlines()
    assert len(lines) == 5
    assert {len(line) for line in lines} == {max(BANNER_WIDTH, len(repr(tenant)) + 58)}
    assert all(line.startswith("*") and line.endswith("*") for line in lines)
    assert set(lines[0]) == set(lines[-1]) == {"*"}
    assert f"served as tenant {tenant!r}  " in lines[2]
