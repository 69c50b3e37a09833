"""Interpreters are found where people install them, and only those that run are offered.

Real layouts in a temporary home: a pyenv root and uv's folder of managed Pythons whose
version folders link to a real interpreter, next to broken ones (a pyenv shim for a version
pyenv does not select, a link to nothing) that must be neither used nor listed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from distrun.environments.interpreters import available_versions, find_python, installed, search_folders

REAL = Path(os.path.realpath(sys.executable))
OWN = f"{sys.version_info.major}.{sys.version_info.minor}"
SHIM = '#!/bin/sh\necho "pyenv: python{v}: command not found" >&2\nexit 127\n'


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def link(path: Path, target: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def layout(home: Path) -> dict[str, Path]:
    """A home with pyenv, uv-managed Pythons and a shim folder on PATH; returns the paths made."""
    return {
        "pyenv": link(home / ".pyenv" / "versions" / f"{OWN}.99" / "bin" / f"python{OWN}", REAL),
        "uv": link(
            home / ".local/share/uv/python" / f"cpython-{OWN}.98-linux-x86_64-gnu" / "bin" / f"python{OWN}", REAL
        ),
        # pyenv knows 3.2 but it is not the selected version: its shim fails, as in the field.
        "shim": script(home / ".pyenv" / "shims" / "python3.2", SHIM.format(v="3.2")),
        # A version folder left behind by an uninstall: its interpreter links to nothing.
        "dangling": link(home / ".pyenv" / "versions" / "3.3.7" / "bin" / "python3.3", home / "gone" / "python3.3"),
        # One that starts but cannot run Python (a broken build).
        "broken": script(home / ".pyenv" / "versions" / "3.1.5" / "bin" / "python3.1", "#!/bin/sh\nexit 1\n"),
    }


def test_pyenv_and_uv_interpreters_are_found_and_broken_ones_are_not_listed(tmp_path: Path) -> None:
    made = layout(tmp_path)
    env = {"PATH": str(tmp_path / ".pyenv" / "shims"), "HOME": str(tmp_path)}
    folders = search_folders(env, system=())
    assert folders[0] == tmp_path / ".pyenv" / "shims"  # PATH first
    assert made["pyenv"].parent in folders and made["uv"].parent in folders

    found = installed(folders)
    assert {i.path for i in found} == {made["pyenv"], made["uv"]}
    assert {i.version for i in found} == {OWN}
    # The message for a missing version lists what runs, never the shim's or the broken builds' versions.
    assert available_versions(folders) == [OWN]
    for broken in ("3.2", "3.3", "3.1"):
        assert find_python(broken, folders) is None


def test_a_version_is_found_in_a_pyenv_version_folder_newest_first(tmp_path: Path) -> None:
    older = link(tmp_path / ".pyenv" / "versions" / f"{OWN}.1" / "bin" / f"python{OWN}", REAL)
    newer = link(tmp_path / ".pyenv" / "versions" / f"{OWN}.10" / "bin" / f"python{OWN}", REAL)
    folders = search_folders({"PATH": "", "HOME": str(tmp_path)}, system=())
    assert folders.index(newer.parent) < folders.index(older.parent)  # 3.x.10 before 3.x.1
    # distrun's own version is its own interpreter; any other is looked for in the folders.
    assert find_python(OWN) == Path(sys.executable)
    assert installed([newer.parent]) and installed([newer.parent])[0].path == newer


def test_conda_base_and_pyenv_root_come_from_the_environment(tmp_path: Path) -> None:
    base = tmp_path / "opt" / "miniforge"
    python = link(base / "bin" / f"python{OWN}", REAL)
    conda = script(base / "bin" / "conda", "#!/bin/sh\n")
    root = tmp_path / "elsewhere" / "pyenv"
    pyenv_python = link(root / "versions" / f"{OWN}.4" / "bin" / f"python{OWN}", REAL)
    env = {"PATH": "", "HOME": str(tmp_path / "home"), "CONDA_EXE": str(conda), "PYENV_ROOT": str(root)}
    found = {i.path for i in installed(search_folders(env, system=()))}
    assert found == {python, pyenv_python}
