"""distrun's import graph: no circle, and every import between parts points down the layers.

The graph is read from the source (no module is imported): every `import` and `from ... import`
statement under src/distrun, at the top of a module or inside a function, and those under
`if TYPE_CHECKING:` too (an annotation is a dependency as much as a call is). A relative import
is resolved; `from distrun.x import y` is an edge to `distrun.x.y` when that is a module, else
to `distrun.x`. Not edges: Python importing a package's `__init__` before a submodule (the root
package `distrun` is a face, and every module is inside it), and `importlib.import_module` with
a name in a string (the registry loads a backend that way, and the root package the SDK).

LAYERS maps each part of distrun (a package, a top-level module, or a module that sits apart
from its package) to a layer; the longest matching name wins. A module may import its own
layer and the layers below; an import from a lower layer to a higher one fails, as does any
circle, wherever it is. docs/backends.md ("Layers: what may import what") is the same table.
A new module is placed by its package; a new top-level module needs a line here.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "distrun"

LAYER_NAMES = {
    0: "core",
    1: "spec",
    2: "plan",
    3: "store",
    4: "data, environments, metrics",
    5: "job loading",
    6: "preparation",
    7: "agent",
    8: "backends",
    9: "orchestration",
    10: "faces",
}

LAYERS = {
    # 0 core: words and helpers every layer uses; nothing of distrun's job machinery.
    "distrun.core": 0,
    "distrun.constants": 0,
    "distrun.identity": 0,
    # 1 spec: what a job says (models, YAML with positions, older forms, overrides) and config.yaml's sections.
    "distrun.spec": 1,
    # 2 plan: pure planning, and the restart policy the plans and backends share (with its attempts' logs).
    "distrun.plan": 2,
    "distrun.restarts": 2,
    # 3 store: the job folder layout and the job index.
    "distrun.store": 3,
    # 4 what a job uses and leaves: data, environments, metrics.
    "distrun.data": 4,
    "distrun.environments": 4,
    "distrun.metrics": 4,
    # 5 job loading: a job file read and checked against this machine (paths, data, environments).
    "distrun.loading": 5,
    # 6 preparation: compute types and targets, a job recorded with its folder filled (PreparedJob),
    # and what is said once about a job on a compute type (job_notes).
    "distrun.prepare": 6,
    # 7 agent: the engine-free node agent.
    "distrun.agent": 7,
    # 8 backends: the contract, the registry and every engine.
    "distrun.backends": 8,
    # 9 orchestration: what the faces call (plan, submit, run, get, cancel, logs, download); the one
    # runner of `distrun run` (attach) and what it prints (report: a record in words; follow: the log files).
    "distrun.runner": 9,
    # 10 faces: the CLI (its commands, entry point and text views), the SDK, the web UI.
    "distrun": 10,
    "distrun.__main__": 10,
    "distrun.cli": 10,
    "distrun.sdk": 10,
    "distrun.v1": 10,
    "distrun.entities": 10,
    "distrun.dsl": 10,
    "distrun.sweep": 10,
    "distrun.ui": 10,
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    where: str  # file:line


def module_files() -> dict[str, tuple[Path, bool]]:
    """Module name -> (its file, whether it is a package's __init__)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        found[name] = (path, is_package)
    return found


def _known(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module `name` is, or the nearest package holding it (None: not distrun's)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports(modules: dict[str, tuple[Path, bool]]) -> list[Import]:
    found = []
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        where = path.relative_to(SRC.parent)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                targets = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in modules]
                targets = targets if len(targets) == len(node.names) else [*targets, module]
            for target in targets:
                if not (target == "distrun" or target.startswith("distrun.")):
                    continue
                resolved = _known(target, modules)
                if resolved is not None and resolved != name:
                    found.append(Import(name, resolved, f"{where}:{node.lineno}"))
    return found


def layer_of(module: str) -> int | None:
    """The layer of the longest name in LAYERS that holds `module`; the row `distrun` is the root
    package's own `__init__` only, so a new top-level module has none until it gets a row."""
    if module == "distrun":
        return LAYERS["distrun"]
    name = module
    while "." in name:
        if name in LAYERS:
            return LAYERS[name]
        name = name.rpartition(".")[0]
    return None


def _describe(layer: int) -> str:
    return f"layer {layer} ({LAYER_NAMES[layer]})"


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle [a, b, ..., a] through each group of modules that import each other in a ring."""
    found = []
    for group in _tangles(edges):
        start = min(group)
        paths = {start: [start]}  # breadth first, inside the group: the shortest way back to `start`
        queue = [start]
        while queue:
            node = queue.pop(0)
            for nxt in sorted(edges.get(node, ())):
                if nxt == start:
                    found.append([*paths[node], start])
                    queue = []
                    break
                if nxt in group and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    queue.append(nxt)
    return sorted(found)


def _tangles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, tuple[Path, bool]], list[Import]]:
    modules = module_files()
    return modules, imports(modules)


def test_the_walk_sees_distruns_modules_and_their_imports(graph) -> None:
    modules, found = graph
    assert {"distrun", "distrun.runner.jobs", "distrun.backends.base", "distrun.loading.loader"} <= set(modules)
    # A top-level, a function-level, a TYPE_CHECKING and a relative-free `from package import module` edge.
    edges = {(i.source, i.target) for i in found}
    assert ("distrun.runner.jobs", "distrun.backends.base") in edges
    assert ("distrun.sdk.client", "distrun.runner.download") in edges  # inside a method
    assert ("distrun.backends.registry", "distrun.backends.base") in edges  # under TYPE_CHECKING
    assert ("distrun.runner.unrecorded_cancel", "distrun.core.procfs") in edges  # from distrun.core import procfs


def test_every_module_has_a_layer(graph) -> None:
    modules, _ = graph
    unplaced = sorted(m for m in modules if layer_of(m) is None)
    assert unplaced == [], f"put these in LAYERS (and docs/backends.md): {unplaced}"


def test_no_import_circle(graph) -> None:
    _, found = graph
    edges: dict[str, set[str]] = {}
    for each in found:
        edges.setdefault(each.source, set()).add(each.target)
    report = []
    for circle in circles(edges):
        report.append(" -> ".join(circle))
        for a, b in itertools.pairwise(circle):
            report.append(f"    {a} -> {b}: {', '.join(i.where for i in found if (i.source, i.target) == (a, b))}")
    assert report == [], "import circles:\n" + "\n".join(report)


def test_every_import_points_down_the_layers(graph) -> None:
    _, found = graph
    upward = []
    for each in found:
        source, target = layer_of(each.source), layer_of(each.target)
        if source is not None and target is not None and target > source:
            upward.append(
                f"{each.where}: {each.source} ({_describe(source)}) imports {each.target} ({_describe(target)})"
            )
    assert upward == [], "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_the_checks_catch_a_circle_and_an_upward_import() -> None:
    assert circles({"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"e"}, "e": {"d"}}) == [
        ["a", "b", "c", "a"],
        ["d", "e", "d"],
    ]
    assert circles({"a": {"b"}, "b": {"c"}}) == []
    assert layer_of("distrun.store.index") < layer_of("distrun.agent.watchdog")
    assert layer_of("distrun.spec.models") < layer_of("distrun.data.locations") < layer_of("distrun.loading.loader")
    assert layer_of("distrun.some_new_module") is None  # placed by nothing: test_every_module_has_a_layer says so


def test_the_documented_table_is_this_one() -> None:
    docs = (SRC.parent / "docs" / "backends.md").read_text(encoding="utf-8")
    section = docs.split("## Layers: what may import what", 1)[1].split("\n## ", 1)[0]
    for layer, title in LAYER_NAMES.items():
        names = sorted(name for name, number in LAYERS.items() if number == layer)
        row = next((line for line in section.splitlines() if line.startswith(f"| {layer} |")), None)
        assert row is not None, f"docs/backends.md has no row for layer {layer}"
        assert f"| {title} |" in row, f"layer {layer} is {title!r} here: {row}"
        for name in names:
            assert f"`{name}`" in row, f"docs/backends.md's layer {layer} does not list {name}"
