"""Which server code was measured: the git commit of the repository holding the `episodic`
package this process imports (the server subprocesses run the same one), and whether its
files differ from that commit. Found without importing the package."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

GIT_TIMEOUT_SECONDS = 10.0


def server_code() -> str:
    """ "<commit>", "<commit> + uncommitted changes in <dir>", or "unknown"."""
    package = _package_dir()
    if package is None:
        return "unknown"
    commit = _git(package, "rev-parse", "HEAD")
    if commit is None:
        return "unknown"
    # diff --quiet exits 1 when the package's files differ from HEAD; it writes nothing.
    changed = _git_status(package, "diff", "--quiet", "HEAD", "--", ".") == 1
    return commit + (f" + uncommitted changes in {package}" if changed else "")


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec("episodic")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _git(where: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def _git_status(where: Path, *args: str) -> int | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, timeout=GIT_TIMEOUT_SECONDS
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode
