"""Permissions of what distrun creates: the user's umask applies, and others never get write.

A world-writable job folder would let any local user change a job's code, inputs or logs
before or while it runs. So folders are created 0o775 and files 0o664, which the umask then
narrows (022 gives 0o755/0o644, 077 gives 0o700/0o600), and copies of the user's files (the
code snapshot, downloaded inputs) keep their own bits less the umask and less others' write.
DISTRUN_HOME itself, which holds the job index, config.yaml and every job folder, is created
without write for group or others whatever the umask (HOME_MODE).
"""

from __future__ import annotations

import os
from pathlib import Path

from distrun.core.safe_files import UnsafeFileError, open_folder_beneath, open_regular

DIR_MODE = 0o775
FILE_MODE = 0o664
_OTHERS_WRITE = 0o002
_GROUP_OTHERS_WRITE = 0o022
HOME_MODE = DIR_MODE & ~_GROUP_OTHERS_WRITE  # 0o755, which the umask can only narrow


def current_umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no read-only way elsewhere; put it straight back
    os.umask(mask)
    return mask


def copied_mode(source_mode: int) -> int:
    """The bits a copy of a user's file gets: its own, less the umask and others' write."""
    return source_mode & 0o7777 & ~current_umask() & ~_OTHERS_WRITE


def _create_missing(path: Path, mode: int) -> list[Path]:
    """`mkdir -p` with `mode` for every folder created (Path.mkdir gives parents 0o777); the
    folders this call created, outermost first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    created = []
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=mode)
        except FileExistsError:
            continue
        created.append(folder)
    return created


def make_dirs(path: Path) -> None:
    """`mkdir -p` where every folder created gets DIR_MODE."""
    _create_missing(path, DIR_MODE)


def make_home(home: Path) -> None:
    """DISTRUN_HOME, and any missing folder above it, created HOME_MODE where missing.

    A folder already there keeps its bits: distrun never changes the permissions of a folder
    it did not create. One it creates is checked after, in case the filesystem did not apply
    the mode as asked.
    """
    for folder in _create_missing(home, HOME_MODE):
        mode = folder.stat().st_mode & 0o7777
        if mode & _GROUP_OTHERS_WRITE:
            folder.chmod(mode & ~_GROUP_OTHERS_WRITE)


def create_file(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """A new file holding `data`, created `mode` (less the umask): never an existing file, never
    through a link (FileExistsError for whatever is there)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (os.write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # whatever is there (a planted link, say) is never written through
    try:
        create_file(tmp, data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise


def write_beneath(root: Path, folder: str, name: str, data: bytes) -> None:
    """`root/folder/name` holding `data`, whole or not at all, where the job's processes can write.

    `folder` is made and opened one component at a time without following a link
    (`safe_files.open_folder_beneath`), and the file is written relative to that open folder (a
    temporary file created O_EXCL|O_NOFOLLOW, then renamed over the name): whatever the job
    planted, nothing is created or written outside `root`. OSError (UnsafeFileError for a link)
    otherwise.
    """
    make_dirs(root)  # the job folder itself (distrun's, above anything the job can replace)
    dir_fd = open_folder_beneath(root, folder, DIR_MODE)
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


def write_file_beneath(root: Path, path: Path, data: bytes) -> None:
    """`write_file` for a file `path` inside the job folder `root` (`write_beneath`): no folder
    between them is followed if it is a link, and each missing one is made."""
    relative = _inside(root, path)
    write_beneath(root, relative.parent.as_posix(), relative.name, data)


def _inside(root: Path, path: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        raise UnsafeFileError(f"{path} is not inside {root}") from None


def make_dirs_beneath(root: Path, relative: str) -> None:
    """`mkdir -p root/relative` where the job's processes can write: no component below `root`
    followed if it is a link (`safe_files.open_folder_beneath`); `root` itself is made with
    `make_dirs` where missing. UnsafeFileError for a planted link or file on the way."""
    make_dirs(root)
    os.close(open_folder_beneath(root, relative, DIR_MODE))


def open_append(path: Path, root: Path | None = None) -> int:
    """A log file, created FILE_MODE, for appending (and reading back through the same descriptor).

    Never through a link, never a named pipe or device: the job's processes can write the
    folder and may have planted one under the name (`safe_files`). With `root` (the job folder
    `path` lies in), no folder between them is followed if it is a link either.
    """
    return open_regular(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, FILE_MODE, root=root)


def open_append_beneath(root: Path, path: Path) -> int:
    """`open_append` of `path` inside the job folder `root`, its folder made first where missing,
    with no folder between them followed if it is a link (`make_dirs_beneath`)."""
    make_dirs_beneath(root, _inside(root, path).parent.as_posix())
    return open_append(path, root=root)
