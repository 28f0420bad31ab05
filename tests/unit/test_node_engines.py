"""`npm ci` on the Node the README promises (clients/node: "Node 20+") warns EBADENGINE for no
package but the Vercel AI SDK's, read offline from each lockfile's `engines`: what a user of
@episodic/client installs accepts its own minimum Node, and everything `npm ci` installs
accepts that minimum and the Node on this machine, except `ai` 7 and its `@ai-sdk/*` packages,
which declare Node 22 (docs/integrations/ai-sdk.md): dev-only, for the optional `ai-sdk` entry
point, and never installed for a user of the client."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCKFILES = [ROOT / "clients" / "node" / "package-lock.json", ROOT / "tests/browser/package-lock.json"]
# The AI SDK (ai >= 7 and its own packages) requires Node 22; no release of it accepts Node 20.
NODE_22_ONLY = re.compile(r"node_modules/(ai|@ai-sdk/[^/]+)")

Version = tuple[int, int, int]


def version(text: str) -> Version:
    """`20`, `v20.1`, `20.x`, `12.10.0` -> (major, minor, patch), wildcards as 0."""
    parts = [int(p) if p.isdigit() else 0 for p in text.strip().lstrip("v=").split("-")[0].split(".")]
    major, minor, patch = [*parts, 0, 0][:3]
    return major, minor, patch


def satisfies(current: Version, ranges: str) -> bool:
    """npm's range syntax as engines use it: `||` of space-separated comparators (`>=`, `>`,
    `<=`, `<`, `=`, `^`, `~`, a bare or x version), `A - B`, `*`."""
    for alternative in ranges.split("||"):
        text = re.sub(r"(>=|<=|>|<|=|\^|~)\s+", r"\1", alternative.strip())
        if re.fullmatch(r"\S+ - \S+", text):
            low, high = text.split(" - ")
            text = f">={low} <={high}"
        if all(_comparator(current, c) for c in text.split()) or text in {"", "*"}:
            return True
    return False


def _comparator(current: Version, comparator: str) -> bool:
    if comparator in {"*", "x"}:
        return True
    operator, bound_text = re.fullmatch(r"(>=|<=|>|<|=|\^|~)?(.+)", comparator).groups()  # type: ignore[union-attr]
    bound = version(bound_text)
    given = len([p for p in bound_text.lstrip("v").split(".") if p.isdigit()])  # 20.x: 1 part
    if operator == "^":
        return current >= bound and current[0] == bound[0]
    if operator == "~":
        return current >= bound and current[:2] == bound[:2]
    # a partial version is a range (20 = 20.x, <=20 = <21): compare the parts it gives
    mine, theirs = current[:given], bound[:given]
    checks = {">=": mine >= theirs, ">": mine > theirs, "<=": mine <= theirs, "<": mine < theirs}
    return checks.get(operator or "=", mine == theirs)


def test_the_range_reader() -> None:
    node20 = (20, 20, 2)
    assert satisfies(node20, ">=20") and satisfies(node20, ">= 20") and satisfies(node20, ">=12.10.0")
    assert satisfies(node20, "6.* || 8.* || >= 10.*") and satisfies(node20, "^20.1")
    assert satisfies(node20, "20.x") and satisfies(node20, "*")
    assert not satisfies(node20, ">=22") and not satisfies(node20, "^18") and not satisfies(node20, "<20")
    assert not satisfies(node20, "~20.21") and satisfies(node20, "18 - 20") and not satisfies(node20, "21.x")


def packages(lockfile: Path) -> dict[str, dict[str, Any]]:
    lock: dict[str, Any] = json.loads(lockfile.read_text())
    assert lock["lockfileVersion"] >= 2, f"{lockfile}: no `packages` map (npm 7+ writes one)"
    found: dict[str, dict[str, Any]] = lock["packages"]
    return found


def minimum_node(lockfile: Path) -> Version:
    """The project's own promise: its package.json's `engines.node`, `>=N`."""
    declared = json.loads((lockfile.parent / "package.json").read_text())["engines"]["node"]
    (bound,) = re.fullmatch(r">=\s*(\S+)", declared).groups()  # type: ignore[union-attr]
    return version(bound)


def refusing(lockfile: Path, node: Version) -> dict[str, str]:
    """The packages `npm ci` installs whose `engines.node` does not accept `node`."""
    return {
        name: entry["engines"]["node"]
        for name, entry in packages(lockfile).items()
        if name  # "" is the project itself
        and isinstance(entry.get("engines"), dict)
        and "node" in entry["engines"]
        and not satisfies(node, entry["engines"]["node"])
    }


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_only_the_ai_sdk_refuses_the_minimum_node(lockfile: Path) -> None:
    entries = packages(lockfile)
    refused = refusing(lockfile, minimum_node(lockfile))
    unexpected = {name: r for name, r in refused.items() if not NODE_22_ONLY.fullmatch(name)}
    assert not unexpected, f"npm ci warns EBADENGINE on Node {minimum_node(lockfile)[0]} for {unexpected}"
    for name in refused:  # the AI SDK: installed for development only, never for the client's users
        assert entries[name].get("dev") is True, f"{name} is installed for the client's users too"


def test_the_client_declares_ai_an_optional_peer() -> None:
    manifest = json.loads((ROOT / "clients" / "node" / "package.json").read_text())
    installed_for_users = {**manifest.get("dependencies", {}), **manifest.get("optionalDependencies", {})}
    assert "ai" not in installed_for_users
    assert manifest["peerDependenciesMeta"]["ai"]["optional"] is True


@pytest.mark.parametrize("lockfile", LOCKFILES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_this_machines_node_is_accepted(lockfile: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on this machine")
    current = version(subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout)
    assert current >= minimum_node(lockfile), f"node {current} is older than the project's minimum"
    unexpected = {n: r for n, r in refusing(lockfile, current).items() if not NODE_22_ONLY.fullmatch(n)}
    assert not unexpected, f"npm ci warns EBADENGINE on this node {current} for {unexpected}"
