"""Blocking work of the web UI (the job index, a job's files) on worker threads, each call timed.

Nothing blocking runs on the event loop: one read that never ends there would stop every
route. The reads of a job's folder are made not to block (distrun.ui.job_files), and this is
the backstop for whatever still could (a stalled network file system, a locked index): each
call gets at most `seconds`, waiting for a thread included, then the request is answered with
a clear error and the thread is left to finish on its own, its place freed for other calls.
Those threads are counted: with `stuck_limit` of them still running, new calls are refused at
once, so a job cannot make the server start threads without end. Starlette's own pool (static
files, downloads, cancel) is apart from these threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class SlowRead(Exception):
    """A call took longer than its time limit; its thread was left to end on its own."""


class Overloaded(Exception):
    """Too many calls given up on are still running: new ones are refused until some end."""


class _Call:
    __slots__ = ("finished", "given_up", "started")

    def __init__(self) -> None:
        self.started = False
        self.finished = False
        self.given_up = False


class Offload:
    def __init__(self, seconds: float, threads: int = 16, stuck_limit: int = 64) -> None:
        self.seconds = seconds
        self.stuck = 0  # calls given up on whose threads still run
        self.stuck_limit = stuck_limit
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(threads)

    async def __call__(self, func: Callable[..., T], *args: object, seconds: float | None = None) -> T:
        if self.stuck >= self.stuck_limit:
            raise Overloaded(f"{self.stuck} reads of job files are still running long after their time limit")
        call = _Call()

        def run() -> T | None:
            with self._lock:
                if call.given_up:
                    return None  # the request was answered before this thread got to it
                call.started = True
            try:
                return func(*args)
            finally:
                with self._lock:
                    call.finished = True
                    if call.given_up:
                        self.stuck -= 1

        limit = self.seconds if seconds is None else seconds
        try:
            with anyio.fail_after(limit):
                return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=self._limiter)  # type: ignore[return-value]
        except TimeoutError:
            raise SlowRead(f"reading the job's files took longer than {limit:g} s") from None
        finally:
            with self._lock:
                if not call.finished:  # timed out, or the client went away: the thread runs on alone
                    call.given_up = True
                    if call.started:
                        self.stuck += 1
