"""Stopping what is left of a launch, from any process on its machine: its cgroup and its marked processes.

Every process of a launch carries the launch marker in its environment (`DISTRUN_LAUNCH_ID`,
which its children inherit) and, where cgroup v2 is writable, is a member of the launch's cgroup
(`distrun.agent.cgroup` creates it, `distrun.agent.process_tree` starts the processes). The
agent's watchdog stops what is left of a launch when the agent dies; the job index
(`distrun.store.index`) does when it finds a local launcher gone, in case the watchdog was
killed too. So this sits below both.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from distrun.core import procfs

LAUNCH_MARKER = "DISTRUN_LAUNCH_ID"
CGROUP_PREFIX = "distrun-"


def cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return Path(fields[1])
    except OSError:
        pass
    return None


def own_cgroup() -> str | None:
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
    mount, own = cgroup2_mount(), own_cgroup()
    if mount is None or own is None:
        return None
    # A fixed-length name: job names may be up to 255 characters, a cgroup name no longer.
    digest = hashlib.sha256(launch_id.encode()).hexdigest()[:20]
    return mount / own.lstrip("/") / f"{CGROUP_PREFIX}{digest}"


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
        remove_cgroup(path)


def _find_launch_cgroup(launch_id: str) -> Path | None:
    mount = cgroup2_mount()
    if mount is None:
        return None
    wanted = f"{CGROUP_PREFIX}{hashlib.sha256(launch_id.encode()).hexdigest()[:20]}"
    for folder, dirs, _ in os.walk(mount):
        if wanted in dirs:
            return Path(folder) / wanted
    return None


def remove_cgroup(path: Path) -> None:
    # A cgroup with members left (a process stuck in the kernel) cannot be removed: leave it.
    for _ in range(20):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def marked_pids(launch_id: str, exclude: Iterable[int] = ()) -> list[int]:
    """Every live process that carries this launch's marker, or was reparented to us."""
    needle = f"{LAUNCH_MARKER}={launch_id}".encode()
    skip = {os.getpid(), *exclude}
    return [
        pid for pid, environ in procfs.environments() if pid not in skip and needle in environ and procfs.is_alive(pid)
    ]


def kill_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_launch_leftovers(launch_id: str) -> None:
    """Kill every process of a launch whose agent is gone: its cgroup, then the marked ones.

    Also run by the first reader that finds the agent gone (`store.index`), in case the
    watchdog itself was killed.
    """
    remove_launch_cgroup(launch_id)
    for _ in range(50):
        pids = marked_pids(launch_id)
        if not pids:
            break
        kill_pids(pids, signal.SIGKILL)
        time.sleep(0.02)
