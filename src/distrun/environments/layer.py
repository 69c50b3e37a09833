"""A job's own writable layer over its cached, read-only environment, in the job's folder.

The cached environment (`builder`) is shared by every job with the same spec, read-only and
sealed, so a job's `pip install` must go somewhere else: a small virtual environment of the
job's own, made from the same base interpreter, whose site-packages adds the cached one after
itself. Ranks run its `python`; what pip installs lands in the layer and comes first on
sys.path, so it shadows a cached package of the same name, and the cached environment (and its
seal) stays as it was built. The layer is removed with the job folder and never shared.

    <layer>/pyvenv.cfg              the built environment's own: the same base interpreter
    <layer>/bin/python, python3...  links to that interpreter
    <layer>/bin/<script>            each console script of the built environment (pip included),
                                    run by the layer's python instead of the cached one's
    <layer>/lib/pythonX.Y/site-packages/
        distrun-built-environment.pth   adds the built environment's site-packages (and runs
                                        its .pth files) after the layer's own
    <layer>/lib64 -> lib            where the built environment has one

Over a system interpreter (one that is no virtual environment: the machine's python3, a
pyenv or uv-managed install) the layer is the standard form of the same thing: its pyvenv.cfg
says `include-system-site-packages = true` (Python itself then adds the interpreter's
site-packages after the layer's own), and it has no link file.

It is written here, not by `uv venv` or `python -m venv`: a few folders, links and small files,
about a millisecond, paid at every job's start. distrun writes the layer once, into a folder it
just created, and never reads it back: whatever a job does to it afterwards concerns that job only.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection
from pathlib import Path

from distrun.core.file_modes import DIR_MODE, create_file

LINK_FILE = "distrun-built-environment.pth"
_SCRIPT_MODE = 0o775  # the umask narrows it, as for every file distrun creates
_HEAD = 4096  # a console script's launcher lines are in its first bytes
_SHEBANG_LIMIT = 127  # longer `#!` lines are cut by older kernels: use the /bin/sh form then


def layer_variables(built: Path | None, layer: Path) -> dict[str, str]:
    """The ranks' PATH (the layer's bin/, then the built environment's) and VIRTUAL_ENV. `built`
    None: a system interpreter's layer, whose bin/ (/usr/bin, say) keeps its place on PATH."""
    path = os.environ.get("PATH") or os.defpath
    first = (str(layer / "bin"),) if built is None else (str(layer / "bin"), str(built / "bin"))
    return {"PATH": os.pathsep.join((*first, path)), "VIRTUAL_ENV": str(layer)}


def make_layer(built: Path, layer: Path, scripts: Collection[str] | None = None) -> None:
    """Create `layer` (which must not exist) over the finished environment `built`; `scripts`:
    the only console scripts to run by the layer's python (None: every one)."""
    built_site = _site_packages(built)
    site_name = built_site.parent.name  # python3.11, python3.13t, pypy3.10
    _make_folders(layer, site_name, lib64=(built / "lib64").is_symlink())
    create_file(layer / "pyvenv.cfg", (built / "pyvenv.cfg").read_bytes())
    site = layer / "lib" / site_name / "site-packages"
    line = f"import site; site.addsitedir({str(built_site)!r})\n"
    create_file(site / LINK_FILE, line.encode())
    _link_interpreter(os.path.realpath(built / "bin" / "python"), built, layer, site_name)
    _copy_scripts(built, layer, scripts)


def make_system_layer(prefix: Path, executable: Path, layer: Path, scripts: Collection[str] | None = None) -> None:
    """Create `layer` (which must not exist) over the system interpreter `executable` installed
    under `prefix` (the Python running this code: its version names the layer's folders)."""
    import sysconfig  # only here: a venv's layer, made at every job's start, does without it

    site_name = Path(sysconfig.get_path("purelib", "posix_prefix", vars={"base": "/", "platbase": "/"})).parent.name
    _make_folders(layer, site_name, lib64=False)
    interpreter = os.path.realpath(executable)
    config = (
        f"home = {os.path.dirname(interpreter)}\n"
        "include-system-site-packages = true\n"
        f"version = {'.'.join(str(part) for part in sys.version_info[:3])}\n"
        f"executable = {interpreter}\n"
    )
    create_file(layer / "pyvenv.cfg", config.encode())
    _link_interpreter(interpreter, prefix, layer, site_name)
    _copy_scripts(prefix, layer, scripts)


def _make_folders(layer: Path, site_name: str, lib64: bool) -> None:
    layer.mkdir(mode=DIR_MODE)  # never an existing folder, nor through a link
    for folder in ("bin", "lib", f"lib/{site_name}", f"lib/{site_name}/site-packages"):
        (layer / folder).mkdir(mode=DIR_MODE)
    if lib64:
        os.symlink("lib", layer / "lib64")


def _link_interpreter(interpreter: str, built: Path, layer: Path, site_name: str) -> None:
    """bin/python (a link to the interpreter: Python finds the layer's pyvenv.cfg beside the link)
    and the other names the environment below gives it."""
    os.symlink(interpreter, layer / "bin" / "python")
    for name in _interpreter_names(built, site_name):
        os.symlink("python", layer / "bin" / name)


def _site_packages(built: Path) -> Path:
    found = sorted(built.glob("lib/*/site-packages"))
    if len(found) != 1:
        raise OSError(f"not a built environment (expected one lib/*/site-packages folder, found {len(found)})")
    return found[0]


def _interpreter_names(built: Path, site_name: str) -> list[str]:
    """python3, python3.11 ...: the other names the built environment gives its interpreter."""
    names = {"python3", site_name} | {e.name for e in os.scandir(built / "bin") if _is_interpreter_name(e.name)}
    return sorted(name for name in names - {"python"} if _is_interpreter_name(name))


def _is_interpreter_name(name: str) -> bool:
    return re.fullmatch(r"python[0-9.]*t?", name) is not None


def _copy_scripts(built: Path, layer: Path, only: Collection[str] | None = None) -> None:
    """Each console script the built environment's python runs, run by the layer's instead: it
    then sees what the job installed, and `pip` installs into the layer. Other programs in the
    built bin/ stay there (second on PATH)."""
    launcher = _launcher(layer / "bin" / "python")
    links: dict[str, str] = {}
    for entry in os.scandir(built / "bin"):
        if _is_interpreter_name(entry.name) or (only is not None and entry.name not in only):
            continue
        if entry.is_symlink():
            links[entry.name] = os.readlink(entry.path)
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        with open(entry.path, "rb") as handle:
            head = handle.read(_HEAD)
            body = _script_body(head, built)
            if body is None:
                continue
            rest = handle.read()
        create_file(layer / "bin" / entry.name, launcher + head[body:] + rest, _SCRIPT_MODE)
    # pyenv's pip is a link to pip3.11 beside it: the same link to the layer's copy
    for name, target in links.items():
        if "/" not in target and (layer / "bin" / target).is_file():
            os.symlink(target, layer / "bin" / name)


def _script_body(head: bytes, built: Path) -> int | None:
    """Where a console script's Python code starts, if its launcher runs the built environment's
    python (`#!<built>/bin/python`, or the `/bin/sh` form installers write for long paths)."""
    python = re.escape(os.fsencode(built / "bin")) + rb"/python[0-9.]*t?"
    # uv puts the interpreter in single quotes; pip (distlib) leaves it bare, or puts it in double
    # quotes when it holds a space.
    quoted = rb"(?:'" + python + rb"'|\"" + python + rb"\"|" + python + rb")"
    found = re.match(rb"#!" + python + rb"[ \t]*\r?\n", head) or re.match(
        rb"#!/bin/sh\r?\n'''exec' " + quoted + rb" \"\$0\" \"\$@\"\r?\n' '''(?:\r?\n)?", head
    )
    return found.end() if found else None


def _launcher(python: Path) -> bytes:
    path = os.fsencode(python)
    if len(path) + 2 <= _SHEBANG_LIMIT and b" " not in path and b"'" not in path:
        return b"#!" + path + b"\n"
    quoted = path.replace(b"'", b"'\\''")
    return b"#!/bin/sh\n'''exec' '" + quoted + b"' \"$0\" \"$@\"\n' '''\n"
