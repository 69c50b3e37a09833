"""A job record keeps its kind: stored at submit, and inferred once for records from before.

An index written before distrun stored kinds has no `kind` column: the first distrun that opens
it adds the column and fills it in from what each record holds (a sweep's record has `sweep`, a
pipeline's `steps`), in one transaction. A row an older distrun writes later (no kind) is
inferred as it is read.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from distrun.core.job_kind import JobKind
from distrun.store.index import JobIndex, JobRecord
from distrun.store.index_repair import DamagedRecordError

# The index as distrun wrote it before kinds were stored (and before job timeouts).
_OLD_SCHEMA = """
CREATE TABLE jobs (
    name TEXT PRIMARY KEY, status TEXT NOT NULL, display_name TEXT, experiment_name TEXT,
    compute TEXT NOT NULL, distribution TEXT, folder TEXT NOT NULL, created_at REAL NOT NULL,
    started_at REAL, ended_at REAL, reason TEXT, root_cause TEXT, processes TEXT,
    launcher_pid INTEGER, launcher_host TEXT, launcher_started REAL, backend_id TEXT, tags TEXT,
    attempts TEXT, target TEXT, parent TEXT, steps TEXT, sweep TEXT
)
"""


def _record(name: str, **fields: object) -> JobRecord:
    return JobRecord(name, "Completed", "local", f"/nowhere/{name}", time.time(), **fields)  # type: ignore[arg-type]


def _old_index(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute(_OLD_SCHEMA)
    rows = [
        ("train", None, None),
        ("flow", json.dumps({"prep": {"job": "flow.prep", "status": "Completed"}}), None),
        ("search", json.dumps({"trial_0": {"job": "search.trial_0"}}), json.dumps({"objective": {}})),
        ("empty_sweep", json.dumps({}), json.dumps({"objective": {}})),
    ]
    for name, steps, sweep in rows:
        conn.execute(
            "INSERT INTO jobs (name, status, compute, folder, created_at, steps, sweep) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, "Completed", "local", f"/nowhere/{name}", time.time(), steps, sweep),
        )
    conn.commit()
    conn.close()


def _stored_kinds(db: Path) -> dict[str, str | None]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT name, kind FROM jobs").fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("kind", list(JobKind))
def test_a_record_reads_back_with_the_kind_it_was_stored_with(tmp_path: Path, kind: JobKind) -> None:
    index = JobIndex(tmp_path / "jobs.db")
    index.insert(_record("job", kind=kind))
    assert index.get("job").kind is kind
    assert _stored_kinds(tmp_path / "jobs.db") == {"job": kind.value}
    assert index.get("job").to_dict()["kind"] == kind.value


def test_a_record_is_a_command_job_unless_told(tmp_path: Path) -> None:
    index = JobIndex(tmp_path / "jobs.db")
    index.insert(_record("job"))
    assert index.get("job").kind is JobKind.COMMAND


def test_the_kind_is_stored_not_guessed_from_the_fields(tmp_path: Path) -> None:
    # A sweep that has not recorded its settings yet is still a sweep; a pipeline with no steps a pipeline.
    index = JobIndex(tmp_path / "jobs.db")
    index.insert(_record("search", kind=JobKind.SWEEP, steps={}))
    index.insert(_record("flow", kind=JobKind.PIPELINE))
    assert index.get("search").kind is JobKind.SWEEP
    assert index.get("flow").kind is JobKind.PIPELINE


def test_opening_an_index_from_before_kinds_fills_in_each_records_kind_once(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    _old_index(db)
    index = JobIndex(db)
    kinds = {record.name: record.kind for record in index.list()}
    assert kinds == {
        "train": JobKind.COMMAND,
        "flow": JobKind.PIPELINE,
        "search": JobKind.SWEEP,
        "empty_sweep": JobKind.SWEEP,
    }
    # Written into the index, not only worked out on reading.
    assert _stored_kinds(db) == {"train": "command", "flow": "pipeline", "search": "sweep", "empty_sweep": "sweep"}


def test_a_row_an_older_distrun_writes_without_a_kind_reads_back_with_its_kind(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    index = JobIndex(db)
    index.insert(_record("first"))  # the index now has its kind column
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO jobs (name, status, compute, folder, created_at, steps, sweep) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("late_sweep", "Running", "sweep", "/nowhere/late_sweep", time.time(), "{}", json.dumps({"objective": {}})),
    )
    conn.commit()
    conn.close()
    assert _stored_kinds(db)["late_sweep"] is None
    assert index.get("late_sweep").kind is JobKind.SWEEP


def test_a_kind_distrun_does_not_know_is_a_damaged_record_named_as_such(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    index = JobIndex(db)
    index.insert(_record("odd"))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE jobs SET kind = 'teleport' WHERE name = 'odd'")
    conn.commit()
    conn.close()
    with pytest.raises(DamagedRecordError, match=r"job 'odd' .* kind is 'teleport', not a kind of job distrun knows"):
        index.get("odd")
