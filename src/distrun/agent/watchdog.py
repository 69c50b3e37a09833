"""A watchdog that outlives the agent: if the agent dies without saying goodbye (SIGKILL,
OOM kill, crash), it kills every process of the launch and records the job as lost.

It is forked twice, so that it is not the agent's child: a rank that walks its ancestry (its
parent, its parent's children) to kill whatever guards the job does not find it there. It holds
the read end of a pipe whose write end only the agent holds. When the agent exits for any
reason the kernel closes that end; the watchdog reads EOF. A clean end writes `done` first and
the watchdog leaves quietly.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from distrun.core.launch_leftovers import stop_launch_leftovers

_DONE = b"done"


class Watchdog:
    def __init__(self, pid: int, write_fd: int) -> None:
        self.pid = pid
        self._write_fd: int | None = write_fd

    @classmethod
    def start(cls, launch_id: str, on_lost: Callable[[], None]) -> Watchdog:
        """Fork the watchdog. Call before starting any thread (fork copies only this one)."""
        read_fd, write_fd = os.pipe()
        pid_r, pid_w = os.pipe()
        middle = os.fork()
        if middle == 0:  # only forks the watchdog and exits, so the watchdog is nobody's child here
            try:
                os.close(write_fd)
                os.close(pid_r)
                os.setsid()
                pid = os.fork()
                if pid == 0:
                    os.close(pid_w)
                    _watch(read_fd, launch_id, on_lost)
                else:
                    os.write(pid_w, str(pid).encode())
            finally:
                os._exit(0)
        os.close(read_fd)
        os.close(pid_w)
        os.waitpid(middle, 0)
        with os.fdopen(pid_r, "rb") as handle:
            pid = int(handle.read() or b"0")
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
        _wait_gone(self.pid, WAIT_SECONDS)


WAIT_SECONDS = 5.0


def _wait_gone(pid: int, timeout: float) -> None:
    """Wait for a process that is not our child (pidfd: no pid reuse race)."""
    import select

    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)


def _watch(read_fd: int, launch_id: str, on_lost: Callable[[], None]) -> None:
    # Its own session (set by the parent fork): a Ctrl-C or hang-up meant for the agent must
    # not reach the watchdog.
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
    stop_launch_leftovers(launch_id)
    on_lost()
