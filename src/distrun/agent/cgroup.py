"""A cgroup v2 folder per launch, where the machine lets distrun create one.

The launch marker in the environment (`process_tree.marked_pids`) finds every process that
kept its environment; a process that daemonized AND cleared its environment (`env -i`,
`execve(..., {})`) is invisible to it once it leaves our subreaper tree, e.g. after the agent
itself was SIGKILLed. A cgroup cannot be left: every process a member starts is a member,
whatever it does to its session, parents or environment. So where cgroup v2 is mounted and
writable (root, or a delegated subtree), each job process joins the launch's cgroup before it
executes, and stopping the launch kills the whole cgroup. Elsewhere `create` returns None and
the other layers do the work alone.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PREFIX = "distrun-"


def _cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return Path(fields[1])
    except OSError:
        pass
    return None


def _own_cgroup() -> str | None:
    """This process's cgroup v2 path ("0::/some/path" in /proc/self/cgroup)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def cgroup_path(launch_id: str) -> Path | None:
    """Where the launch's cgroup lives: beside nothing, inside the cgroup we run in.

    Computed the same way by the agent and by its watchdog (forked from it, so in the same
    cgroup), which is how the watchdog finds it without being told.
    """
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return None
    # A fixed-length name: job names may be up to 255 characters, a cgroup name no longer.
    digest = hashlib.sha256(launch_id.encode()).hexdigest()[:20]
    return mount / own.lstrip("/") / f"{_PREFIX}{digest}"


class LaunchCgroup:
    def __init__(self, path: Path, procs_fd: int) -> None:
        self.path = path
        self._procs_fd = procs_fd

    @classmethod
    def create(cls, launch_id: str) -> LaunchCgroup | None:
        """The launch's cgroup, or None where this machine does not allow one."""
        path = cgroup_path(launch_id)
        if path is None:
            return None
        try:
            path.mkdir(exist_ok=True)
        except OSError:
            return None
        try:
            procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY)
        except OSError:
            _remove(path)
            return None
        return cls(path, procs_fd)

    @contextmanager
    def births(self) -> Iterator[bool]:
        """While inside, the calling process is a member: every process it starts is born one.

        Joining in each child between fork and exec runs Python in every child and costs the
        fast (vfork) spawn: 128 ranks took 2 s to start that way against 0.4 s without.
        Joining once around the spawns costs two writes, and a child cannot run anything before
        it is a member. Yields whether this process joined; on the way out it goes back to the
        cgroup it came from. Where it cannot (its own cgroup is not writable) it yields False,
        and each child joins by itself (`join`).
        """
        home = _own_procs_fd()
        if home < 0:
            yield False
            return
        try:
            os.write(self._procs_fd, b"0")
        except OSError:
            os.close(home)
            yield False
            return
        try:
            yield True
        finally:
            try:
                # Must succeed: stopping the launch kills every member of its cgroup.
                os.write(home, b"0")
            finally:
                os.close(home)

    def join(self) -> None:
        """Move the calling process into the cgroup; runs in a child between fork and exec."""
        try:
            os.write(self._procs_fd, b"0")
        except OSError:
            pass  # the launch marker still finds it

    def pids(self) -> list[int]:
        return member_pids(self.path)

    def kill(self) -> None:
        kill_members(self.path)

    def close(self) -> None:
        """Kill what is left, then remove the (empty) cgroup."""
        if self._procs_fd >= 0:
            os.close(self._procs_fd)
            self._procs_fd = -1
        kill_members(self.path)
        _remove(self.path)


def _own_procs_fd() -> int:
    """cgroup.procs of the cgroup this process runs in, open for writing; -1 where it cannot be."""
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return -1
    try:
        return os.open(mount / own.lstrip("/") / "cgroup.procs", os.O_WRONLY)
    except OSError:
        return -1


def member_pids(path: Path) -> list[int]:
    try:
        text = (path / "cgroup.procs").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(line) for line in text.split()]


def kill_members(path: Path, wait: float = 2.0) -> None:
    """SIGKILL every member, also those forking while we kill (cgroup.kill is atomic)."""
    if not member_pids(path):
        return
    try:
        (path / "cgroup.kill").write_text("1", encoding="ascii")
    except OSError:  # kernels before 5.14: one by one, until none is left
        for _ in range(50):
            pids = member_pids(path)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
    give_up = time.monotonic() + wait
    while member_pids(path) and time.monotonic() < give_up:
        time.sleep(0.01)


def remove_launch_cgroup(launch_id: str) -> None:
    """For the watchdog, or a reader: kill and remove the cgroup of a launch whose agent died.

    The watchdog runs in the agent's cgroup and computes the same path; a reader may run in
    another one, so it looks for the launch's folder name anywhere in the hierarchy.
    """
    path = cgroup_path(launch_id)
    if path is None or not path.is_dir():
        path = _find_launch_cgroup(launch_id)
    if path is not None and path.is_dir():
        kill_members(path)
        _remove(path)


def _find_launch_cgroup(launch_id: str) -> Path | None:
    mount = _cgroup2_mount()
    if mount is None:
        return None
    wanted = f"{_PREFIX}{hashlib.sha256(launch_id.encode()).hexdigest()[:20]}"
    for folder, dirs, _ in os.walk(mount):
        if wanted in dirs:
            return Path(folder) / wanted
    return None


def _remove(path: Path) -> None:
    # A cgroup with members left (a process stuck in the kernel) cannot be removed: leave it.
    for _ in range(20):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
