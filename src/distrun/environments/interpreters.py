"""Which Python interpreters this machine has, by major.minor version.

An environment asking for a Python that is not here is an error before anything starts:
distrun never downloads interpreters (uv's downloads are turned off), it uses the ones
installed where people install them (`search_folders`): distrun's own, `pythonX.Y` in each
folder on PATH, pyenv's versions, the Pythons uv manages, /usr/local/bin and /usr/bin, and
conda's base environment. A name is not an interpreter: pyenv's shims on PATH answer for
every version pyenv knows but run only the selected ones, so an interpreter counts (and is
listed in the error) only once it has run and said its version.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from distrun.core.death_signal import setpriv_prefix
from distrun.environments.installer import uv_binary

SYSTEM_FOLDERS = (Path("/usr/local/bin"), Path("/usr/bin"))
# Where conda's base environment usually is, when CONDA_EXE does not say.
CONDA_BASES = ("miniconda3", "anaconda3", "miniforge3", "mambaforge", "/opt/conda")
_VERSIONED = re.compile(r"^python(\d+\.\d+)$")


@dataclass(frozen=True)
class Interpreter:
    version: str  # major.minor, as the interpreter itself said
    path: Path


def own_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def search_folders(
    environ: Mapping[str, str] | None = None, home: Path | None = None, system: Iterable[Path] = SYSTEM_FOLDERS
) -> list[Path]:
    """The folders looked in, first found first used: PATH, pyenv, uv, the system's, conda's base."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    folders = [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
    pyenv = Path(env.get("PYENV_ROOT") or home / ".pyenv") / "versions"
    folders += [version / "bin" for version in _newest_first(pyenv)]
    data = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    uv_pythons = Path(env.get("UV_PYTHON_INSTALL_DIR") or data / "uv" / "python")
    folders += [version / "bin" for version in _newest_first(uv_pythons)]
    folders += list(system)
    conda_exe = env.get("CONDA_EXE")
    bases = [Path(conda_exe).parent.parent] if conda_exe else []
    bases += [home / name if not name.startswith("/") else Path(name) for name in CONDA_BASES]
    folders += [base / "bin" for base in bases]
    return list(dict.fromkeys(folders))


def _newest_first(folder: Path) -> list[Path]:
    """Version folders (3.8.18, cpython-3.12.1-linux-x86_64-gnu), highest version first."""
    try:
        entries = [entry for entry in folder.iterdir() if entry.is_dir()]
    except OSError:
        return []

    def key(entry: Path) -> tuple[int, ...]:
        found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", entry.name)
        return tuple(int(part or 0) for part in found.groups()) if found else ()

    return sorted(entries, key=key, reverse=True)


def find_python(version: str | None, folders: Iterable[Path] | None = None) -> Path | None:
    """An interpreter of `version` (major.minor; None: distrun's own), or None if there is none."""
    if version is None or version == own_version():
        return Path(sys.executable)
    for folder in search_folders() if folders is None else folders:
        candidate = folder / f"python{version}"
        if _executable(candidate) and _version_of(str(candidate)) == version:
            return candidate
    return _uv_managed(version) if folders is None else None


def installed(folders: Iterable[Path] | None = None) -> list[Interpreter]:
    """Every `pythonX.Y` in the search folders that runs, with the version it says."""
    paths: list[Path] = []
    for folder in search_folders() if folders is None else folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        paths += [folder / name for name in names if _VERSIONED.match(name) and _executable(folder / name)]
    # Each is started to ask its version: side by side, as a broken one may take its time to fail.
    with ThreadPoolExecutor(max_workers=8) as pool:
        versions = list(pool.map(lambda p: _version_of(str(p)), paths))
    return [Interpreter(v, p) for p, v in zip(paths, versions, strict=True) if v is not None]


def available_versions(folders: Iterable[Path] | None = None) -> list[str]:
    """The versions of the interpreters that run, for the message that says which one is missing."""
    found = {own_version(), *(i.version for i in installed(folders))}
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@cache
def _version_of(executable: str) -> str | None:
    try:
        out = subprocess.run(
            [*setpriv_prefix("KILL"), executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    said = out.stdout.strip()
    return said if out.returncode == 0 and re.fullmatch(r"\d+\.\d+", said) else None


def _uv_managed(version: str) -> Path | None:
    uv = uv_binary()
    if uv is None:
        return None
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    try:
        out = subprocess.run(
            [*setpriv_prefix("KILL"), uv, "python", "find", version],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    path = out.stdout.strip()
    return Path(path) if out.returncode == 0 and path and _version_of(path) == version else None
