"""Keeping each attempt's logs when a job restarts: `user_logs/` shows the latest attempt, the
logs of earlier ones sit beside them in `user_logs/attempt_<k>/`.

Only the last KEPT_ATTEMPTS attempts keep their logs: a job with unlimited preemptions, or a
high max_restarts, would otherwise fill the disk one attempt folder at a time. The record keeps
every attempt's outcome and root cause (its traceback included) whatever happens to its logs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from distrun.core.file_modes import make_dirs

ATTEMPT_PREFIX = "attempt_"
KEPT_ATTEMPTS = 20  # attempt folders kept in user_logs/; older ones are removed


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
    _drop_old_attempts(user_logs, attempt - KEPT_ATTEMPTS)
    return target


def _drop_old_attempts(user_logs: Path, up_to: int) -> None:
    """Remove the folders of attempts `up_to` and earlier."""
    for entry in user_logs.iterdir():
        number = entry.name[len(ATTEMPT_PREFIX) :]
        if not (
            entry.name.startswith(ATTEMPT_PREFIX) and number.isascii() and number.isdigit() and int(number) <= up_to
        ):
            continue
        if entry.is_symlink() or not entry.is_dir():  # planted by the job: the link goes, never what it points to
            entry.unlink()
        else:
            shutil.rmtree(entry, ignore_errors=True)


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
