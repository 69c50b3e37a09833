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
