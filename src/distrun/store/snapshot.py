"""Copy a job's `code` folder into its job folder, so edits made later do not change a run.

`.amlignore` (Azure ML's name) or else `.gitignore` patterns are honoured, with git's
syntax. Symbolic links that point inside the folder are kept as links, rewritten relative
so that they point inside the snapshot (an absolute one would still point at the original,
which may change after submission); one that points outside is refused: the snapshot would
otherwise expose or depend on files elsewhere. Anything but files, folders and links (a
named pipe would block the copy forever, a socket or device cannot be copied) is refused.
Copies keep their permission bits less the umask and less others' write (`file_modes`).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.file_modes import DIR_MODE, copied_mode, make_dirs
from distrun.core.safe_files import kind_of, read_user_file

IGNORE_FILES = (".amlignore", ".gitignore")
IGNORE_FILE_LIMIT = 16 << 20
INDEX_FILE_PREFIX = "jobs.db"  # jobs.db, jobs.db-wal, jobs.db-shm in DISTRUN_HOME
ALWAYS_SKIPPED = (".git", "__pycache__")


def _ignore_spec(source: Path) -> Any:
    for name in IGNORE_FILES:
        path = source / name
        if path.is_file():
            import pathspec

            try:
                text = read_user_file(path, IGNORE_FILE_LIMIT).decode("utf-8", errors="replace")
            except OSError as exc:
                raise DistrunError(
                    f"cannot read {path}: {exc.strerror or exc}", f"{name} must be a regular text file"
                ) from None
            return pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    return None


def code_skip(source: Path, skip: tuple[Path, ...] = ()) -> Callable[[str, bool], bool]:
    """What a snapshot of `source` leaves out, as a test of (path relative to `source`, is a
    folder): the same rules as `snapshot_code`, for hashing a code folder as it would be copied."""
    spec = _ignore_spec(source)
    left_out = set()
    for path in skip:
        try:
            left_out.add(path.resolve().relative_to(source.resolve()).as_posix())
        except ValueError:
            continue

    def skipped(relative: str, is_folder: bool) -> bool:
        if relative in left_out:
            return True
        if is_folder:
            return relative.rsplit("/", 1)[-1] in ALWAYS_SKIPPED or (
                spec is not None and spec.match_file(relative + "/")
            )
        return spec is not None and spec.match_file(relative)

    return skipped


def snapshot_code(source: Path, target: Path, skip: tuple[Path, ...] = ()) -> int:
    """Copy `source` to `target`; returns the number of files copied.

    `target` and the folders in `skip` (DISTRUN_HOME) are left out when they lie inside
    `source`: a code folder holding the job folder would otherwise copy the copy being made.
    """
    if not source.is_dir():  # deleted (or replaced) after the job was loaded: os.walk would copy nothing
        raise DistrunError(
            f"code folder {source} no longer exists (it was there when the job file was read)",
            "put the code folder back, or fix `code` in the job file, and run the job again",
        )
    source = source.resolve()
    spec = _ignore_spec(source)
    copied = 0
    make_dirs(target)
    skipped_dirs = {target.resolve(), *(path.resolve() for path in skip)}
    homes = {path.resolve() for path in skip}
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        rel_dir = here.relative_to(source)
        kept_dirs = []
        for name in sorted(dirs):
            rel = (rel_dir / name).as_posix()
            if name in ALWAYS_SKIPPED or (spec is not None and spec.match_file(rel + "/")):
                continue
            if here / name in skipped_dirs or (here in homes and name == "jobs"):
                continue
            if (here / name).is_symlink():
                _link(here / name, source, target / rel_dir / name)
                continue
            kept_dirs.append(name)
            (target / rel_dir / name).mkdir(mode=DIR_MODE, exist_ok=True)
        dirs[:] = kept_dirs
        for name in sorted(files):
            rel = (rel_dir / name).as_posix()
            if spec is not None and spec.match_file(rel):
                continue
            if here in homes and name.startswith(INDEX_FILE_PREFIX):
                continue  # the code folder is DISTRUN_HOME itself: its index is not code
            src = here / name
            if src.is_symlink():
                _link(src, source, target / rel_dir / name)
            else:
                try:
                    _copy_file(src, target / rel_dir / name)
                except FileNotFoundError:
                    raise DistrunError(
                        f"{src} was removed while the code folder was being copied",
                        "let whatever changes the code folder finish, then run the job again",
                    ) from None
                copied += 1
    return copied


def _copy_file(src: Path, dest: Path) -> None:
    refuse_special_file(src, "code folder")
    shutil.copy2(src, dest, follow_symlinks=False)
    os.chmod(dest, copied_mode(os.stat(dest).st_mode))


def refuse_special_file(src: Path, what: str) -> None:
    """A named pipe would block a copy forever, a device would fill the disk: refused."""
    kind = _special_kind(os.lstat(src).st_mode)
    if kind:
        hint = (
            "remove it from the code folder, or add it to .amlignore"
            if what == "code folder"
            else ("remove it from the input folder: distrun copies only files, folders and links")
        )
        raise DistrunError(f"{what}: {src} is {kind}, not a regular file, and cannot be copied into the job", hint)


def _special_kind(mode: int) -> str | None:
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode) else kind_of(mode)


def _link(link: Path, root: Path, dest: Path) -> None:
    try:
        pointed = (link.parent / os.readlink(link)).resolve(strict=True)
    except (RuntimeError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):  # a dangling link: kept as it is, pointing nowhere
            pointed = (link.parent / os.readlink(link)).resolve()
        else:
            raise DistrunError(
                f"code folder: {link} is a symbolic link loop (it leads back to itself)",
                "remove the link, or add it to .amlignore",
            ) from None
    if pointed != root and root not in pointed.parents:
        raise DistrunError(
            f"code folder: {link} is a symbolic link to {pointed}, outside the code folder {root}",
            "copy the file into the code folder, or add the link to .amlignore",
        )
    # Relative to the link's own folder: the same file, inside the snapshot.
    os.symlink(os.path.relpath(pointed, link.parent), dest)
