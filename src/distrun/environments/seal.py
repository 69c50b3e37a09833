"""A built environment stays as it was built: read-only, and checked before each job uses it.

Ranks run as the user who runs distrun, so a read-only bit stops a job that writes by accident,
not one that means it: the owner may chmod it back. What no job can set back is the change time
(ctime) the kernel gives an inode on every change: its content, its mode, its links, a rename.
The seal is a digest of every entry's path, type, mode, size, mtime, ctime and inode, taken once
the build is done; an environment whose entries no longer give that digest (a file edited,
added, removed or replaced) is built again before a job uses it.

The folder's own entry is left out (the build renames it into place, and each use writes its
last-used time there), and so are the two files distrun writes at its top after sealing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

MANIFEST = "distrun-env.json"
LAST_USED = "distrun-last-used"
_UNSEALED = frozenset((MANIFEST, LAST_USED))  # at the top only
_NO_WRITE = ~0o222


def make_read_only(root: Path) -> None:
    """Take write permission off everything below `root` (links are left alone: they have none)."""
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode):
                os.chmod(path, stat.S_IMODE(mode) & _NO_WRITE)


def seal_of(root: Path) -> str:
    """The digest of every entry below `root`, in name order."""
    digest = hashlib.sha256()
    _add_folder(digest, os.fsencode(root), b"", top=True)
    return digest.hexdigest()


def _add_folder(digest: hashlib._Hash, folder: bytes, relative: bytes, top: bool) -> None:
    with os.scandir(folder) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        if top and os.fsdecode(entry.name) in _UNSEALED:
            continue
        info = entry.stat(follow_symlinks=False)
        path = relative + b"/" + entry.name
        digest.update(
            b"%s\0%o\0%d\0%d\0%d\0%d\n"
            % (path, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        )
        if stat.S_ISDIR(info.st_mode):
            _add_folder(digest, entry.path, path, top=False)


def remove_tree(root: Path) -> None:
    """Remove a folder that may be read-only inside (a sealed environment, a build cut short).

    Each folder is made writable through a descriptor opened without following a link, so a
    folder swapped for a link never makes distrun chmod what it points to."""
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            try:
                fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.fchmod(fd, 0o700)
            except OSError:
                pass
            finally:
                os.close(fd)
    shutil.rmtree(root, ignore_errors=True)
