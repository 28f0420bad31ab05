"""The generated stubs (`episodic.v1`) stay at the wire: inside the package only the gRPC edge
(`edges/grpc/`, its servicers, converters and the command-line clients of our own server such
as `transfer_client.py`) and `v1/` itself import them; outside it, the clients do. Any import
counts, at the top, inside a function or under TYPE_CHECKING, relative ones resolved; a
`from episodic import v1` names the stubs too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_dependency_rules import GENERATED, PACKAGE, module_name

GRPC_EDGE = PACKAGE / "edges" / "grpc"
STUBS = "episodic.v1"


def named(module: Path, source: str | None = None) -> Iterator[str]:
    """Every module (or name in a module) an import statement of `module` (or of `source`,
    standing in its place) names: `from a import b` names a and a.b."""
    package = module_name(module).split(".")
    if module.name != "__init__.py":
        package = package[:-1]
    text = module.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(module))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            parent = ".".join([*base, *([node.module] if node.module else [])])
            yield parent
            yield from (f"{parent}.{alias.name}" for alias in node.names)


def imports_stubs(module: Path, source: str | None = None) -> bool:
    return any(name == STUBS or name.startswith(STUBS + ".") for name in named(module, source))


def outside_the_edge(module: Path) -> bool:
    return GRPC_EDGE not in module.parents and GENERATED not in module.parents


def test_only_the_grpc_edge_imports_the_generated_stubs() -> None:
    importers = [
        str(module.relative_to(PACKAGE))
        for module in sorted(PACKAGE.rglob("*.py"))
        if outside_the_edge(module) and imports_stubs(module)
    ]
    assert importers == []


@pytest.mark.parametrize(
    "source",
    [
        "from episodic.v1 import episode_service_pb2\n",
        "from episodic import v1\n",
        "import episodic.v1.episode_service_pb2_grpc\n",
        "from ..v1.episode_service_pb2_grpc import EpisodeServiceStub\n",
        "def later() -> None:\n    from episodic.v1 import memory_pb2\n",
    ],
)
def test_the_rule_sees_every_way_of_importing_the_stubs(source: str) -> None:
    at = PACKAGE / "cli" / "example.py"  # never written: only its place counts
    assert outside_the_edge(at) and imports_stubs(at, source)


def test_the_rule_leaves_the_edge_and_other_imports_alone() -> None:
    assert not outside_the_edge(GRPC_EDGE / "transfer_client.py") and not outside_the_edge(GENERATED / "x.py")
    at = PACKAGE / "cli" / "example.py"
    assert not imports_stubs(at, "from episodic.edges.grpc.transfer_client import export_user\n")
    assert not imports_stubs(at, "from episodic import config\nimport episodic.v1x\n")
