"""When a gang has made no progress for limits.hang_timeout seconds.

Progress is any output from any process (a byte on stdout or stderr), or a metric logged to
the job's MLflow run. Output is seen by the gang as it comes; the metric store is asked only
once the output has been silent for most of the timeout (a query or two per timeout, not one
per line).

Reading every process's stack takes time (py-spy, some 30 ms of a loaded core a process), so
the read starts `lead` seconds before the timeout, while the job is already silent: at the
timeout the stacks are ready and the job ends at once. Stacks read before a later sign of
progress are thrown away.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The read's head start: a base, and more for each process, at most half the timeout.
LEAD_SECONDS = 1.0
LEAD_PER_PROCESS = 0.04


def read_lead(timeout: float, processes: int) -> float:
    return min(timeout / 2, LEAD_SECONDS + LEAD_PER_PROCESS * processes)


class HangWatch:
    def __init__(
        self, timeout: float | None, last_metric: Callable[[], float | None] | None, lead: float = 0.0
    ) -> None:
        self.timeout = timeout
        self.last_metric = last_metric
        self.lead = lead
        self.last_progress = time.monotonic()
        self.check_at: float | None = None if timeout is None else self.last_progress + timeout

    @property
    def read_at(self) -> float | None:
        """When the stacks' read should start, if the silence goes on."""
        return None if self.check_at is None else self.check_at - self.lead

    def output_seen(self) -> None:
        if self.timeout is not None:
            self.last_progress = time.monotonic()
            self.check_at = self.last_progress + self.timeout

    def due(self, now: float) -> bool:
        return self.check_at is not None and now >= self.check_at

    def read_due(self, now: float) -> bool:
        """Silent long enough to start reading stacks (a metric logged since moves the moment on)."""
        if self.timeout is None or self.check_at is None or now < self.check_at - self.lead:
            return False
        self._take_metric(now)
        self.check_at = self.last_progress + self.timeout
        return now >= self.check_at - self.lead

    def hung(self, now: float) -> bool:
        """True when nothing moved for the timeout; otherwise the next check is set from the latest progress."""
        if self.timeout is None:
            return False
        if now < self.last_progress + self.timeout:
            self.check_at = self.last_progress + self.timeout
            return False
        self._take_metric(now)
        if now < self.last_progress + self.timeout:
            self.check_at = self.last_progress + self.timeout
            return False
        self.check_at = None
        return True

    def _take_metric(self, now: float) -> None:
        logged = self.last_metric() if self.last_metric is not None else None
        if logged is not None:
            # The metric's wall-clock time on the monotonic clock of this watch.
            at = now - max(0.0, time.time() - logged)
            if at > self.last_progress:
                self.last_progress = at
