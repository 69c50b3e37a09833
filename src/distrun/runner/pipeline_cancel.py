"""`distrun job cancel PIPELINE`: ask the process supervising a pipeline (its `distrun run`) to
stop it, as `job cancel` asks a local job's supervisor: SIGTERM, which the pipeline's run takes
as Ctrl-C (it cancels every running step's job and records the pipeline Canceled).

Apart from `distrun.runner.parent_run`, which starts jobs through `distrun.runner.jobs`:
`jobs.cancel_job` calls this, and the two must not import each other.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distrun.store.index import JobRecord
    from distrun.store.layout import Layout

# Each running step's job is canceled in turn, each within its grace period and its backend's margin.
WAIT_PER_STEP_S = 20.0


def cancel_pipeline(layout: Layout, record: JobRecord) -> JobRecord:
    from distrun.store.index import JobIndex, process_start_time

    index = JobIndex(layout.db_path)
    if index.cancel_if_not_running(record.name, "canceled before it started"):
        return index.get(record.name)  # `run -d` recorded it; its supervisor sees this and starts nothing
    pid = record.launcher_pid
    alive = (
        pid is not None
        and record.launcher_host == socket.gethostname()
        and process_start_time(pid) == record.launcher_started
    )
    if not alive:
        return index.get(record.name)  # a reader records it as launcher lost
    try:
        os.kill(pid, signal.SIGTERM)  # type: ignore[arg-type]
    except ProcessLookupError:
        return index.get(record.name)
    running = sum(1 for state in (record.steps or {}).values() if state.get("status") not in _ENDED)
    give_up = time.monotonic() + 10 + WAIT_PER_STEP_S * max(running, 1)
    while time.monotonic() < give_up:
        current = index.get(record.name)
        if current.terminal:
            return current
        time.sleep(0.1)
    return index.get(record.name)


_ENDED = ("NotStarted", "Completed", "Failed", "Canceled", "Preempted")
