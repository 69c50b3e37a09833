"""Writing distrun's own files into a job folder that the job's processes can change.

A rank can replace any folder of its job folder with a link at any moment. Here the folder is
opened one component at a time without following a link (`safe_files.open_beneath`), and the
file is written relative to that open folder (a temporary file created O_EXCL|O_NOFOLLOW, then
renamed over the name): whatever the job planted, nothing is written outside the job folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from distrun.core.file_modes import FILE_MODE, make_dirs, write_all
from distrun.core.safe_files import open_beneath


def write_beneath(root: Path, folder: str, name: str, data: bytes) -> None:
    """`root/folder/name` holding `data`, whole or not at all; OSError (UnsafeFileError for a link) otherwise."""
    make_dirs(root / folder)
    dir_fd = open_beneath(root, folder, directory=True)
    tmp = f".{name}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=dir_fd)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    finally:
        os.close(dir_fd)


def listed_beneath(root: Path, folder: str) -> list[str]:
    """The names in `root/folder` (reached without a link); [] when it is missing or not a plain folder."""
    try:
        dir_fd = open_beneath(root, folder, directory=True)
    except OSError:
        return []
    try:
        return os.listdir(dir_fd)
    finally:
        os.close(dir_fd)


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
