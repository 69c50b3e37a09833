"""`python -m distrun.backends.local.launcher NAME`: supervise a prepared job in the background."""

from __future__ import annotations

import importlib
import sys

from distrun.backends.local.backend import execute
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.core.pydantic_plugins import skip_plugin_discovery
from distrun.metrics.tracking import finish_run, hold_server
from distrun.prepare.submission import load_prepared
from distrun.spec.models import JobSpec
from distrun.store.index import JobIndex
from distrun.store.layout import Layout

# What planning a job imports on demand, one module per distribution type (distrun.plan).
_PLANNERS = ("distrun.plan.pytorch", "distrun.plan.mpi", "distrun.plan.deepspeed", "distrun.plan.tensorflow")


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


def warm() -> None:
    """What every supervisor would do first, done once by a launcher server before it forks them
    (distrun.backends.launcher_server): the job model's validator built (pydantic builds it on
    first use, 0.1-0.2 s), the planners imported."""
    skip_plugin_discovery()
    JobSpec.model_rebuild()
    for module in _PLANNERS:
        importlib.import_module(module)


if __name__ == "__main__":
    # This process validates only distrun's models and runs no user code (its ranks are
    # processes of their own): pydantic's plugin discovery would find nothing to observe here.
    skip_plugin_discovery()
    sys.exit(main(sys.argv[1]))
