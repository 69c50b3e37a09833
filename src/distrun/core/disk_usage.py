"""How much space a folder takes: what deleting it reclaims."""

from __future__ import annotations

import os
from pathlib import Path


def tree_bytes(path: Path) -> int:
    """The bytes of every file under `path`; links are counted as links, never followed."""
    total = 0
    for folder, _, files in os.walk(path):  # os.walk follows no link to a folder by default
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass  # gone meanwhile, or unreadable: it frees nothing we can count
    return total
