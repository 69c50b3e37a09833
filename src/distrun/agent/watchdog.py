"""A watchdog that outlives the agent: if the agent dies without saying goodbye (SIGKILL,
OOM kill, crash), it kills every process of the launch and records the job as lost.

It is a forked child holding the read end of a pipe whose write end only the agent holds.
When the agent exits for any reason the kernel closes that end; the watchdog reads EOF.
A clean end writes `done` first and the watchdog leaves quietly.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from distrun.agent.cgroup import remove_launch_cgroup
from distrun.agent.process_tree import kill_pids, marked_pids

_DONE = b"done"


class Watchdog:
    def __init__(self, pid: int, write_fd: int) -> None:
        self.pid = pid
        self._write_fd: int | None = write_fd

    @classmethod
    def start(cls, launch_id: str, on_lost: Callable[[], None]) -> Watchdog:
        """Fork the watchdog. Call before starting any thread (fork copies only this one)."""
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the watchdog
            try:
                os.close(write_fd)
                _watch(read_fd, launch_id, on_lost)
            finally:
                os._exit(0)
        os.close(read_fd)
        os.set_inheritable(write_fd, False)
        return cls(pid, write_fd)

    def release(self) -> None:
        """The agent ended cleanly: the watchdog exits without touching anything."""
        if self._write_fd is None:
            return
        try:
            os.write(self._write_fd, _DONE)
        except OSError:
            pass
        os.close(self._write_fd)
        self._write_fd = None
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _watch(read_fd: int, launch_id: str, on_lost: Callable[[], None]) -> None:
    # Its own session: a Ctrl-C or hang-up meant for the agent must not reach the watchdog.
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, read_fd)
    os.closerange(read_fd + 1, 1 << 16)
    received = b""
    while True:
        try:
            chunk = os.read(read_fd, 64)
        except InterruptedError:
            continue
        if not chunk:
            break
        received += chunk
    if received.endswith(_DONE):
        return
    # The agent is gone. Its direct children already got SIGKILL (PDEATHSIG); this catches
    # everything they started, also daemonized grandchildren: the whole cgroup where there is
    # one, then every process carrying the launch marker.
    remove_launch_cgroup(launch_id)
    for _ in range(50):
        pids = marked_pids(launch_id)
        if not pids:
            break
        kill_pids(pids, signal.SIGKILL)
        time.sleep(0.02)
    on_lost()
