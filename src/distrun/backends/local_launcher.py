"""`python -m distrun.backends.local_launcher NAME`: supervise a prepared job in the background."""

from __future__ import annotations

import sys

from distrun.backends.local import execute
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.metrics.tracking import finish_run, hold_server
from distrun.prepare.submission import load_prepared
from distrun.store.index import JobIndex
from distrun.store.layout import Layout


def main(name: str) -> int:
    layout = Layout()
    try:
        prepared = load_prepared(layout, name)
        hold_server(prepared.folder, layout.home)  # the server its ranks log to lives while this job runs
        record = execute(prepared, layout, stream=None)
        finish_run(prepared.folder, record.status)
    except DistrunError as exc:
        JobIndex(layout.db_path).update(name, status=JobStatus.FAILED, reason=exc.message)
        print(f"distrun: {exc.render()}", file=sys.stderr)
        return 2
    return 0 if record.status == JobStatus.COMPLETED else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
