"""A digest of a file or a folder's whole tree, by content, read without trusting what is there.

Pipeline step reuse compares data by these digests: a step's inputs and code before it runs, and
its outputs when it completed and again before a later run reuses them. Outputs lie in job
folders, which a job's processes can change at any moment, so the walk follows no link below the
top (a link is hashed as a link: its target's text, never what it points at), opens every folder
and file relative to the folder above it without following a link (a folder swapped for a link
leads nowhere), never blocks on a named pipe or device (they are hashed by their kind only), and
walks with a stack of its own (a tree nested thousands deep cannot exhaust Python's recursion).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from distrun.core.safe_files import UnsafeFileError, kind_of, open_beneath

_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

# skip(relative path, is a folder) -> True to leave the entry out (a code folder's ignore rules).
Skip = Callable[[str, bool], bool]


def content_digest(path: Path | str, *, root: Path | str | None = None, skip: Skip | None = None) -> str:
    """The sha256 digest of what is at `path`: a file's bytes, or a folder's names, kinds and
    contents, whole. With `root` (a folder `path` lies in, such as a job folder) no component
    below `root` may be a link; without it, `path` itself may be a link (a user's own data).
    Missing: FileNotFoundError; a link where none may be: UnsafeFileError."""
    path = Path(path)
    if root is not None:
        relative = str(path.relative_to(root))
        parent = os.path.dirname(relative)
        dir_fd = open_beneath(root, parent, directory=True)
        try:
            mode = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                raise UnsafeFileError(f"{path} is a symbolic link: distrun does not follow it")
            fd = _open_entry(path.name, mode, dir_fd)
        finally:
            os.close(dir_fd)
    else:
        mode = os.stat(path).st_mode
        fd = _open_entry(str(path), mode, None, follow=True)
    if fd is None:
        return _digest_of(b"other\0" + kind_of(mode).encode())
    if stat.S_ISDIR(mode):
        return _tree_digest(fd, skip)
    try:
        return _digest_of(b"file\0" + _file_digest(fd).encode())
    finally:
        os.close(fd)


def _digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _open_entry(name: str, mode: int, dir_fd: int | None, follow: bool = False) -> int | None:
    """A descriptor of a folder or regular file; None for anything else (nothing is opened)."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    if stat.S_ISDIR(mode):
        return os.open(name, (_DIR_FLAGS & ~os.O_NOFOLLOW) | nofollow, dir_fd=dir_fd)
    if not stat.S_ISREG(mode):
        return None
    fd = os.open(name, (_FILE_FLAGS & ~os.O_NOFOLLOW) | nofollow, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the stat and the open
        os.close(fd)
        raise UnsafeFileError(f"{name} changed while it was read")
    return fd


def _file_digest(fd: int) -> str:
    digest = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def _tree_digest(top_fd: int, skip: Skip | None) -> str:
    """Every entry below the open folder `top_fd` (closed here), each folder's in name order, one line each:
    kind, path relative to the top, and the file's digest or the link's target."""
    digest = hashlib.sha256(b"tree\0")
    stack: list[tuple[int, str]] = [(top_fd, "")]
    try:
        while stack:
            dir_fd, prefix = stack.pop()
            try:
                for name in sorted(os.listdir(dir_fd)):
                    relative = prefix + name
                    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                    if skip is not None and skip(relative, stat.S_ISDIR(mode)):
                        continue
                    if stat.S_ISLNK(mode):
                        line = f"link\0{relative}\0{os.readlink(name, dir_fd=dir_fd)}"
                    elif stat.S_ISDIR(mode):
                        line = f"folder\0{relative}"
                        # Walked later (deterministic: each line names its whole path).
                        stack.append((_open_entry(name, mode, dir_fd), relative + "/"))  # type: ignore[arg-type]
                    elif stat.S_ISREG(mode):
                        fd = _open_entry(name, mode, dir_fd)
                        try:
                            line = f"file\0{relative}\0{_file_digest(fd)}"  # type: ignore[arg-type]
                        finally:
                            os.close(fd)  # type: ignore[arg-type]
                    else:
                        line = f"other\0{relative}\0{kind_of(mode)}"
                    digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
            finally:
                os.close(dir_fd)
    except BaseException:
        for fd, _ in stack:
            os.close(fd)
        raise
    return digest.hexdigest()
