"""A parent's wait for its children: the running children's supervisors on this machine as pidfds.

A child whose supervisor is a process of this machine (a local job's `distrun` supervisor, a
sweep step's background supervisor) is waited on through a pidfd that becomes readable once that
process exited: the parent wakes when a child ends, not at the next tick of a poll. A child an
engine supervises (Slurm, Ray, Kubernetes) has its record read instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distrun.store.index import JobRecord

POLL_SECONDS = 0.05  # how often the records of children whose supervisor cannot be waited on are read
IDLE_WAIT_SECONDS = 0.5  # the longest wait while every running child's supervisor can be waited on


class ChildExits:
    """The running children's supervisors on this machine, as pidfds: readable once one exited."""

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}

    def watch(self, key: str, record: JobRecord) -> None:
        """Keep a pidfd of the child's supervisor, when it is a process of this machine, opened while
        the record's start time still matches it (its pid not reused); otherwise its record is polled."""
        import socket

        from distrun.store.index import process_start_time

        pid = record.launcher_pid
        if pid is None or pid == os.getpid() or record.backend_id or record.launcher_host != socket.gethostname():
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone already, or a kernel without pidfds
            return
        if process_start_time(pid) != record.launcher_started:
            os.close(fd)
            return
        self.fds[key] = fd

    def forget(self, key: str) -> None:
        if key in self.fds:
            os.close(self.fds.pop(key))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def wait(self, running: Iterable[str], longest: float = IDLE_WAIT_SECONDS) -> None:
        """Until a running child's supervisor exits (it wrote the job's end first), or `longest`
        passed: at once after a child ends, not at the next tick of a poll."""
        import select

        running = list(running)
        watched = {self.fds[key]: key for key in running if key in self.fds}
        if not watched or len(watched) < len(running):
            time.sleep(min(POLL_SECONDS, longest))  # a child without a supervisor here: its record is read
            return
        ready, _, _ = select.select(list(watched), [], [], longest)
        for fd in ready:  # each fires once: a record not yet ended after it (a killed supervisor) is read
            self.forget(watched[fd])
