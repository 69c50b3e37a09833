"""Keeping each attempt's logs when a job restarts: `user_logs/` shows the latest attempt, the
logs of earlier ones sit beside them in `user_logs/attempt_<k>/`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distrun.core.file_modes import make_dirs

ATTEMPT_PREFIX = "attempt_"


def attempt_folder(user_logs: Path, attempt: int) -> Path:
    return user_logs / f"{ATTEMPT_PREFIX}{attempt}"


def keep_attempt_logs(user_logs: Path, attempt: int) -> Path:
    """Move attempt `attempt`'s log files out of `user_logs/` into its own folder, which is returned.

    Only files (and links, moved as links) directly in user_logs/ move: the folders of earlier
    attempts stay where they are. Called once every process of the attempt has ended.
    """
    target = attempt_folder(user_logs, attempt)
    make_dirs(target)
    for entry in sorted(user_logs.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            os.replace(entry, target / entry.name)
    return target


def moved_log(path: str | None, user_logs: Path, target: Path) -> str | None:
    """Where a log path of the attempt is after `keep_attempt_logs` moved it."""
    if path is None:
        return None
    log = Path(path)
    return str(target / log.name) if log.parent == user_logs else path


def moved_root_cause(root_cause: dict[str, Any] | None, user_logs: Path, target: Path) -> dict[str, Any] | None:
    if root_cause is None or "log" not in root_cause:
        return root_cause
    return {**root_cause, "log": moved_log(root_cause["log"], user_logs, target)}
