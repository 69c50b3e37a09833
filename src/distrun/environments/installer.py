"""The tool that creates a virtual environment and installs into it: uv when installed
(`pip install 'distrun[envs]'`), else the interpreter's own venv and pip.

DISTRUN_ENV_INSTALLER=pip|uv chooses one. uv reads its own settings (UV_INDEX_URL,
UV_FIND_LINKS, uv.toml), pip its own (PIP_INDEX_URL, pip.conf); option lines in the conda
file's pip section (`--index-url`, `--find-links`) work with both.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from distrun.core.errors import DistrunError


def uv_binary() -> str | None:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


@dataclass(frozen=True)
class Installer:
    name: str  # "uv" or "pip"
    binary: str | None  # uv's path; None for pip

    def create(self, python: Path, folder: Path) -> list[str]:
        if self.binary is not None:
            return [self.binary, "venv", "--quiet", "--no-project", "--python", str(python), str(folder)]
        return [str(python), "-m", "venv", str(folder)]

    def seed_pip(self, folder: Path, bundled: tuple[Path, ...]) -> list[str] | None:
        """The command that puts pip into a new environment; None when it has pip already.

        `python -m venv` runs ensurepip (pip, and setuptools up to Python 3.11). uv makes
        environments without pip: the same wheels then come from the interpreter's own bundle
        (ensurepip's, no index needed, so offline machines build too), else pip from the index.
        """
        if self.binary is None:
            return None
        python = str(folder / "bin" / "python")
        if bundled:
            return [self.binary, "pip", "install", "--python", python, "--offline", "--no-deps", *map(str, bundled)]
        return [self.binary, "pip", "install", "--python", python, "pip"]

    def install(self, folder: Path, requirements: Path, flags: tuple[str, ...] = ()) -> list[str]:
        """The install command; `flags` (`--upgrade`, `--no-deps`: an image's install step)
        mean the same to both."""
        python = str(folder / "bin" / "python")
        if self.binary is not None:
            return [self.binary, "pip", "install", "--python", python, "-r", str(requirements), *flags]
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        return [*pip, "-r", str(requirements), *flags]

    def env(self) -> dict[str, str]:
        # Never download an interpreter: an unavailable Python is an error found before the build.
        # Copies, not links into uv's cache: a file a job changed in its environment would
        # otherwise change in that cache, and in every environment built from it later. Byte
        # code compiled now: ranks cannot write it into the read-only environment later.
        return dict(
            os.environ,
            UV_PYTHON_DOWNLOADS="never",
            UV_NO_PROGRESS="1",
            UV_LINK_MODE="copy",
            UV_COMPILE_BYTECODE="1",
            PIP_NO_INPUT="1",
        )


def choose_installer() -> Installer:
    wanted = os.environ.get("DISTRUN_ENV_INSTALLER", "").strip().lower()
    if wanted not in ("", "uv", "pip"):
        raise DistrunError(f"DISTRUN_ENV_INSTALLER={wanted!r} is not an installer", "set it to uv or pip, or unset it")
    uv = uv_binary() if wanted != "pip" else None
    if wanted == "uv" and uv is None:
        raise DistrunError("DISTRUN_ENV_INSTALLER=uv but uv is not installed", "pip install 'distrun[envs]' (or uv)")
    return Installer("uv", uv) if uv else Installer("pip", None)
