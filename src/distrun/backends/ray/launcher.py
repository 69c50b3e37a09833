"""`python -m distrun.backends.ray.launcher NAME`: drive a prepared Ray job from a background process.

`distrun job create --compute <ray target>` starts it; it is the job's launcher in the record,
so `job cancel` signals it and a lost one is shown as such, as for a local job.
"""

from __future__ import annotations

import sys

from distrun.backends.ray.backend import execute
from distrun.core.job_status import JobStatus
from distrun.metrics.tracking import hold_server
from distrun.prepare.submission import load_prepared
from distrun.store.layout import Layout


def main(name: str) -> int:
    layout = Layout()
    prepared = load_prepared(layout, name)
    hold_server(prepared.folder, layout.home)  # the MLflow server its ranks log to lives while this job runs
    record = execute(prepared, layout, stream=None)  # records its own failures
    return 0 if record.status == JobStatus.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
