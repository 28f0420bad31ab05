"""`episodic import` reads a hostile file with bounded memory and names what is wrong: a
malformed manifest.json by its field (never gRPC's "Exception iterating requests!"), a
record longer than a record may be by part and record, before it is read whole; a device
or a pipe is refused before it is read. The file is read before the server is reached, so
one backend is enough."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from episodic.domain.transfer import MAX_RECORD_BYTES
from tests.e2e.helpers import Completed, clean_environment, run_process
from tests.server_harness import KEY_A, RunningServer

VALID: dict[str, object] = {
    "format": "episodic-export",
    "version": 1,
    "export_time": "2026-12-01T00:00:00Z",
    "user_id": "mary",
    "agent_id": "",
    "parts": [{"name": "memories.jsonl", "records": 0, "sha256": "0" * 64}],
}
MALFORMED: dict[str, bytes] = {
    "not JSON": b"{",
    "not UTF-8": b"\xff\xfe",
    "a list": b"[]",
    "parts not a list": json.dumps({**VALID, "parts": 5}).encode(),
    "a part not an object": json.dumps({**VALID, "parts": [5]}).encode(),
    "a part without a name": json.dumps({**VALID, "parts": [{"records": 0, "sha256": "0"}]}).encode(),
    "records a string": json.dumps(
        {**VALID, "parts": [{"name": "m", "records": "0", "sha256": "0"}]}
    ).encode(),
    "records past 64 bits": json.dumps(
        {**VALID, "parts": [{"name": "m", "records": 2**70, "sha256": "0"}]}
    ).encode(),
    "version a string": json.dumps({**VALID, "version": "one"}).encode(),
    "export_time not a time": json.dumps({**VALID, "export_time": "yesterday"}).encode(),
    "format a number": json.dumps({**VALID, "format": 1}).encode(),
}


async def episodic_import(server: RunningServer, path: Path | str) -> Completed:
    env = clean_environment() | {"EPISODIC_API_KEY": KEY_A}
    argv = (sys.executable, "-m", "episodic", "import", str(path), "--address", server.address)
    return await run_process(*argv, env=env)


def export_file(path: Path, manifest: bytes, parts: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in (parts or {"memories.jsonl": b""}).items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", manifest)
    return path


async def test_a_malformed_manifest_is_named_not_an_exception_iterating_requests(
    sqlite_server: RunningServer, tmp_path: Path
) -> None:
    for n, (kind, manifest) in enumerate(MALFORMED.items()):
        done = await episodic_import(sqlite_server, export_file(tmp_path / f"{n}.zip", manifest))
        assert done.returncode == 1, kind
        assert "manifest.json" in done.stderr and "Exception iterating" not in done.stderr, (
            kind,
            done.stderr,
        )


async def test_a_record_over_the_limit_is_refused_by_part_and_record_before_it_is_read_whole(
    sqlite_server: RunningServer, tmp_path: Path
) -> None:
    manifest = {**VALID, "parts": [{"name": "episodes/000001.jsonl", "records": 1, "sha256": "0" * 64},
                                   {"name": "memories.jsonl", "records": 0, "sha256": "0" * 64}]}  # fmt: skip
    endless = b"x" * (MAX_RECORD_BYTES + 1)
    path = export_file(tmp_path / "long.zip", json.dumps(manifest).encode(),
                       {"episodes/000001.jsonl": endless, "memories.jsonl": b""})  # fmt: skip
    done = await episodic_import(sqlite_server, path)
    assert done.returncode == 1
    assert "episodes/000001.jsonl record 1 is over" in done.stderr, done.stderr


async def test_a_device_or_a_pipe_is_refused_before_it_is_read(sqlite_server: RunningServer) -> None:
    done = await episodic_import(sqlite_server, "/dev/zero")
    assert done.returncode == 1 and "is not a regular file" in done.stderr, done.stderr
