"""Paths as users write them in job files, target settings and datastores.

Its own small module because data locations, datastores and environments all need it, and
a job's launch path should not import the conda machinery (hashlib, its parsers) for it.
"""

from __future__ import annotations

from pathlib import Path


def expand_user(path: Path) -> Path:
    """`~/x` expanded; `~nobody/x` of an unknown user kept as written (then it does not exist)."""
    try:
        return path.expanduser()
    except RuntimeError:
        return path


def current_folder() -> Path:
    """The folder distrun was started in; a clear error when it was deleted meanwhile (the
    kernel keeps a process in a removed folder, but it has no path any more)."""
    from distrun.core.errors import DistrunError

    try:
        return Path.cwd()
    except FileNotFoundError:
        raise DistrunError(
            "the current folder no longer exists (it was deleted after this shell went into it)",
            "cd into a folder that exists (cd ~, or cd to the folder again once it is back) and run the command again",
        ) from None
