"""Imports run one way (docs/architecture.md, issue 39 item 3): each room of `hermes_otel/` imports only rooms
below it in ROOMS, and no modules import each other in a circle. Read from the source (every `import` statement,
at any depth: a function-level import is an import too), never by importing anything."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import hermes_otel

PACKAGE = Path(hermes_otel.__file__).resolve().parent
# Top to bottom: what Hermes calls first, what everything uses last. `__init__` (the package's face) may import
# anything.
ROOMS = ("plugin", "runtime", "cli", "testing", "dashboard", "tab", "capture", "tracking", "middleware", "telemetry",
         "emitter", "exporters", "local", "cost", "config", "semconv", "_internal", "redaction", "hermes_compat",
         "version")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """(the module of ours each import statement names, its line)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:  # `from . import x` names a module; `from .m import x` names m
                yield (f"{base}.{alias.name}" if node.module is None else base), node.lineno


def _graph() -> dict[str, dict[str, int]]:
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for path in PACKAGE.rglob("*.py"):
        source = _module_name(path)
        for target, line in _imports(path):
            while target and target not in modules:  # `from .m import name`: the module is m
                target = target.rpartition(".")[0]
            if target.startswith("hermes_otel.") and target != source:
                graph.setdefault(source, {}).setdefault(target, line)
    return graph


def _room(module: str) -> str:
    return module.split(".")[1]


def test_every_room_is_named_and_imports_only_rooms_below_it():
    rooms = {_room(_module_name(p)) for p in PACKAGE.rglob("*.py") if _module_name(p) != "hermes_otel"}
    assert rooms == set(ROOMS), sorted(rooms ^ set(ROOMS))
    upward = [f"{source}:{line} imports {target}"
              for source, targets in _graph().items() if source != "hermes_otel"
              for target, line in targets.items()
              if _room(source) != _room(target) and ROOMS.index(_room(target)) < ROOMS.index(_room(source))]
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    graph = _graph()
    circles, seen, stack = [], set(), []

    def visit(module: str) -> None:  # depth-first: an edge back into the stack closes a circle
        if module in stack:
            circles.append(stack[stack.index(module):] + [module])
            return
        if module in seen:
            return
        seen.add(module)
        stack.append(module)
        for target in graph.get(module, {}):
            if target != "hermes_otel":  # every module's package: importing a submodule runs it first anyway
                visit(target)
        stack.pop()

    for module in sorted(graph):
        if module != "hermes_otel":
            visit(module)
    assert circles == []
