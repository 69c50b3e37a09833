"""Ports lent to running jobs, so two jobs started at the same moment never get the same one.

A port is found free by binding it, then let go so the framework can bind it; in between,
another distrun starting at the same moment could find it free too. So every port given to
a job is also leased: an exclusive `flock` on a file named after the port, held by the process
supervising the job until the job ends. The kernel drops the lock when that process exits,
however it exits (SIGKILL included), so a lease never outlives its job and nothing needs
cleaning up. The folder is per user (leases do not cross users; the bind check still does).
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from pathlib import Path


def lease_dir() -> Path | None:
    """A folder only this user can write, or None if none can be had safely."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime and os.path.isdir(runtime) else Path(tempfile.gettempdir())
    path = base / f"distrun-ports-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    # In a shared /tmp someone else could have put a folder or a link there first.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None
    return path


class PortLeases:
    """The leases one job holds; `release` (or the process ending) gives them back."""

    def __init__(self) -> None:
        self._folder = lease_dir()
        self._held: dict[int, int] = {}  # port -> open lock file

    def take(self, port: int) -> bool:
        """Lease `port`; False if another running job holds it."""
        if self._folder is None:
            return True  # no safe folder: the bind check alone decides, as before leases
        try:
            fd = os.open(self._folder / f"{port}.lock", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._held[port] = fd
        return True

    def release(self) -> None:
        for fd in self._held.values():
            os.close(fd)  # closing the last descriptor drops the lock
        self._held.clear()
