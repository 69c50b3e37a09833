"""Writing distrun's own files into a job folder that the job's processes can change.

A rank can replace any folder of its job folder with a link at any moment. Here the folder is
made and opened one component at a time without following a link
(`safe_files.open_folder_beneath`), and the file is written relative to that open folder (a
temporary file created O_EXCL|O_NOFOLLOW, then renamed over the name): whatever the job
planted, nothing is created or written outside the job folder. A listing stops at a stated
number of names: a folder the job filled with millions of files costs a bounded read.
"""

from __future__ import annotations

import os
from pathlib import Path

from distrun.core.file_modes import write_beneath as write_beneath  # the one writer, in core for every layer
from distrun.core.safe_files import open_beneath

# The most names a listing of a job-writable folder returns (stack requests, progress files).
LIST_LIMIT = 4096


def listed_beneath(root: Path, folder: str, limit: int = LIST_LIMIT) -> list[str]:
    """The names in `root/folder` (reached without a link), at most `limit` of them in the
    folder's own order; [] when it is missing or not a plain folder."""
    try:
        dir_fd = open_beneath(root, folder, directory=True)
    except OSError:
        return []
    names: list[str] = []
    try:
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                if len(names) >= limit:
                    break
                names.append(entry.name)
    except OSError:
        pass  # what was read so far
    finally:
        os.close(dir_fd)
    return names


def remove_beneath(root: Path, folder: str, names: list[str]) -> None:
    """Remove files of `root/folder` (reached without a link); what is gone already is no error."""
    try:
        dir_fd = open_beneath(root, folder, directory=True)
    except OSError:
        return
    try:
        for name in names:
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
    finally:
        os.close(dir_fd)
