"""Keeping each attempt's logs when a job restarts: `user_logs/` shows the latest attempt, the
logs of earlier ones sit beside them in `user_logs/attempt_<k>/`.

Only the last KEPT_ATTEMPTS attempts keep their logs: a job with unlimited preemptions, or a
high max_restarts, would otherwise fill the disk one attempt folder at a time. The record keeps
every attempt's outcome and root cause (its traceback included) whatever happens to its logs.

The attempt's processes could write user_logs/: a link they left at `user_logs` or at an
attempt folder's name is removed (never what it points to) and a real folder made in its place,
each relative to the open folder above it, so nothing is made or moved outside the job folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from distrun.core.file_modes import DIR_MODE
from distrun.core.safe_files import open_folder_beneath

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
    root = user_logs.parent  # the job folder
    logs_fd = open_folder_beneath(root, user_logs.name, DIR_MODE, replace_planted=True)
    try:
        target_fd = open_folder_beneath(root, f"{user_logs.name}/{target.name}", DIR_MODE, replace_planted=True)
        try:
            with os.scandir(logs_fd) as listed:
                entries = sorted(listed, key=lambda entry: entry.name)
            for entry in entries:
                if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                    os.replace(entry.name, entry.name, src_dir_fd=logs_fd, dst_dir_fd=target_fd)
        finally:
            os.close(target_fd)
    finally:
        os.close(logs_fd)
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
