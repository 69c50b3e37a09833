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
# A number or a time stamp distrun wrote (a cancel time, an attempt number).
SMALL_FILE_LIMIT = 4096
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def open_regular(
    path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o664, *, root: Path | str | None = None
) -> int:
    """A descriptor of the regular file at `path`; a link, pipe, device or socket raises.

    With O_CREAT the file is created when missing. The open itself never blocks (a named
    pipe opened for writing with no reader fails at once instead of waiting for one).

    With `root` (a folder that `path` lies in, such as the job folder), no component below
    `root` may be a link either: each folder is opened without following links, relative to
    the one above it, so a folder the job swapped for a link leads nowhere. `root` itself is
    trusted (DISTRUN_HOME may well lie under a linked home folder).
    """
    if root is None:
        return _open_last(path, flags, mode, None, path)
    try:
        parts = Path(path).relative_to(root).parts
    except ValueError:
        raise UnsafeFileError(f"{path} is not inside {root}") from None
    if not parts:
        raise UnsafeFileError(f"{path} is a folder, not a regular file")
    dir_fd = _descend(os.open(root, _FOLDER_FLAGS & ~os.O_NOFOLLOW), parts[:-1], str(root))
    try:
        return _open_last(parts[-1], flags, mode, dir_fd, path)
    finally:
        os.close(dir_fd)


def _open_last(name: Path | str, flags: int, mode: int, dir_fd: int | None, shown: Path | str) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(
                exc.errno, f"{shown} is a symbolic link, not a regular file: distrun does not follow it"
            ) from None
        if exc.errno == errno.ENXIO:  # a pipe opened for writing without a reader, or a socket
            raise UnsafeFileError(exc.errno, f"{shown} is not a regular file (a pipe or socket)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{shown} is {kind_of(info.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def unreadable_because(path: Path | str, *, root: Path | str | None = None) -> str | None:
    """Why the file at `path` would not be read by `open_regular` (a named pipe, a link, a
    folder...), or None when it would be, or is simply missing."""
    try:
        os.close(open_regular(path, root=root))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def read_regular(path: Path | str, limit: int = MAX_METADATA_BYTES, *, root: Path | str | None = None) -> bytes:
    """The whole of a regular file of at most `limit` bytes, read through one descriptor."""
    fd = open_regular(path, root=root)
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


def read_text(path: Path | str, limit: int = MAX_METADATA_BYTES, *, root: Path | str | None = None) -> str:
    return read_regular(path, limit, root=root).decode("utf-8")


def refuse_special_store(path: Path | str) -> None:
    """Raise UnsafeFileError when an SQLite database or one of its side files (-wal, -shm,
    -journal) exists and is not a regular file: SQLite opens them without such checks, and a
    named pipe in their place would block it forever (an open for reading waits for a writer,
    a read through its own read-write open never ends)."""
    for each in (str(path), f"{path}-wal", f"{path}-shm", f"{path}-journal"):
        try:
            info = os.lstat(each)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{each} is {kind_of(info.st_mode)}, not a regular file")


def sqlite_reader_uri(fd: int) -> str:
    """An SQLite URI that reads, read-only, the database open as `fd` (from `open_regular`).

    SQLite opens the file again by this name, which the kernel resolves to the very file the
    descriptor holds: a job that swaps the path for a named pipe or a link after distrun's
    check is never read. A database in rollback-journal mode (MLflow's) is read as usual.
    """
    return f"file:/proc/self/fd/{fd}?mode=ro"


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
    parts = _relative_parts(root, relative)
    if not parts and not directory:
        raise UnsafeFileError(f"{root}: a folder, not a regular file")
    top = _open_step(str(root), _FOLDER_FLAGS, None, str(root))
    if directory:
        return _descend(top, parts, str(root))
    dir_fd = _descend(top, parts[:-1], str(root))
    try:
        return _open_last(parts[-1], os.O_RDONLY, 0, dir_fd, f"{root}/{'/'.join(parts)}")
    finally:
        os.close(dir_fd)


def open_folder_beneath(
    root: Path | str, relative: str, create_mode: int | None = None, *, replace_planted: bool = False
) -> int:
    """A descriptor of the folder `relative` inside `root`, with no link followed on any component.

    With `create_mode`, each folder missing on the way is made (`mode` less the umask) by mkdir
    relative to the open folder above it, then opened without following a link: mkdir never
    follows a link at its name, so a folder name the job swapped for a link (to anywhere, a
    host folder a container's rank cannot reach included) is refused, not created through.
    This is the one way distrun makes a folder in a job folder. Errors as `open_beneath`.

    With `replace_planted` too, a link or file at a folder's name is removed (never what a link
    points to) and the folder made in its place: for folders distrun owns outright, such as
    the place an attempt's logs are kept.
    """
    parts = _relative_parts(root, relative)
    top = _open_step(str(root), _FOLDER_FLAGS, None, str(root))
    return _descend(top, parts, str(root), create_mode, replace_planted)


def _relative_parts(root: Path | str, relative: str) -> list[str]:
    parts = [part for part in str(relative).split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafeFileError(f"{relative}: '..' is not allowed in a path inside {root}")
    return parts


def _make_folder(dir_fd: int, name: str, mode: int, replace_planted: bool) -> None:
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
    except FileExistsError:
        # A folder already, or something else: removed with `replace_planted`, else the open says what.
        if replace_planted and not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=dir_fd)
            os.mkdir(name, mode, dir_fd=dir_fd)


def _descend(
    dir_fd: int,
    parts: list[str] | tuple[str, ...],
    root: str,
    create_mode: int | None = None,
    replace_planted: bool = False,
) -> int:
    """The folder `parts` below the open folder `dir_fd` (which it takes over), opened one
    component at a time without following a link: a folder swapped for a link leads nowhere.
    With `create_mode`, each is made first where missing (`open_folder_beneath`)."""
    try:
        for index, part in enumerate(parts):
            if create_mode is not None:
                _make_folder(dir_fd, part, create_mode, replace_planted)
            below = _open_step(part, _FOLDER_FLAGS, dir_fd, f"{root}/{'/'.join(parts[: index + 1])}")
            os.close(dir_fd)
            dir_fd = below
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd


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


def read_user_file(path: Path | str, limit: int) -> bytes:
    """A file the user named (a requirements file, an ignore file): a link to one is fine, but
    it must be a regular file of at most `limit` bytes. A named pipe or a device in its place
    is refused before any read, and the open does not wait for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{path} is a folder", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{path} is {kind_of(info.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
        return read_fd(fd, limit, str(path))
    finally:
        os.close(fd)
