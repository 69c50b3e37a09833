"""Blocking work of the web UI (the job index, a job's files) on worker threads, each call timed.

Nothing blocking runs on the event loop: one read that never ends there would stop every
route. The reads of a job's folder are made not to block (distrun.ui.job_files), and this is
the backstop for whatever still could (a stalled network file system, a locked index): each
call gets at most `seconds`, then the request is answered with a clear error and the thread
is left to finish on its own. Its own threads are bounded too, apart from Starlette's pool
(static files and downloads keep theirs): with `threads` calls still running, new ones are
refused at once instead of queueing behind them.
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
    """Every thread is still busy with calls that took too long."""


class _Call:
    __slots__ = ("given_up", "started")

    def __init__(self) -> None:
        self.started = False
        self.given_up = False


class Offload:
    def __init__(self, seconds: float, threads: int = 16) -> None:
        self.seconds = seconds
        self.threads = threads
        self.busy = 0  # calls dispatched and not returned, those given up on included
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(threads)

    async def __call__(self, func: Callable[..., T], *args: object, seconds: float | None = None) -> T:
        call = _Call()
        with self._lock:
            if self.busy >= self.threads:
                raise Overloaded(f"{self.busy} reads of job files are still running after {self.seconds:g} s")
            self.busy += 1

        def run() -> T | None:
            with self._lock:
                if call.given_up:
                    return None  # the request was answered before this thread got to it
                call.started = True
            try:
                return func(*args)
            finally:
                with self._lock:
                    self.busy -= 1

        limit = self.seconds if seconds is None else seconds
        try:
            with anyio.fail_after(limit):
                return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=self._limiter)  # type: ignore[return-value]
        except TimeoutError:
            raise SlowRead(f"reading the job's files took longer than {limit:g} s") from None
        finally:
            with self._lock:
                if not call.started and not call.given_up:
                    call.given_up = True
                    self.busy -= 1
