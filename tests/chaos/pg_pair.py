"""Two throwaway PostgreSQL clusters of our own on loopback ports: a primary and a
synchronous streaming standby made from it with `pg_basebackup -R`, for failover tests.
Never the shared cluster: each of these is initdb'ed in a temporary directory, killed and
stopped by its own postmaster's PID, and deleted afterwards.

Run as root, the PostgreSQL binaries run as the `postgres` user (initdb refuses root)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

DATABASE = "episodic"
STANDBY_NAME = "standby1"
COMMAND_SECONDS = 120.0
# What a real pair runs with (docs/deployment.md, "High availability"): a commit returns
# once the standby has it, so losing the primary loses no acknowledged write. Set once the
# standby exists: until then every commit (CREATE DATABASE too) would wait for it.
SYNCHRONOUS = f"ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ({STANDBY_NAME})'"
PRIMARY_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "wal_level": "replica",
    "max_wal_senders": "5",
    "synchronous_commit": "on",
    "max_connections": "60",
    "shared_buffers": "32MB",
    "fsync": "off",  # a SIGKILLed postmaster loses no page the kernel holds; speed only
}


def pg_bin(tool: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"))
    if not found:
        raise FileNotFoundError(f"no {tool} under /usr/lib/postgresql/*/bin")
    return found[-1]


def _as_postgres(command: Sequence[str]) -> list[str]:
    if os.geteuid() != 0:
        return list(command)
    return ["runuser", "-u", "postgres", "--", *command]


def run(*command: str) -> str:
    done = subprocess.run(
        _as_postgres(command), capture_output=True, timeout=COMMAND_SECONDS, check=False, cwd="/"
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return done.stdout.decode(errors="replace")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    """One cluster: its data directory and port."""

    data: Path
    port: int

    @property
    def log(self) -> Path:
        return self.data.parent / f"{self.data.name}.log"

    def start(self) -> None:
        run(pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def postmaster_pid(self) -> int | None:
        pid_file = self.data / "postmaster.pid"
        with suppress(OSError, ValueError, IndexError):
            return int(pid_file.read_text().splitlines()[0])
        return None

    def kill(self) -> None:
        """SIGKILL the postmaster and every process it started: the server is gone at once,
        with no shutdown (a lost machine)."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        children = _children(pid)
        for victim in (pid, *children):
            with suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)

    def stop(self) -> None:
        """A fast shutdown if it still runs; a SIGKILL if that does not work."""
        if self.postmaster_pid() is None:
            return
        try:
            run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")
        except RuntimeError:
            self.kill()

    def promote(self) -> None:
        run(pg_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "promote")

    def sql(self, statement: str, database: str = "postgres") -> str:
        return run(
            pg_bin("psql"), "-X", "-A", "-t", "-h", "127.0.0.1", "-p", str(self.port),
            "-U", "postgres", "-d", database, "-c", statement,
        ).strip()  # fmt: skip


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text()
            found += [int(child) for child in text.split()]
    return found


@dataclass
class Pair:
    primary: Node
    standby: Node

    def url(self) -> str:
        """The standard libpq multi-host form: both servers, the writable one chosen."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            f"/{DATABASE}?target_session_attrs=read-write"
        )

    def standby_is_synchronous(self) -> bool:
        state = self.primary.sql("SELECT sync_state FROM pg_stat_replication")
        return state.splitlines() == ["sync"]


def _settings(path: Path, settings: dict[str, str]) -> None:
    with path.open("a") as conf:
        conf.writelines(f"{key} = {value}\n" for key, value in settings.items())


def _wait_for(check: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with suppress(RuntimeError):
            if check():
                return
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


def _make_primary(primary: Node, root: Path) -> None:
    run(pg_bin("initdb"), "-D", str(primary.data), "-U", "postgres", "--auth=trust", "--no-sync")
    _settings(
        primary.data / "postgresql.conf",
        {**PRIMARY_SETTINGS, "port": str(primary.port), "unix_socket_directories": f"'{root}'"},
    )
    primary.start()
    primary.sql(f"CREATE DATABASE {DATABASE}")


def _make_standby(standby: Node, primary: Node, root: Path) -> None:
    run(
        pg_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
        "-D", str(standby.data), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast",
        "-d", f"application_name={STANDBY_NAME}",
    )  # fmt: skip
    _settings(
        standby.data / "postgresql.conf",
        {"port": str(standby.port), "hot_standby": "on", "unix_socket_directories": f"'{root}'"},
    )
    standby.start()
    primary.sql(SYNCHRONOUS)
    primary.sql("SELECT pg_reload_conf()")


@contextmanager
def primary_and_standby() -> Iterator[Pair]:
    """A primary and its synchronous standby, both running; both stopped (by their own
    postmaster PIDs) and deleted on the way out, whatever happened."""
    root = Path(tempfile.mkdtemp(prefix="episodic-pg-pair-", dir="/tmp"))
    if os.geteuid() == 0:
        postgres = pwd.getpwnam("postgres")
        os.chown(root, postgres.pw_uid, postgres.pw_gid)
    pair = Pair(Node(root / "primary", free_port()), Node(root / "standby", free_port()))
    try:
        _make_primary(pair.primary, root)
        _make_standby(pair.standby, pair.primary, root)
        _wait_for(pair.standby_is_synchronous, "the standby streaming synchronously")
        yield pair
    finally:
        for node in (pair.primary, pair.standby):
            node.stop()
        shutil.rmtree(root, ignore_errors=True)
