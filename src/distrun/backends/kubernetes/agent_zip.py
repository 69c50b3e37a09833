"""distrun's modules that a pod runs, as one zip the job's ConfigMap carries: the image needs no distrun.

The pod's command is `python3 <work_dir>/files/distrun.zip distrun.backends.kubernetes.pod_agent`:
Python puts the zip first on sys.path and runs its `__main__.py` (`zip_main`), which checks the
Python version and runs the agent from the zip (zipimport), whatever the image has installed.

What goes in is the import closure of the modules a pod starts (`POD_ENTRY_MODULES`), found by
reading their source: every `import distrun...` and `from distrun... import`, also those inside
functions (they run in the pod too), but not those under `if TYPE_CHECKING:` nor `CLIENT_ONLY`. The pod's side
imports only the standard library; `outside_imports` names any other import the closure has
(tests/unit/test_pod_agent_zip.py keeps it empty). Sources only, no bytecode: the image's Python
version is not known here. Built the same way every time (sorted, fixed times), so the rendered
objects stay a pure function of the job.
"""

from __future__ import annotations

import ast
import functools
import io
import sys
import zipfile
from pathlib import Path

# What a pod runs: its agent, mpirun's remote start (MPI launcher pods) and the helper guard
# (started by distrun processes that start helpers).
POD_ENTRY_MODULES = (
    "distrun.backends.kubernetes.pod_agent",
    "distrun.agent.remote_start",
    "distrun.core.helper_guard",
)
# Imports inside functions that no pod calls, not followed (each would bring the client's side).
CLIENT_ONLY = {
    "distrun.backends.registry": "distrun.backends.backend_for: the client looks a compute type's backend up",
}
ZIP_MAIN = "distrun.backends.kubernetes.zip_main"  # the zip's __main__.py
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the distrun package
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def module_file(name: str) -> Path | None:
    """The source of distrun module `name` (None: not a module, e.g. a name imported from one)."""
    path = PACKAGE_ROOT.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(source: str) -> list[str]:
    """Every module name `source` imports at run time (and `module.name` for `from module import name`)."""
    names: list[str] = []

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _is_type_checking(node.test):  # only for type checkers: never imported when running
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            names.extend(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level or not node.module:
                raise ValueError("distrun's modules import by absolute name")
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)

    Imports().visit(ast.parse(source))
    return names


@functools.cache
def pod_closure(entries: tuple[str, ...] = POD_ENTRY_MODULES) -> dict[str, tuple[str, ...]]:
    """Each distrun module a pod may import (its packages included) -> the other modules it imports."""
    closure: dict[str, tuple[str, ...]] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        path = module_file(name)
        if name in closure or path is None or name in CLIENT_ONLY:
            continue
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # Python imports the packages first
        imports = imported_names(path.read_text(encoding="utf-8"))
        closure[name] = tuple(i for i in imports if i.split(".")[0] != "distrun")
        todo += [i for i in imports if i.split(".")[0] == "distrun"]
    return closure


def outside_imports(closure: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Imports of the closure that are not the standard library: top-level name -> a module importing it."""
    found: dict[str, str] = {}
    for module, imports in sorted(closure.items()):
        for name in imports:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "__future__":
                found.setdefault(top, module)
    return found


def zip_name(module: str) -> str:
    """Where `module`'s source lies in the zip."""
    path = module_file(module)
    assert path is not None, module
    return path.relative_to(PACKAGE_ROOT).as_posix()


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, data, compresslevel=9)


@functools.cache
def agent_zip() -> bytes:
    """The zip every pod runs: the closure's sources and `__main__.py`."""
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w") as archive:
        main_file = module_file(ZIP_MAIN)
        assert main_file is not None
        _add(archive, "__main__.py", main_file.read_bytes())
        for name in sorted(zip_name(m) for m in pod_closure()):
            _add(archive, name, (PACKAGE_ROOT / name).read_bytes())
    return raw.getvalue()
