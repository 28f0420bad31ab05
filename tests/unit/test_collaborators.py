"""Use cases, workers and state take few collaborators (issue 44 item 4): no class of
service/, workers/ or state/ takes more than MAX_PARAMETERS at construction (a dataclass's
init fields, or the parameters of its own __init__). A wider one is split by concept, or
its collaborators grouped into a value that names one; its own state is no parameter
(`field(init=False)`).

`python -m tests.unit.test_collaborators` prints the widest."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

MAX_PARAMETERS = 12
PACKAGES = ("episodic.service", "episodic.workers", "episodic.state")
# Containers, not use cases: one field per use case, for the composition root to hand over.
CONTAINERS = {"service.services.Services"}


def constructor_parameters(cls: type) -> list[str] | None:
    """The names a caller passes to make one; None when the class defines no constructor."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    if "__init__" not in vars(cls):
        return None
    return list(inspect.signature(cls).parameters)


def widths() -> list[tuple[int, str]]:
    """(parameter count, module.Class) of every class defined in PACKAGES, widest first."""
    found: list[tuple[int, str]] = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package_name}.{info.name}")
            for name, cls in vars(module).items():
                if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                    continue
                parameters = constructor_parameters(cls)
                if parameters is not None:
                    found.append((len(parameters), f"{module.__name__.removeprefix('episodic.')}.{name}"))
    return sorted(found, key=lambda row: (-row[0], row[1]))


def test_every_class_is_found() -> None:
    names = {name for _, name in widths()}
    assert {
        "service.context.ContextService",
        "workers.digester.Digester",
        "state.working_set.WorkingSetCache",
    } <= names


def test_no_use_case_worker_or_state_class_takes_more_than_twelve() -> None:
    wide = [
        f"{name}: {count}" for count, name in widths() if count > MAX_PARAMETERS and name not in CONTAINERS
    ]
    assert not wide, f"more than {MAX_PARAMETERS} constructor parameters: {wide}"


if __name__ == "__main__":
    for count, name in widths()[:10]:
        print(f"{count:3d}  {name}")
