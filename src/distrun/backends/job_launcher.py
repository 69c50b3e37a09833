"""The process that drives a job to its end becomes the job's launcher, on any backend.

Local and Ray jobs are both driven by a `distrun` process on this machine. Before that process
starts anything it (1) forks a watchdog that records "launcher lost" if the process dies
without writing the job's end (a SIGKILL, an out-of-memory kill), and (2) writes its pid into
the record, so that `job cancel` from any shell can signal it. A job canceled before this
point is not started at all. Stop signals must already be held (agent.stop_signals) by the
caller, so that a cancel in between is never lost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from distrun.agent.watchdog import Watchdog
from distrun.store.index import JobIndex
from distrun.store.layout import Layout


@contextmanager
def acting_as_launcher(
    layout: Layout, name: str, launch_id: str, also_when_lost: Callable[[], None] | None = None
) -> Iterator[bool]:
    """Yields False when the job ended (was canceled) before it could start: run nothing then.

    The watchdog is forked first, before the caller starts any thread (Ray's among them).
    `also_when_lost`: what else the watchdog does after sweeping the launch's processes
    (remove the job's containers, which its processes' death leaves behind).
    """

    def lost() -> None:
        if also_when_lost is not None:
            also_when_lost()
        JobIndex(layout.db_path).mark_launcher_lost(name)

    watchdog = Watchdog.start(launch_id, lost)
    try:
        yield JobIndex(layout.db_path).set_launcher(name, os.getpid())
    finally:
        watchdog.release()
