"""When a gang has made no progress for limits.hang_timeout seconds.

Progress is any output from any process (a byte on stdout or stderr), or a metric logged to
the job's MLflow run. Output is seen by the gang as it comes; the metric store is asked only
when the output has been silent for the whole timeout (one query per timeout, not per line).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class HangWatch:
    def __init__(self, timeout: float | None, last_metric: Callable[[], float | None] | None) -> None:
        self.timeout = timeout
        self.last_metric = last_metric
        self.last_progress = time.monotonic()
        self.check_at: float | None = None if timeout is None else self.last_progress + timeout

    def output_seen(self) -> None:
        if self.timeout is not None:
            self.last_progress = time.monotonic()
            self.check_at = self.last_progress + self.timeout

    def due(self, now: float) -> bool:
        return self.check_at is not None and now >= self.check_at

    def hung(self, now: float) -> bool:
        """True when nothing moved for the timeout; otherwise the next check is set from the latest progress."""
        if self.timeout is None:
            return False
        if now < self.last_progress + self.timeout:
            self.check_at = self.last_progress + self.timeout
            return False
        logged = self.last_metric() if self.last_metric is not None else None
        if logged is not None:
            # The metric's wall-clock time on the monotonic clock of this watch.
            at = now - max(0.0, time.time() - logged)
            if at > self.last_progress:
                self.last_progress = at
        if now < self.last_progress + self.timeout:
            self.check_at = self.last_progress + self.timeout
            return False
        self.check_at = None
        return True
