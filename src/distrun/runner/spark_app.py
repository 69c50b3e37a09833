"""A Spark job's application id and UI address, as its driver's log names them.

The driver (the job's one process, `user_logs/std_log_process_00.txt`) says its application id
when it opens Spark's event log (`Logging events to file:.../eventlog_v2_local-1765...`; distrun
turns the event log on, `distrun.spec.spark_submit`) and, on a standalone cluster, when it
registers (`Connected to Spark cluster with app ID app-2026...`); its UI's address when Jetty
starts (`Start Jetty 127.0.0.1:4041 for SparkUI`). The log is job-written: it is read through the
safe path (no link followed, a bounded head), and only Spark's own lines are matched.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from distrun.core.job_kind import JobKind
from distrun.core.safe_files import open_beneath

if TYPE_CHECKING:
    from distrun.store.index import JobIndex, JobRecord

__all__ = ["DRIVER_LOG", "spark_application", "spark_lines", "with_application_id"]

DRIVER_LOG = "user_logs/std_log_process_00.txt"
# Spark names both before the application's first task: its first lines are enough.
_HEAD_BYTES = 4 << 20
_APP_ID = re.compile(
    rb"(?:Logging events to \S*?/(?:eventlog_v2_)?|Connected to Spark cluster with app ID )"
    rb"((?:local|app)-[0-9]+(?:-[0-9]+)?)"
)
_UI = re.compile(rb"Start Jetty ([0-9A-Za-z.\-]+):([0-9]{1,5}) for SparkUI")
_ANY_ADDRESS = {"0.0.0.0", "::"}


def _driver_log_head(folder: Path) -> bytes:
    try:
        fd = open_beneath(folder, DRIVER_LOG)
    except OSError:  # not started yet, or not a regular file: nothing is said
        return b""
    try:
        return os.pread(fd, _HEAD_BYTES, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


def application_of(log: bytes) -> dict[str, str]:
    """`application_id` and `ui` (http://HOST:PORT), each where the log names it."""
    found: dict[str, str] = {}
    app = _APP_ID.search(log)
    if app:
        found["application_id"] = app.group(1).decode()
    ui = _UI.search(log)
    if ui:
        host = ui.group(1).decode()
        found["ui"] = f"http://{'127.0.0.1' if host in _ANY_ADDRESS else host}:{ui.group(2).decode()}"
    return found


def spark_application(folder: str | Path | None) -> dict[str, str]:
    """The job's application id and UI address from its driver's log ({} before the driver says them)."""
    return application_of(_driver_log_head(Path(folder))) if folder else {}


def with_application_id(index: JobIndex, record: JobRecord) -> JobRecord:
    """A Spark job's record with its application id, stored in it (`spark_application_id`) the
    first time the record is read after the driver named the id in its log; any other record as it is."""
    if record.kind is not JobKind.SPARK or record.spark_application_id or not record.folder:
        return record
    app = spark_application(record.folder).get("application_id")
    if not app:
        return record
    index.update(record.name, only_if_not_terminal=False, spark_application_id=app)
    return dataclasses.replace(record, spark_application_id=app)


def spark_lines(found: dict[str, str], running: bool, target_type: str = "local") -> list[str]:
    """`job show`'s lines: the application id, and the UI's address while the job runs (it ends
    with it); on a standalone cluster (a Spark target, or the one in a Slurm allocation), where
    its executors' logs are: followed into the job's user_logs, one per executor, from where
    each worker keeps them."""
    app = found.get("application_id")
    lines = [f"Spark application: {app}"] if app else []
    if running and "ui" in found:
        lines.append(f"Spark UI:          {found['ui']}")
    kept = {"spark": f"each worker's SPARK_WORKER_DIR/{app}/N/", "slurm": f"spark-cluster/work_NN/{app}/N/"}
    if app and target_type in kept:
        lines.append(f"Executors' logs:   user_logs/std_log_executor_N.txt (N: the executor), from {kept[target_type]}")
    return lines
