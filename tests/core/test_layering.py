"""The arrows run one way: cli → ui, io, core; ui → state, core, io; state → core, io; io → core;
core → nothing in the
package. core, io and state never import Qt (nor torch/transformers, which the app must never need):
checked in a fresh interpreter, importing every module of both. The import graph — read from
the AST of every module, relative imports resolved, imports inside functions included, and
importing `a.b.c` counted as importing the package `a.b` too (its __init__ runs first) — has no
cycle between packages, between the subpackages and modules of one package, or between modules;
a cycle found is named as a path."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import transformer_stepper

PACKAGE = "transformer_stepper"
SOURCE = Path(transformer_stepper.__file__).parent
ROOT = "(root)"             # transformer_stepper/__init__.py: the public API

# which part of the package may import which; "runtime" (process tuning) is the entry points'
ALLOWED = {
    "core": set(),
    "io": {"core"},
    "state": {"core", "io"},                   # what the app shows and its requests, without Qt
    "ui": {"core", "io", "state", "runtime", ROOT},     # runtime: the app tunes the process; ROOT: __version__
    "cli": {"ui", "io", "core", "runtime", "desktop_entry", ROOT},
    "desktop_entry": {"core", "io"},
    "runtime": {"core"},
    "resources": set(),
    ROOT: {"core", "io"},
    "__main__": {"cli"},
}

SCRIPT = r"""
import importlib, json, pkgutil, sys
import transformer_stepper, transformer_stepper.cli
imported = ["transformer_stepper", "transformer_stepper.cli"]
for package in ("transformer_stepper.core", "transformer_stepper.io", "transformer_stepper.state"):
    module = importlib.import_module(package)
    imported.append(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
banned = ("PySide6", "pyqtgraph", "shiboken6", "torch", "transformers")
loaded = sorted({name.split(".")[0] for name in sys.modules} & set(banned))
print(json.dumps({"imported": imported, "loaded": loaded}))
"""


def test_core_io_and_state_import_no_qt_and_no_torch():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"transformer_stepper.core.model.forward", "transformer_stepper.core.model.tokenize",
            "transformer_stepper.io.loader", "transformer_stepper.io.safetensors_file",
            "transformer_stepper.state.session"} <= set(report["imported"])
    assert report["loaded"] == [], f"core/io/state pulled in {report['loaded']}"


# -- the import graph ---------------------------------------------------------------------
def package_modules(source: Path = SOURCE) -> dict[str, Path]:
    """Dotted name -> source file, for every module of the package (a package is its __init__)."""
    modules = {}
    for path in sorted(source.rglob("*.py")):
        parts = path.relative_to(source).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((PACKAGE, *parts))] = path
    return modules


def import_edges(modules: dict[str, Path]) -> list[tuple[str, str, bool]]:
    """(importer, imported module, at import time) for every import of a module of the
    package; imports inside a function run later, when it is called."""
    edges = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]

        def target(module: str, imported_name: str) -> str:
            submodule = f"{module}.{imported_name}"
            return submodule if submodule in modules else module

        def visit(node: ast.AST, deferred: bool) -> None:
            for child in ast.iter_child_nodes(node):
                later = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    edges.extend((name, alias.name, not later) for alias in child.names
                                 if alias.name.split(".")[0] == PACKAGE)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = package.split(".")[:len(package.split(".")) - child.level + 1]
                        module = ".".join(base + ([child.module] if child.module else []))
                    else:
                        module = child.module or ""
                    if module.split(".")[0] == PACKAGE:
                        edges.extend((name, target(module, alias.name), not later) for alias in child.names)
                visit(child, later)

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return edges


def with_parent_packages(edges, modules) -> list[tuple[str, str, bool]]:
    """Importing `a.b.c` runs `a.b`'s __init__ first: an edge to every enclosing package the
    importer is not itself inside (the top package is left out: everything is inside it)."""
    implied = []
    for importer, imported, at_import in edges:
        parts = imported.split(".")
        for depth in range(2, len(parts)):
            package = ".".join(parts[:depth])
            if package in modules and not (importer == package or importer.startswith(package + ".")):
                implied.append((importer, package, at_import))
    return edges + implied


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node, or a node importing itself
    (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through the first node of a strongly connected component, as a path that
    ends where it starts (breadth first, so the shortest)."""
    start, members = component[0], set(component)
    came_from = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for other in sorted(graph.get(node, ())):
            if other == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return [start] + path[::-1][1:] + [start] if node != start else [start, start]
            if other in members and other not in came_from:
                came_from[other] = node
                queue.append(other)
    return component


def named_cycles(graph: dict[str, set[str]]) -> list[str]:
    prefix = PACKAGE + "."
    return [" -> ".join(node.removeprefix(prefix) for node in cycle_path(graph, component))
            for component in cycles(graph)]


def part(module: str, depth: int) -> str:
    """The package (depth 1: core, io, ui, cli, ...) or the subpackage or module inside one
    (depth 2: ui.stepper.stages, ui.session, ...) that `module` belongs to."""
    parts = module.split(".")[1:]
    return ".".join(parts[:depth]) if parts else ROOT


def graph_of(edges, key) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, _ in edges:
        a, b = key(importer), key(imported)
        if a != b:
            graph[a].add(b)
    return graph


def test_the_graph_is_read_right():
    edges = set(import_edges(package_modules()))
    assert ("transformer_stepper.ui.main_window", "transformer_stepper.core.model.stages", True) in edges
    assert ("transformer_stepper.cli.trace", "transformer_stepper.io.loader", False) in edges
    assert ("transformer_stepper.io.loader", "transformer_stepper.io.families", True) in edges


def test_packages_import_one_way():
    edges = import_edges(package_modules())
    wrong = sorted({(importer, imported) for importer, imported, _ in edges
                    if part(importer, 1) != part(imported, 1)
                    and part(imported, 1) not in ALLOWED[part(importer, 1)]})
    assert wrong == [], "imports against the arrows: " + "; ".join(f"{a} -> {b}" for a, b in wrong)
    graph = graph_of(edges, lambda module: part(module, 1))
    assert named_cycles(graph) == []
    assert cycles({name: set(allowed) for name, allowed in ALLOWED.items()}) == []


# inside core, the rooms: the math a reader came for, the recorded pass over it, readings of
# that record; training builds and trains networks from the math alone
CORE_ALLOWED = {
    "core.model": set(),
    "core.trace": {"core.model"},
    "core.analysis": {"core.model", "core.trace", "core.training"},
    "core.training": {"core.model", "core.trace"},
}


def test_core_rooms_import_one_way():
    """model <- trace <- analysis: the math never reads the record, the record never reads its
    readings. Every module of core lives in a room (no module left loose at core's top)."""
    modules = package_modules()
    loose = sorted(name for name in modules if part(name, 1) == "core"
                   and name != f"{PACKAGE}.core" and part(name, 2) not in CORE_ALLOWED)
    assert loose == [], f"modules of core outside its rooms: {loose}"
    edges = import_edges(modules)
    wrong = sorted({(importer, imported) for importer, imported, _ in edges
                    if part(importer, 1) == "core" and part(imported, 1) == "core"
                    and part(importer, 2) in CORE_ALLOWED and part(imported, 2) in CORE_ALLOWED
                    and part(importer, 2) != part(imported, 2)
                    and part(imported, 2) not in CORE_ALLOWED[part(importer, 2)]})
    assert wrong == [], "core imports against model <- trace <- analysis: " + "; ".join(
        f"{a} -> {b}" for a, b in wrong)


def test_no_cycle_between_the_parts_of_a_package():
    """e.g. ui.stepper.stages and ui.export: if each imports the other, neither stands on its own."""
    graph = graph_of(import_edges(package_modules()), lambda module: part(module, 2))
    assert named_cycles(graph) == []


def test_no_import_cycle_between_modules():
    """Imports inside functions count: a cycle hidden in a function is still a cycle."""
    modules = package_modules()
    graph = graph_of(with_parent_packages(import_edges(modules), modules), lambda module: module)
    assert named_cycles(graph) == []


def test_a_cycle_would_be_found_and_named():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert named_cycles({"a": {"b", "x"}, "b": {"c"}, "c": {"a", "b"}, "x": set()}) == ["a -> b -> c -> a"]
    assert named_cycles({"a": {"a"}}) == ["a -> a"]


def test_a_cycle_inside_a_function_or_through_a_package_would_be_found(tmp_path):
    """The reader on a made-up package: p.a imports p.b inside a function, p.b imports p.sub.c,
    whose package p.sub imports p.a when it runs."""
    files = {"__init__.py": "", "a.py": "def f():\n    from . import b\n",
             "b.py": "from .sub.c import x\n", "sub/__init__.py": "from .. import a\n",
             "sub/c.py": "x = 1\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = package_modules(tmp_path)
    graph = graph_of(with_parent_packages(import_edges(modules), modules), lambda module: module)
    assert named_cycles(graph) == ["a -> b -> sub -> a"]
