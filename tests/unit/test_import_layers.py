"""distrun's import graph: one folder is one layer, every import points down the layers, no
circle between modules or between folders, and every `distrun.*` import names something there.

The graph is read from the source (no module is imported): every `import` and `from ... import`
statement under src/distrun, at the top of a module or inside a function, and those under
`if TYPE_CHECKING:` too (an annotation is a dependency as much as a call is). A relative import
is resolved; `from distrun.x import y` is an edge to `distrun.x.y` when that is a module, else
to `distrun.x`, which must then bind `y` at its top level: an import of a `distrun.x` that does
not exist (a module since moved or deleted) fails here, not in a user's hands at run time, even
inside a function no test calls. Not edges: Python importing a package's `__init__` before a
submodule (the root package `distrun` is a face, and every module is inside it), and
`importlib.import_module` with a name in a string (the registry loads a backend that way, and
the root package the SDK).

LAYERS maps each folder of src/distrun (a package) and each top-level module to a layer; no
module inside a folder has a row of its own, so a folder is one layer. A module may import its
own layer and the layers below; an import from a lower layer to a higher one fails, as does any
circle, wherever it is: between modules, and between folders (the graph with each folder drawn
as one point). docs/backends.md ("Layers: what may import what") is the same table. A new module
is placed by its folder; a new folder or top-level module needs a line here.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
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
    "distrun._version": 0,
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
    # the search of an AutoML job, run as the job's one process: it reads tables (data) with FLAML.
    "distrun.automl_search": 4,
    # 5 job loading: a job, pipeline or sweep file read and checked against this machine (paths, data, environments).
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
    "distrun.parallel": 10,
    "distrun.automl": 10,
    "distrun.ui": 10,
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (for a name no module binds: the nearest package holding it)
    where: str  # file:line
    named: str = ""  # what the statement names, when nothing of distrun is that: `distrun.cancel`


def module_files(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Module name -> (its file, whether it is a package's __init__)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
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


def bound_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (inside `if`, `try` and `with` there too):
    what `from module import name` can take from it."""
    names: set[str] = set()
    statements: list[ast.stmt] = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                statements.extend(getattr(node, block, []))
            statements.extend(s for handler in getattr(node, "handlers", []) for s in handler.body)
    return names


def imports(modules: dict[str, tuple[Path, bool]], root: Path = SRC.parent) -> list[Import]:
    """Every import of a distrun module by another (with `named` set where it names nothing);
    `where` is relative to `root`."""
    trees = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, (path, _) in modules.items()}
    bound = {name: bound_names(tree) for name, tree in trees.items()}
    found = []
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        where = path.relative_to(root)
        for node in ast.walk(trees[name]):
            named: list[tuple[str, bool]] = []  # (what is imported, whether distrun has it)
            if isinstance(node, ast.Import):
                named = [(alias.name, alias.name in modules) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                for alias in node.names:
                    full = f"{module}.{alias.name}"
                    if full in modules:
                        named.append((full, True))
                    else:
                        has_it = module in modules and (alias.name == "*" or alias.name in bound[module])
                        named.append((full if module in modules and not has_it else module, has_it))
            for target, exists in named:
                if not (target == "distrun" or target.startswith("distrun.")):
                    continue
                resolved = _known(target, modules)
                if resolved is not None and (resolved != name or not exists):
                    found.append(Import(name, resolved, f"{where}:{node.lineno}", "" if exists else target))
    return found


def folder_of(module: str) -> str:
    """The folder (or top-level module) of src/distrun that holds `module`: `distrun.spec.models`
    -> `distrun.spec`; the root package's `__init__` is `distrun`."""
    return ".".join(module.split(".")[:2])


def layer_of(module: str) -> int | None:
    """The layer of the folder or top-level module holding `module` (None: it has no row, as a
    new top-level module has none until it gets one)."""
    return LAYERS.get(folder_of(module))


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


def folder_edges(found: list[Import]) -> dict[str, set[str]]:
    """The import graph with each folder (and top-level module) drawn as one point."""
    edges: dict[str, set[str]] = {}
    for each in found:
        source, target = folder_of(each.source), folder_of(each.target)
        if source != target:
            edges.setdefault(source, set()).add(target)
    return edges


def _circle_report(found: list[Import], edges: dict[str, set[str]], place: Callable[[str], str]) -> list[str]:
    report = []
    for circle in circles(edges):
        report.append(" -> ".join(circle))
        for a, b in itertools.pairwise(circle):
            lines = [i.where for i in found if (place(i.source), place(i.target)) == (a, b)]
            report.append(f"    {a} -> {b}: {', '.join(lines)}")
    return report


NAMES_NOTHING = "no module of distrun, nor a name one binds"


def unresolved(found: list[Import]) -> list[str]:
    return [f"{i.where}: {i.source} imports {i.named}: {NAMES_NOTHING}" for i in found if i.named]


def test_the_walk_sees_distruns_modules_and_their_imports(graph) -> None:
    modules, found = graph
    assert {"distrun", "distrun.runner.jobs", "distrun.backends.base", "distrun.loading.loader"} <= set(modules)
    # A top-level, a function-level, a TYPE_CHECKING and a relative-free `from package import module` edge.
    edges = {(i.source, i.target) for i in found}
    assert ("distrun.runner.jobs", "distrun.backends.base") in edges
    assert ("distrun.sdk.client", "distrun.runner.download") in edges  # inside a method
    assert ("distrun.backends.registry", "distrun.backends.base") in edges  # under TYPE_CHECKING
    assert ("distrun.runner.unrecorded_cancel", "distrun.core.procfs") in edges  # from distrun.core import procfs


def test_layers_list_folders() -> None:
    """Each row is a folder of src/distrun or a module at its top; every folder has a row."""
    on_disk = {f"distrun.{p.stem}" for p in PACKAGE.iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    folders = {f"distrun.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    rows = set(LAYERS) - {"distrun"}
    assert sorted(rows - on_disk - folders) == [], "rows that are no folder or top-level module of src/distrun"
    assert sorted(folders - rows) == [], "folders without a row in LAYERS (and docs/backends.md)"


def test_every_module_has_a_layer(graph) -> None:
    modules, _ = graph
    unplaced = sorted(m for m in modules if layer_of(m) is None)
    assert unplaced == [], f"put these in LAYERS (and docs/backends.md): {unplaced}"


def test_every_distrun_import_names_a_module_or_a_name_it_binds(graph) -> None:
    _, found = graph
    assert unresolved(found) == [], "imports of what distrun does not have:\n" + "\n".join(unresolved(found))


def test_no_import_circle(graph) -> None:
    _, found = graph
    edges: dict[str, set[str]] = {}
    for each in found:
        edges.setdefault(each.source, set()).add(each.target)
    report = _circle_report(found, edges, lambda module: module)
    assert report == [], "import circles:\n" + "\n".join(report)


def test_no_circle_between_folders(graph) -> None:
    _, found = graph
    report = _circle_report(found, folder_edges(found), folder_of)
    assert report == [], "folders that import each other in a circle:\n" + "\n".join(report)


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


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "distrun"


def test_the_walk_catches_what_names_nothing_and_a_circle_of_folders(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "distrun/__init__.py": "",
            "distrun/spec/__init__.py": "",
            "distrun/spec/models.py": "from distrun.data.places import where\nJOB = 1\n",
            "distrun/data/__init__.py": "",
            "distrun/data/places.py": (
                "from distrun.spec.models import JOB\n"
                "from distrun.spec import models, gone\n"
                "def where():\n"
                "    from distrun.cancel import cancel_job  # deleted since\n"
                "    import distrun.spec.models, distrun.spec.old\n"
                "    from distrun.spec.models import JOB, NOT_THERE\n"
                "    from .places import where\n"
            ),
        },
    )
    modules = module_files(package)
    found = imports(modules, tmp_path)
    assert unresolved(found) == [
        f"distrun/data/places.py:{line}: distrun.data.places imports {named}: {NAMES_NOTHING}"
        for line, named in [
            (2, "distrun.spec.gone"),
            (4, "distrun.cancel"),
            (5, "distrun.spec.old"),
            (6, "distrun.spec.models.NOT_THERE"),
        ]
    ]
    # No two modules import each other, but the folders spec and data do.
    modules_only = {}
    for each in found:
        modules_only.setdefault(each.source, set()).add(each.target)
    assert circles({a: b - {a} for a, b in modules_only.items()}) == [
        ["distrun.data.places", "distrun.spec.models", "distrun.data.places"]
    ]
    assert circles(folder_edges(found)) == [["distrun.data", "distrun.spec", "distrun.data"]]


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
