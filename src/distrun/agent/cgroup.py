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

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distrun.core.launch_leftovers import (
    cgroup2_mount,
    cgroup_path,
    kill_members,
    member_pids,
    own_cgroup,
    remove_cgroup,
    remove_launch_cgroup,
)

# What finds and stops a launch's cgroup from outside (the watchdog, the job index) is
# `distrun.core.launch_leftovers`'s; here, the agent's side: creating it and starting ranks in it.
__all__ = ["LaunchCgroup", "cgroup_path", "kill_members", "member_pids", "remove_launch_cgroup"]


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
            remove_cgroup(path)
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
        remove_cgroup(self.path)


def _own_procs_fd() -> int:
    """cgroup.procs of the cgroup this process runs in, open for writing; -1 where it cannot be."""
    mount, own = cgroup2_mount(), own_cgroup()
    if mount is None or own is None:
        return -1
    try:
        return os.open(mount / own.lstrip("/") / "cgroup.procs", os.O_WRONLY)
    except OSError:
        return -1
