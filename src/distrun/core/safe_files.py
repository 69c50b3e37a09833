"""Opening files that a job's own processes can replace, without trusting what is there.

A job's processes can write its folder: they can swap plan.json, job.json or a log for a named
pipe (an open would wait forever for a writer), a link to a device (a read would never end) or
a link to some other file (its contents would end up in distrun's output), or make a file huge.
Everything distrun opens there goes through these helpers: never through a link (O_NOFOLLOW),
never blocking on the open (O_NONBLOCK, cleared again for regular files), only regular files
(checked on the descriptor, so there is no window between the check and the use), and reads
that stop at a stated size.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# plan.json of the largest plan distrun makes (8,192 processes) is about 8 MB (compact JSON).
MAX_METADATA_BYTES = 64 << 20


class UnsafeFileError(OSError):
    """The path is not a regular file reached without a link, or is larger than allowed."""


def kind_of(mode: int) -> str:
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def open_regular(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o664) -> int:
    """A descriptor of the regular file at `path`; a link, pipe, device or socket raises.

    With O_CREAT the file is created when missing. The open itself never blocks (a named
    pipe opened for writing with no reader fails at once instead of waiting for one).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a pipe without a reader, or a socket
            raise UnsafeFileError(exc.errno, f"{path} is not a regular file (a link, pipe or socket)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{path} is {kind_of(info.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path | str, limit: int = MAX_METADATA_BYTES) -> bytes:
    """The whole of a regular file of at most `limit` bytes, read through one descriptor."""
    fd = open_regular(path)
    try:
        return read_fd(fd, limit, str(path))
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int, what: str = "file") -> bytes:
    if os.fstat(fd).st_size > limit:
        raise UnsafeFileError(f"{what} is larger than {limit} bytes")
    chunks = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:  # it grew while being read
            raise UnsafeFileError(f"{what} is larger than {limit} bytes")


def read_text(path: Path | str, limit: int = MAX_METADATA_BYTES) -> str:
    return read_regular(path, limit).decode("utf-8")


def tail_of(fd: int, size: int) -> bytes:
    """The last `size` bytes of an open file (pread: the descriptor's offset is left alone)."""
    end = os.fstat(fd).st_size
    start = max(0, end - size)
    chunks = []
    while start < end:
        chunk = os.pread(fd, min(1 << 20, end - start), start)
        if not chunk:
            break
        chunks.append(chunk)
        start += len(chunk)
    return b"".join(chunks)


def open_beneath(root: Path | str, relative: str, directory: bool = False) -> int:
    """A descriptor of `relative` inside the folder `root`, with no link followed on any component.

    The path is walked one component at a time from `root` (itself opened without following a
    link), each folder opened relative to the one before, so a folder that a job swapped for a
    link anywhere on the way is refused, not only a link at the end. The last component must be
    a regular file (or, with `directory`, a folder). Missing: FileNotFoundError; anything
    else on the way that is not what it should be: UnsafeFileError.
    """
    parts = [part for part in str(relative).split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafeFileError(f"{relative}: '..' is not allowed in a path inside {root}")
    if not parts and not directory:
        raise UnsafeFileError(f"{root}: a folder, not a regular file")
    folder_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = _open_step(str(root), folder_flags, None, str(root))
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            where = f"{root}/{'/'.join(parts[: index + 1])}"
            if last and not directory:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
            else:
                flags = folder_flags
            next_fd = _open_step(part, flags, fd, where)
            os.close(fd)
            fd = next_fd
        if not directory:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafeFileError(f"{root}/{'/'.join(parts)} is {kind_of(info.st_mode)}, not a regular file")
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_beneath(root: Path | str, relative: str, limit: int = MAX_METADATA_BYTES) -> bytes:
    """The whole of a regular file inside `root` of at most `limit` bytes (see open_beneath)."""
    fd = open_beneath(root, relative)
    try:
        return read_fd(fd, limit, f"{root}/{relative}")
    finally:
        os.close(fd)


def _open_step(name: str, flags: int, dir_fd: int | None, where: str) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(f"{where} is a symbolic link: distrun does not follow it") from None
        if exc.errno == errno.ENOTDIR:
            raise UnsafeFileError(f"{where} is {_kind_at(name, dir_fd)}, not a folder") from None
        if exc.errno == errno.ENXIO:
            raise UnsafeFileError(f"{where} is not a regular file (a socket or device)") from None
        raise


def _kind_at(name: str, dir_fd: int | None) -> str:
    try:
        return kind_of(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return "not a folder"
