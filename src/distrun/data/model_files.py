"""A registered model version's files: copied once into distrun's store, then read-only.

Two kinds of source, read two ways:

- a job's files (its named output, its MLflow run's artifacts): the job may have replaced any of
  them with a link or a named pipe, before or after it ended. They are read as the launcher
  reads a job folder (`distrun.core.safe_files.open_beneath`): each folder opened without
  following a link, from a trusted root down; a link, pipe, socket or device is left out and
  named, never followed or read.
- the user's own file or folder (`--path ./model`): the user's links are followed (a model
  folder of links into a download cache is common), a pipe or device is still never read, and
  a folder reached twice (a link cycle) is copied once.

The copy holds regular files and folders only, so nothing in it points back at the source: a
later change of the source changes nothing. Its files are made 0o444 and its folders 0o555.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from distrun.core.errors import DistrunError
from distrun.core.file_modes import write_all
from distrun.core.safe_files import UnsafeFileError, kind_of, open_beneath

READ_ONLY_FILE = 0o444
READ_ONLY_FOLDER = 0o555
_CHUNK = 1 << 20


@dataclass
class CopyReport:
    """What was copied, and what was left out (with why)."""

    files: int = 0
    bytes: int = 0
    left_out: list[str] = field(default_factory=list)


def copy_from_job(root: Path, relative: str, target: Path) -> CopyReport:
    """Copy `root/relative` (a file or folder a job could write) to `target`, following no link."""
    report = CopyReport()
    try:
        fd = open_beneath(root, relative, directory=True)
    except NotADirectoryError:
        fd = None
    except UnsafeFileError as exc:
        if not _is_not_a_folder(exc):
            raise DistrunError(f"{root / relative} cannot be registered: {exc}", _LINK_HINT) from None
        fd = None
    except FileNotFoundError:
        raise DistrunError(f"{root / relative} does not exist", "check the path of the output") from None
    if fd is None:  # a single file
        _copy_job_file(root, relative, target, report)
    else:
        try:
            _copy_job_folder(root, relative, fd, target, report)
        finally:
            os.close(fd)
    return report


def copy_from_user(source: Path, target: Path, skip: Path) -> CopyReport:
    """Copy the user's file or folder `source` to `target` (links followed, specials left out);
    `skip` (DISTRUN_HOME: the copy itself is made there) is left out wherever it is met."""
    report = CopyReport()
    try:
        info = source.stat()
    except OSError as exc:
        raise DistrunError(f"{source} cannot be read: {exc.strerror or exc}", "check the path") from None
    if stat.S_ISDIR(info.st_mode):
        _copy_user_folder(source, target, report, {_identity(skip)})
    elif stat.S_ISREG(info.st_mode):
        _copy_user_file(source, target, report)
    else:
        raise DistrunError(f"{source} is {kind_of(info.st_mode)}, not a file or folder", "give a file or folder")
    return report


def make_read_only(top: Path) -> None:
    """Every file below `top` 0o444 and every folder 0o555 (the folders last, deepest first)."""
    for folder, _folders, files in os.walk(top, topdown=False):
        for name in files:
            os.chmod(os.path.join(folder, name), READ_ONLY_FILE, follow_symlinks=False)
        os.chmod(folder, READ_ONLY_FOLDER)


def make_writable(top: Path) -> None:
    """Undo `make_read_only` on folders, so that `top` can be removed (a failed registration)."""
    for folder, _folders, _files in os.walk(top):
        os.chmod(folder, 0o700)


_LINK_HINT = "a registered model holds the job's own files: replace the link with the file it points to"


def _is_not_a_folder(exc: OSError) -> bool:
    return "not a folder" in str(exc) or "Not a directory" in str(exc) or "regular file" in str(exc)


def _copy_job_folder(root: Path, relative: str, fd: int, target: Path, report: CopyReport) -> None:
    target.mkdir(mode=0o700, exist_ok=True)
    with os.scandir(fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        child = f"{relative}/{name}" if relative else name
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            below = open_beneath(root, child, directory=True)
            try:
                _copy_job_folder(root, child, below, target / name, report)
            finally:
                os.close(below)
        elif stat.S_ISREG(mode):
            _copy_job_file(root, child, target / name, report)
        else:
            report.left_out.append(f"{child}: {kind_of(mode)}, not followed or read")


def _copy_job_file(root: Path, relative: str, target: Path, report: CopyReport) -> None:
    try:
        reader = open_beneath(root, relative)
    except UnsafeFileError as exc:
        report.left_out.append(f"{relative}: {exc}")
        return
    _copy_descriptor(reader, target, report)


def _copy_user_folder(source: Path, target: Path, report: CopyReport, seen: set[tuple[int, int]]) -> None:
    if _identity(source) in seen:
        report.left_out.append(f"{source}: distrun's own store, or a folder already copied (a link cycle)")
        return
    seen.add(_identity(source))
    target.mkdir(mode=0o700, exist_ok=True)
    for child in sorted(source.iterdir()):
        try:
            mode = child.stat().st_mode
        except OSError as exc:
            report.left_out.append(f"{child}: {exc.strerror or exc}")
            continue
        if stat.S_ISDIR(mode):
            _copy_user_folder(child, target / child.name, report, seen)
        elif stat.S_ISREG(mode):
            _copy_user_file(child, target / child.name, report)
        else:
            report.left_out.append(f"{child}: {kind_of(mode)}, not read")


def _identity(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (-1, -1)
    return (info.st_dev, info.st_ino)


def _copy_user_file(source: Path, target: Path, report: CopyReport) -> None:
    reader = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(reader).st_mode):  # swapped for a pipe since it was looked at
        os.close(reader)
        report.left_out.append(f"{source}: not a regular file, not read")
        return
    os.set_blocking(reader, True)
    _copy_descriptor(reader, target, report)


def _copy_descriptor(reader: int, target: Path, report: CopyReport) -> None:
    """Copy the open regular file `reader` (closed here) to the new file `target`."""
    try:
        writer = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            while chunk := os.read(reader, _CHUNK):
                write_all(writer, chunk)
                report.bytes += len(chunk)
        finally:
            os.close(writer)
    finally:
        os.close(reader)
    report.files += 1
