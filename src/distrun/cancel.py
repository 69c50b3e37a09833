"""`distrun job cancel`: ask the supervising process to stop the job, and wait for its record."""

from __future__ import annotations

import os
import signal
import socket
import time

from distrun.errors import DistrunError
from distrun.store.index import CANCELED, JobIndex, JobRecord, process_start_time
from distrun.store.layout import Layout

WAIT_EXTRA_SECONDS = 15.0
NOT_RUNNING_YET = "canceled before it was running"


def cancel_job(layout: Layout, name: str) -> JobRecord:
    index = JobIndex(layout.db_path)
    record = index.get(name)
    if record.terminal:
        return record  # already ended (also when racing the job's own end): nothing to do
    if record.compute != "local":
        from distrun.backends import backend_for
        from distrun.backends.targets import resolve_target

        target = resolve_target(record.compute, layout.config_path)
        return backend_for(target.type).cancel(record, layout)
    return cancel_supervised(layout, name)


def cancel_supervised(layout: Layout, name: str) -> JobRecord:
    """A job supervised by a distrun process on this machine (local, Ray's driver): signal it, wait."""
    index = JobIndex(layout.db_path)
    if index.cancel_if_not_running(name, NOT_RUNNING_YET):
        return index.get(name)  # its supervisor sees the record and starts nothing more
    record = index.get(name)  # it moved on meanwhile: Running now, or ended
    if record.terminal:
        return record
    if record.launcher_pid is None or record.launcher_host != socket.gethostname():
        index.update(name, status=CANCELED, reason=NOT_RUNNING_YET, ended_at=time.time())
        return index.get(name)
    if process_start_time(record.launcher_pid) != record.launcher_started:
        return index.get(name)  # the reader's check records it as launcher lost
    try:
        os.kill(record.launcher_pid, signal.SIGTERM)
    except ProcessLookupError:
        return index.get(name)
    except PermissionError:
        raise DistrunError(
            f"not allowed to signal the process supervising {name} (pid {record.launcher_pid})"
        ) from None
    give_up = time.monotonic() + _grace(layout, name) + WAIT_EXTRA_SECONDS
    while time.monotonic() < give_up:
        record = index.get(name)
        if record.terminal:
            return record
        time.sleep(0.1)
    return index.get(name)


def _grace(layout: Layout, name: str) -> float:
    import json

    try:
        spec = json.loads(layout.job(name).job_json.read_text(encoding="utf-8"))
        return float(spec.get("limits", {}).get("grace_period") or 10.0)
    except (OSError, ValueError):
        return 10.0
