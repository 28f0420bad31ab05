"""One door to the core: inside the package, only the composition root (`bootstrap/`) opens the
database and builds the concrete adapters (`bootstrap.adapters.build_adapters`, called by
`bootstrap.core.open_core`) and the core over them; the adapters' own packages make their
parts. So an operator's command (cli/), an edge or the core never calls a concrete adapter's
constructor or factory: it goes through `open_core` / `open_app`."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "episodic"
# Where concrete adapters may be made: the composition root, and each adapter's own package.
MAKERS = ("bootstrap", "store", "index", "embed", "summarize", "tokens", "telemetry", "v1")
# What makes one: the database, the writer, the wiring's builders, the model and index factories.
DOORS = frozenset(
    {
        "open_database",
        "GroupCommitWriter",
        "build_adapters",
        "build_core",
        "make_embedder",
        "make_summarizer",
        "FaissVectorIndex",
        "TiktokenCounter",
    }
)


def calls(source: str, where: str) -> Iterator[str]:
    """The names called in `source`: `f(...)` and `x.f(...)` both name f; an `Sql...` class
    (a store of store/) counts as a door too."""
    for node in ast.walk(ast.parse(source, where)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in DOORS or (name.startswith("Sql") and name[3:4].isupper()):
            yield name


def outside_the_makers(module: Path) -> bool:
    return module.relative_to(PACKAGE).parts[0] not in MAKERS


MODULES = [m for m in sorted(PACKAGE.rglob("*.py")) if outside_the_makers(m)]


@pytest.mark.parametrize("module", MODULES, ids=[str(m.relative_to(PACKAGE)) for m in MODULES])
def test_no_module_outside_the_composition_root_builds_a_concrete_adapter(module: Path) -> None:
    found = sorted(set(calls(module.read_text(), str(module))))
    assert not found, f"{module.relative_to(PACKAGE)} calls {found}: open the core through open_core"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("database = open_database(url)\n", ["open_database"]),
        ("store = SqlContextStore(database, writer)\n", ["SqlContextStore"]),
        ("from episodic.store import writer\nw = writer.GroupCommitWriter(db)\n", ["GroupCommitWriter"]),
        ("async def f():\n    return build_adapters(s, d, w, None)\n", ["build_adapters"]),
        ("x = SqliteLease(path)\nasync def f():\n    async with open_core(s):\n        pass\n", []),
    ],
)
def test_the_rule_sees_the_doors_and_nothing_else(source: str, found: list[str]) -> None:
    assert list(calls(source, "example.py")) == found
