"""The environment cache: what is built under `$DISTRUN_HOME/envs/`, and removing it.

Prune takes each environment's build lock, so it never removes one a job is building; an
environment is renamed aside before it is deleted, so a job never sees half of one.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from distrun.core.disk_usage import tree_bytes
from distrun.core.errors import DistrunError
from distrun.environments.builder import LAST_USED, MANIFEST, envs_dir, is_ready
from distrun.environments.seal import remove_tree


def list_environments(home: Path) -> list[dict[str, Any]]:
    folder = envs_dir(home)
    if not folder.is_dir():
        return []
    found = [_describe(path) for path in sorted(folder.iterdir()) if not path.name.startswith(".") and is_ready(path)]
    return sorted(found, key=lambda e: e.get("created_at") or 0, reverse=True)


def show_environment(home: Path, key: str) -> dict[str, Any]:
    matches = [e for e in list_environments(home) if e["key"].startswith(key)] if key else []
    if len(matches) != 1:
        what = "no environment" if not matches else f"{len(matches)} environments"
        raise DistrunError(f"{what} in the cache match {key!r}", "see `distrun env list` for the keys")
    return matches[0]


def prune_environments(home: Path, unused_days: float | None, everything: bool) -> list[str]:
    """Remove cached environments not used for `unused_days` (or all); returns their keys."""
    if not everything and unused_days is None:
        raise DistrunError("say what to prune", "--unused-days N (not used by a job for N days) or --all")
    removed = []
    now = time.time()
    for env in list_environments(home):
        if not everything and now - env["last_used"] < (unused_days or 0) * 86400:
            continue
        if _remove(home, env["key"]):
            removed.append(env["key"])
    return removed


def _remove(home: Path, key: str) -> bool:
    lock = envs_dir(home) / f".{key}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # being built right now: leave it
        folder = envs_dir(home) / key
        aside = envs_dir(home) / f".prune-{key}-{os.getpid()}"
        try:
            os.rename(folder, aside)
        except FileNotFoundError:
            return False
        remove_tree(aside)  # read-only inside: a sealed environment
        return True
    finally:
        os.close(fd)


def _describe(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    try:
        last_used = float((path / LAST_USED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        last_used = manifest.get("created_at") or 0.0
    return {
        "key": path.name,
        "path": str(path),
        "python": manifest.get("python"),
        "requirements": manifest.get("requirements", []),
        "origin": manifest.get("origin"),
        "installer": manifest.get("installer"),
        "created_at": manifest.get("created_at"),
        "last_used": last_used,
        "size_mb": round(tree_bytes(path) / 1e6, 1),
    }
