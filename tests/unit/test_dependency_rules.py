"""The layering of docs/architecture.md, read from the source. The core (domain, state,
service, workers and the tracing API wrapper) imports, of ours, only what the doc lists:
`domain/` itself and `errors.py` (the one error tree); `state/` adds the tracing API;
`service/` adds `state/`; `workers/` adds `service/`. So no adapter (store, index, embed,
summarize, tokens), no edge (api, inspector, mcp), no config and not the composition root;
nor, of others', a framework, a driver or the OpenTelemetry SDK. Only config/loading.py
reads the environment."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "episodic"

# Never in the core, of others' packages: the OpenTelemetry SDK side, the transports, SQL.
THIRD_PARTY_FORBIDDEN = (
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "opentelemetry.instrumentation",
    "grpc",
    "sqlalchemy",
)
TRACING = "episodic.telemetry.tracing"  # the OpenTelemetry API, as the core sees it
# Of ours, what each part of the core may import: anything else of `episodic` fails.
OURS_ALLOWED = {
    "domain": ("episodic.domain", "episodic.errors"),
    "state": ("episodic.state", "episodic.domain", "episodic.errors", TRACING),
    "service": ("episodic.service", "episodic.state", "episodic.domain", "episodic.errors", TRACING),
    "workers": (
        "episodic.workers",
        "episodic.service",
        "episodic.state",
        "episodic.domain",
        "episodic.errors",
        TRACING,
    ),
    "telemetry/tracing.py": (),
}
FORBIDDEN_EXTRA = {"domain": ("opentelemetry",)}  # the pure rules do not even trace
ENVIRONMENT_READER = PACKAGE / "config" / "loading.py"
GENERATED = PACKAGE / "v1"
# Known, reported and not yet fixed: modules other than config/loading.py reading the environment.
# Equality below makes a fixed entry fail too, so this list only shrinks.
PENDING_READERS: list[str] = []


def modules(where: str) -> list[Path]:
    path = PACKAGE / where
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def module_name(module: Path) -> str:
    parts = module.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: Path, source: str | None = None) -> Iterator[str]:
    """Every module named by an import statement of `module` (or of `source`, standing in
    its place), wherever it stands (TYPE_CHECKING too); a relative import is resolved
    against the module's package."""
    package = module_name(module).split(".")
    if module.name != "__init__.py":
        package = package[:-1]
    text = module.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(module))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            if node.module:
                yield ".".join([*base, node.module])
            else:  # from . import x: each name may be a module
                yield from (".".join([*base, alias.name]) for alias in node.names)


def is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def refused(where: str, name: str) -> bool:
    """Whether the core part `where` may not import module `name`."""
    if is_under(name, "episodic"):
        return not any(is_under(name, allowed) for allowed in OURS_ALLOWED[where])
    forbidden = (*THIRD_PARTY_FORBIDDEN, *FORBIDDEN_EXTRA.get(where, ()))
    return any(is_under(name, package) for package in forbidden)


CASES = [(where, module) for where in OURS_ALLOWED for module in modules(where)]


@pytest.mark.parametrize(("where", "module"), CASES, ids=[str(m.relative_to(PACKAGE)) for _, m in CASES])
def test_the_core_imports_no_framework_adapter_edge_config_or_wiring(where: str, module: Path) -> None:
    found = [name for name in imported(module) if refused(where, name)]
    assert not found, f"{module.relative_to(PACKAGE)} imports {found}"


OUTSIDE_THE_CORE = (
    "episodic.index",
    "episodic.embed",
    "episodic.config",
    "episodic.edges.inspector",
    "episodic.edges.mcp",
    "episodic.summarize",
    "episodic.tokens",
    "episodic.store.writer",
    "episodic.edges.grpc.status",
    "episodic.bootstrap",
    "episodic.telemetry.setup",
    "episodic.edges.keys",
    "grpc",
    "sqlalchemy",
    "opentelemetry.sdk.trace",
)


@pytest.mark.parametrize("where", sorted(OURS_ALLOWED))
@pytest.mark.parametrize("name", OUTSIDE_THE_CORE)
def test_the_rules_refuse_what_lies_outside_the_core(where: str, name: str) -> None:
    assert refused(where, name)


def test_the_rules_allow_what_the_architecture_doc_allows() -> None:
    assert not refused("domain", "episodic.errors") and not refused("domain", "episodic.domain.model")
    assert refused("domain", "episodic.state.health") and refused("domain", TRACING)
    assert refused("domain", "opentelemetry.trace") and not refused("service", "opentelemetry.trace")
    assert not refused("service", "episodic.state.working_set") and refused("service", "episodic.workers")
    assert not refused("workers", "episodic.service.episodes") and not refused("workers", TRACING)
    assert refused("state", "episodic.service") and refused("state", "episodic.workers.feed")


def test_relative_imports_are_resolved_before_the_rules_apply() -> None:
    at = PACKAGE / "service" / "example.py"  # never written: only its place counts
    source = "from ..index import FaissVectorIndex\nfrom . import recall\nfrom .. import config\n"
    assert list(imported(at, source)) == ["episodic.index", "episodic.service.recall", "episodic.config"]


ENVIRONMENT_NAMES = ("environ", "environb", "getenv", "getenvb")


def reads_environment(module: Path) -> bool:
    """`os.environ` or `os.getenv` (or `from os import environ/getenv`) in the code."""
    return any(_names_environment(node) for node in ast.walk(ast.parse(module.read_text(), str(module))))


def _names_environment(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
        return node.attr in ENVIRONMENT_NAMES
    if isinstance(node, ast.ImportFrom) and node.module == "os":
        return any(alias.name in ENVIRONMENT_NAMES for alias in node.names)
    return False


def test_only_config_reads_the_environment() -> None:
    readers = [
        str(module.relative_to(PACKAGE))
        for module in sorted(PACKAGE.rglob("*.py"))
        if module != ENVIRONMENT_READER and GENERATED not in module.parents and reads_environment(module)
    ]
    assert readers == PENDING_READERS
