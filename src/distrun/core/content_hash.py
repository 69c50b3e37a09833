"""A digest of a file or a folder's whole tree, by content, read without trusting what is there.

Pipeline step reuse compares data by these digests: a step's inputs and code before it runs, and
its outputs when it completed and again before a later run reuses them. Outputs lie in job
folders, which a job's processes can change at any moment, so the walk opens every folder and
file relative to the folder above it without following a link on the way (a folder swapped for
a link leads nowhere), never blocks on a named pipe or device (they are hashed by their kind
only), and walks with a stack of its own (a tree nested thousands deep cannot exhaust Python's
recursion). A link inside the tree is hashed by its text and by the content it leads to (a file's
bytes, a folder's tree, once each: a loop ends), so a changed target changes the digest.

Hashing is bounded: at most `DigestLimits.bytes` read (a file is measured before it is read, so
a sparse file of terabytes is refused at once), `entries` entries and `seconds` of time. Past a
bound `DigestLimitError` says which; step reuse then does not reuse, and says so.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.core.safe_files import UnsafeFileError, kind_of, open_beneath

_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

# skip(relative path, is a folder) -> True to leave the entry out (a code folder's ignore rules).
Skip = Callable[[str, bool], bool]


@dataclass(frozen=True)
class DigestLimits:
    """How much one digest may read: bytes of file content, entries, and wall-clock seconds."""

    bytes: int = 32 << 30  # minutes of sha256 on a slow disk; more is data, not a step's output
    entries: int = 1_000_000
    seconds: float = 300.0


class DigestLimitError(DistrunError):
    """What is at a path is too large (or takes too long) to hash within its `DigestLimits`."""


class _Budget:
    def __init__(self, limits: DigestLimits, path: Path) -> None:
        self.limits, self.path = limits, path
        self.bytes_left, self.entries_left = limits.bytes, limits.entries
        self.deadline = time.monotonic() + limits.seconds

    def take(self, size: int = 0, entries: int = 0) -> None:
        self.bytes_left -= size
        self.entries_left -= entries
        if self.bytes_left < 0:
            self._over(f"more than {_shown_bytes(self.limits.bytes)} to read")
        if self.entries_left < 0:
            self._over(f"more than {self.limits.entries} files and folders")
        if time.monotonic() > self.deadline:
            self._over(f"more than {self.limits.seconds:g} s to read")

    def _over(self, what: str) -> None:
        raise DigestLimitError(
            f"{self.path} holds {what}: distrun does not hash it for step reuse",
            "such data is read by path, not reused by content; the step runs again each time",
        )


def _shown_bytes(count: int) -> str:
    return f"{count / (1 << 30):g} GiB" if count >= 1 << 30 else f"{count} bytes"


def content_digest(
    path: Path | str,
    *,
    root: Path | str | None = None,
    skip: Skip | None = None,
    limits: DigestLimits | None = None,
) -> str:
    """The sha256 digest of what is at `path`: a file's bytes, or a folder's names, kinds and
    contents, whole. With `root` (a folder `path` lies in, such as a job folder) no component
    below `root` may be a link; without it, `path` itself may be a link (a user's own data).
    Missing: FileNotFoundError; a link where none may be: UnsafeFileError; past `limits`
    (default `DigestLimits()`): DigestLimitError."""
    path = Path(path)
    budget = _Budget(limits or DigestLimits(), path)
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
        return _tree_digest(fd, skip, budget)
    try:
        return _digest_of(b"file\0" + _file_digest(fd, budget).encode())
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


def _file_digest(fd: int, budget: _Budget) -> str:
    budget.take(0)
    if os.fstat(fd).st_size > budget.bytes_left:  # measured first: a sparse terabyte is never read
        budget.take(os.fstat(fd).st_size)
    digest = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        budget.take(len(chunk))  # a file that grows while it is read is bounded too
        digest.update(chunk)
    return digest.hexdigest()


def _tree_digest(top_fd: int, skip: Skip | None, budget: _Budget) -> str:
    """Every entry below the open folder `top_fd` (closed here), each folder's in name order, one line each:
    kind, path relative to the top, and the file's digest; a link's line also has its target's text
    and what it leads to (a file's digest, or its folder's entries, walked as entries of the tree)."""
    digest = hashlib.sha256(b"tree\0")
    stack: list[tuple[int, str]] = [(top_fd, "")]
    seen = {_identity(top_fd)}  # folders walked: a link back to one is a loop, not walked again
    try:
        while stack:
            dir_fd, prefix = stack.pop()
            try:
                for name in sorted(os.listdir(dir_fd)):
                    budget.take(entries=1)
                    relative = prefix + name
                    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                    if skip is not None and skip(relative, stat.S_ISDIR(mode)):
                        continue
                    if stat.S_ISLNK(mode):
                        line = _link_line(name, dir_fd, relative, stack, seen, budget)
                    elif stat.S_ISDIR(mode):
                        line = f"folder\0{relative}"
                        # Walked later (deterministic: each line names its whole path).
                        folder = _open_entry(name, mode, dir_fd)
                        seen.add(_identity(folder))  # type: ignore[arg-type]
                        stack.append((folder, relative + "/"))  # type: ignore[arg-type]
                    elif stat.S_ISREG(mode):
                        line = f"file\0{relative}\0{_entry_file_digest(name, mode, dir_fd, budget, False)}"
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


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _entry_file_digest(name: str, mode: int, dir_fd: int, budget: _Budget, follow: bool) -> str:
    fd = _open_entry(name, mode, dir_fd, follow=follow)
    try:
        return _file_digest(fd, budget)  # type: ignore[arg-type]
    finally:
        os.close(fd)  # type: ignore[arg-type]


def _link_line(
    name: str, dir_fd: int, relative: str, stack: list[tuple[int, str]], seen: set[tuple[int, int]], budget: _Budget
) -> str:
    """A link's line: its text and what it leads to now, so that a changed target changes the digest."""
    head = f"link\0{relative}\0{os.readlink(name, dir_fd=dir_fd)}"
    try:
        mode = os.stat(name, dir_fd=dir_fd).st_mode  # followed
    except OSError:
        return head + "\0dangling"
    if stat.S_ISREG(mode):
        return head + "\0file\0" + _entry_file_digest(name, mode, dir_fd, budget, True)
    if stat.S_ISDIR(mode):
        folder = _open_entry(name, mode, dir_fd, follow=True)
        identity = _identity(folder)  # type: ignore[arg-type]
        if identity in seen:
            os.close(folder)  # type: ignore[arg-type]
            return head + "\0loop"
        seen.add(identity)
        stack.append((folder, relative + "/"))  # type: ignore[arg-type]
        return head + "\0folder"
    return head + "\0" + kind_of(mode)
