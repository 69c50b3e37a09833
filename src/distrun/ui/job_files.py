"""Reading a job's folder for the web UI: every file through distrun's safe path, bounded, never raising.

The job's own processes can write its folder: swap any file for a named pipe, a link or a device,
or any folder on the way for a link. Every read here walks from the job folder one component at
a time without following a link (distrun.core.safe_files.open_beneath), takes only regular files
(checked on the descriptor), never blocks on the open, and stops at a stated size. What cannot be
read comes back as a one-line reason for the page to show in its place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.core.safe_files import UnsafeFileError, open_beneath, read_fd, tail_of
from distrun.metrics.tracking import TRACKING_FILE, TrackedRun
from distrun.store.layout import JobFolder


@dataclass(frozen=True)
class FileText:
    text: str
    problem: str = ""  # why the file is not shown, or not whole; "" when it is


def relative(folder: JobFolder, path: Path) -> str:
    """A path of the job folder as the walk takes it: 'plan.json', 'user_logs/std_log_process_00.txt'."""
    return path.relative_to(folder.root).as_posix()


def read_head(folder: JobFolder, path: Path, limit: int) -> FileText:
    """The first `limit` bytes of a file of the job folder as text; "" (no problem) if it is missing."""
    try:
        fd = open_beneath(folder.root, relative(folder, path))
    except OSError as exc:
        return FileText("", _problem(exc))
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, limit, 0)
    except OSError as exc:
        return FileText("", _problem(exc))
    finally:
        os.close(fd)
    cut = f"showing the first {len(data)} of {size} bytes" if size > len(data) else ""
    return FileText(data.decode("utf-8", errors="replace"), cut)


def read_tail(folder: JobFolder, path: Path, limit: int) -> tuple[bytes, int]:
    """The last `limit` bytes of a file of the job folder, and its whole size; raises OSError."""
    fd = open_beneath(folder.root, relative(folder, path))
    try:
        return tail_of(fd, limit), os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_json(folder: JobFolder, path: Path, limit: int) -> tuple[dict[str, Any], str]:
    """A JSON object from the job folder, and why it is {} when it could not be read ("" if missing)."""
    try:
        fd = open_beneath(folder.root, relative(folder, path))
    except OSError as exc:
        return {}, _problem(exc)
    try:
        data = json.loads(read_fd(fd, limit, relative(folder, path)))
    except OSError as exc:
        return {}, _problem(exc)
    except ValueError:
        return {}, f"{path.name} is not valid JSON"
    finally:
        os.close(fd)
    return (data, "") if isinstance(data, dict) else ({}, f"{path.name} does not hold a JSON object")


def tracked_run(folder: JobFolder) -> TrackedRun | None:
    """The job's MLflow run as its tracking file records it; None when untracked or unreadable."""
    data, _ = read_json(folder, folder.root / TRACKING_FILE, 1 << 16)
    try:
        return TrackedRun(**{k: str(data[k]) for k in ("tracking_uri", "experiment_id", "experiment_name", "run_id")})
    except KeyError:
        return None


def read_from(folder: JobFolder, path: Path, offset: int, limit: int) -> bytes:
    """Up to `limit` bytes of a log from `offset`; b"" if it is missing or not a regular file."""
    try:
        fd = open_beneath(folder.root, relative(folder, path))
    except OSError:
        return b""
    try:
        return os.pread(fd, limit, offset)
    except OSError:
        return b""
    finally:
        os.close(fd)


def regular_files(folder: JobFolder, path: Path, limit: int, keep: Callable[[str], bool]) -> list[str]:
    """Names (those `keep` takes) of the regular files directly in a folder of the job, sorted.

    At most `limit` of them, from at most 16 times as many entries: a folder the job filled with
    millions of names costs a bounded time.
    """
    try:
        fd = open_beneath(folder.root, relative(folder, path), directory=True)
    except OSError:
        return []
    names: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for scanned, entry in enumerate(entries):
                if keep(entry.name) and entry.is_file(follow_symlinks=False):
                    names.append(entry.name)
                if len(names) >= limit or scanned >= 16 * limit:
                    break
    except OSError:
        pass
    finally:
        os.close(fd)
    return sorted(names)


def _problem(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return ""  # not written yet: nothing to say
    if isinstance(exc, UnsafeFileError):
        return f"not shown: {exc}"
    return f"not shown: {exc.filename or 'a file of the job'}: {exc.strerror or exc}"
