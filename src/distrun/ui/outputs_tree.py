"""A job's outputs as the UI lists and serves them: ./outputs, ./logs and the named outputs.

The job's own processes write these folders, so a link is never listed or followed, and a
requested path is checked to stay inside its area before anything is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from distrun.core.safe_files import UnsafeFileError, open_beneath
from distrun.store.layout import ARTIFACT_DIRS, JobFolder

MAX_LISTED = 2000  # files listed per job page
MAX_SCANNED = 50_000  # folder entries looked at for one listing: a job that made millions costs a bounded time
MAX_DEPTH = 32  # folders below an area that are walked


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


@dataclass
class Listing:
    files: list[OutputFile] = field(default_factory=list)
    more: bool = False  # stopped at MAX_LISTED files or MAX_SCANNED entries
    problems: list[str] = field(default_factory=list)  # an area that is not a real folder


def list_outputs(folder: JobFolder) -> Listing:
    """The regular files of each area, walked by descriptor from the job folder, never through a link."""
    listing = Listing()
    budget = [MAX_SCANNED]
    for area in (*ARTIFACT_DIRS, "named-outputs"):
        root = area_root(folder, area)
        if root is None:
            continue
        try:
            fd = open_beneath(folder.root, root.relative_to(folder.root).as_posix(), directory=True)
        except FileNotFoundError:
            continue
        except OSError as exc:
            listing.problems.append(f"{area}: not listed: {exc}")
            continue
        try:
            _walk(fd, area, "", listing, budget, 0)
        finally:
            os.close(fd)
        if listing.more:
            break
    return listing


def _walk(fd: int, area: str, prefix: str, listing: Listing, budget: list[int], depth: int) -> None:
    entries: list[tuple[str, bool, int]] = []
    try:
        with os.scandir(fd) as scan:
            for entry in scan:
                budget[0] -= 1
                if budget[0] < 0:
                    listing.more = True
                    break
                if entry.is_dir(follow_symlinks=False):
                    entries.append((entry.name, True, 0))
                elif entry.is_file(follow_symlinks=False):
                    entries.append((entry.name, False, entry.stat(follow_symlinks=False).st_size))
    except OSError:
        return
    for name, is_dir, size in sorted(entries):
        if len(listing.files) >= MAX_LISTED:
            listing.more = True
            return
        if not is_dir:
            listing.files.append(OutputFile(area, prefix + name, size))
            continue
        if depth >= MAX_DEPTH:
            continue
        try:
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            continue  # swapped for a link (or removed) since it was listed
        try:
            _walk(child, area, f"{prefix}{name}/", listing, budget, depth + 1)
        finally:
            os.close(child)


def open_output(folder: JobFolder, area: str, relative: str) -> int:
    """A descriptor of one output file; FileNotFoundError, or UnsafeFileError if it is not a plain file in its area.

    Each part of the path is opened relative to its parent without following links, so a link
    planted anywhere on the way (or swapped in meanwhile) is refused.
    """
    root = area_root(folder, area)
    parts = [p for p in relative.split("/") if p]
    if root is None or not parts:
        raise FileNotFoundError(relative)
    if any(p in (".", "..") for p in parts):
        raise UnsafeFileError(f"{area}/{relative}: '.' and '..' are not allowed")
    return open_beneath(folder.root, "/".join([root.relative_to(folder.root).as_posix(), *parts]))
