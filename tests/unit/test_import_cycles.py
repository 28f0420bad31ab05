"""No module of the package imports itself back, directly or around a loop, by any import it
runs: at the top or inside a function (a lazy import hides a cycle; it does not break it).
Imports under `if TYPE_CHECKING:` never run and do not count."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.unit.test_dependency_rules import GENERATED, PACKAGE, module_name


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _runtime_imports(other)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _runtime_imports(child)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The package's modules `path` imports when its code runs (a `from a import b` of a
    submodule b names a.b; a name of a module names the module)."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
            continue
        base = ".".join(package[: len(package) - node.level + 1] if node.level else [])
        module = ".".join(p for p in (base, node.module or "") if p)
        for alias in node.names:
            submodule = f"{module}.{alias.name}"
            if submodule in known:
                found.add(submodule)
            elif module in known:
                found.add(module)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = [p for p in sorted(PACKAGE.rglob("*.py")) if GENERATED not in p.parents]
    known = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, known) for p in paths}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each group of modules that import each other, around some loop, sorted."""
    reach = {node: reachable(graph, node) for node in graph}
    groups = {
        frozenset({node} | {other for other in reach[node] if node in reach.get(other, ())})
        for node in graph
        if node in reach[node]
    }
    return sorted(sorted(group) for group in groups)


def test_no_module_imports_itself_back() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles (lazy imports count): " + "; ".join(" <-> ".join(g) for g in found)


def test_the_cycle_finder_finds_a_loop_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_a_lazy_import_counts_and_a_type_checking_one_does_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from episodic.x import A\n"
        "def f():\n    from episodic.y import B\n"
    )
    found = {n.module for n in _runtime_imports(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert found == {"typing", "episodic.y"}
