"""A job's outputs as the UI lists and serves them: ./outputs, ./logs and the named outputs.

The job's own processes write these folders, so a link is never listed or followed, and a
requested path is checked to stay inside its area before anything is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from distrun.store.layout import ARTIFACT_DIRS, JobFolder

MAX_LISTED = 2000  # files listed per job page


@dataclass(frozen=True)
class OutputFile:
    area: str  # outputs | logs | named-outputs
    path: str  # relative to the area, with '/'
    size: int


def area_root(folder: JobFolder, area: str) -> Path | None:
    if area in ARTIFACT_DIRS:
        return folder.code / area
    if area == "named-outputs":
        return folder.named_outputs
    return None


def list_outputs(folder: JobFolder) -> list[OutputFile]:
    found: list[OutputFile] = []
    for area in (*ARTIFACT_DIRS, "named-outputs"):
        root = area_root(folder, area)
        if root is None or root.is_symlink() or not root.is_dir():
            continue
        for current, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(current, d)))
            for name in sorted(files):
                path = Path(current) / name
                try:
                    stat = path.lstat()
                except OSError:
                    continue
                if not path.is_symlink() and path.is_file():
                    found.append(OutputFile(area, path.relative_to(root).as_posix(), stat.st_size))
                if len(found) >= MAX_LISTED:
                    return found
    return found


def open_output(folder: JobFolder, area: str, relative: str) -> int | None:
    """A file descriptor for one output file, or None if it is not a plain file inside its area.

    Each part of the path is opened relative to its parent without following links, so a link
    planted anywhere on the way (or swapped in meanwhile) is refused.
    """
    root = area_root(folder, area)
    parts = [p for p in relative.split("/") if p]
    if root is None or not parts or any(p in (".", "..") for p in parts):
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        fd = os.open(folder.root, flags | os.O_DIRECTORY)
        for part in [*root.relative_to(folder.root).parts, *parts[:-1]]:
            next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        file_fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        os.close(fd)
    except OSError:
        return None
    if not _is_regular(file_fd):
        os.close(file_fd)
        return None
    return file_fd


def _is_regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
