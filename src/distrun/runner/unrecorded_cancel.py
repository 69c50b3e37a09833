"""`job cancel NAME` for a job the index cannot give: jobs.db removed, replaced or damaged.

The job's processes still say who supervises them: each carries the launch marker
`DISTRUN_LAUNCH_ID=<name>-<supervisor pid>` and, having been started by it, has that pid as
its parent. Only a process that is both named so and the parent of one of them is signalled,
so a marker a job forged cannot point the cancel at some other process.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from distrun.core import procfs
from distrun.core.errors import DistrunError
from distrun.store.index import CANCELED, JobIndex, JobRecord
from distrun.store.layout import Layout

WAIT_EXTRA_SECONDS = 15.0


def local_supervisor(name: str) -> int | None:
    """The pid of the live distrun process supervising local job `name`, found by its processes."""
    prefix = f"DISTRUN_LAUNCH_ID={name}-".encode()
    for marked, environ in procfs.environments():
        for variable in environ:
            if not variable.startswith(prefix) or not variable[len(prefix) :].isdigit():
                continue
            supervisor = int(variable[len(prefix) :])
            if procfs.parent_of(marked) == supervisor:
                return supervisor
    return None


def cancel_unrecorded(layout: Layout, name: str, error: DistrunError, grace: float) -> JobRecord:
    """Stop the supervisor of `name` if one runs here; otherwise `error` stands."""
    pid = local_supervisor(name)
    if pid is None:
        raise error
    print(
        f"distrun: job {name} is not in the job index {layout.db_path} ({error.message}); "
        f"its supervisor (pid {pid}) was found through its processes and is being stopped",
        file=sys.stderr,
    )
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    give_up = time.monotonic() + min(grace, 1e6) + WAIT_EXTRA_SECONDS
    # Ended when it is gone or a zombie: a supervisor whose parent (a notebook's subprocess, a
    # script) has not reaped it yet has ended all the same, its record written.
    while time.monotonic() < give_up and procfs.is_alive(pid):
        time.sleep(0.1)
    try:
        return JobIndex(layout.db_path).get(name)  # its supervisor put its record back at its end
    except DistrunError:
        reason = "canceled; its record was lost with the job index"
        return JobRecord(name, CANCELED, "local", str(layout.job(name).root), time.time(), reason=reason)
