"""distrun's own MLflow store (SQLite under DISTRUN_HOME), written directly for speed.

Importing mlflow and opening its store costs seconds (measured: ~6 s import + ~3 s schema
check on a loaded 2-core machine), too much to add to every `distrun run`. Once mlflow has
created the database, creating a job's run is two INSERTs and closing it one UPDATE, done
here with sqlite3 in milliseconds, in the columns every MLflow release since 1.x has had. If
anything here fails (a future schema), the caller falls back to mlflow's own client.

The store also gets one table and one trigger of distrun's: while a job's run is listed in
`distrun_open_runs`, a status change to anything but RUNNING is undone. MLflow ends the
active run when a process exits, so without it the first rank to exit would mark the job's
run FINISHED while the others still train; distrun removes the row, then sets the status.
"""

from __future__ import annotations

import getpass
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

from distrun.core.safe_files import refuse_special_store

_HOLD_OPEN = """
CREATE TABLE IF NOT EXISTS distrun_open_runs (run_uuid VARCHAR(32) NOT NULL PRIMARY KEY);
CREATE TRIGGER IF NOT EXISTS distrun_keep_run_open AFTER UPDATE OF status ON runs
WHEN NEW.status != 'RUNNING' AND EXISTS (SELECT 1 FROM distrun_open_runs WHERE run_uuid = NEW.run_uuid)
BEGIN
    UPDATE runs SET status = 'RUNNING', end_time = NULL WHERE run_uuid = NEW.run_uuid;
END;
"""


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    # The store lies in DISTRUN_HOME (or wherever tracking.json, which the job can rewrite,
    # says): a named pipe or a link in its place would block SQLite or lead it elsewhere.
    # Writes happen before the job's processes start and after they all ended.
    refuse_special_store(path)
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    # As for distrun's job index: no fsync per commit (a crash of distrun loses nothing; a
    # power cut may lose the last update). With it, creating a run took ~70 ms on a busy disk.
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        yield conn
    finally:
        conn.close()


# MLflow's own check of a run id (mlflow.utils.validation._validate_run_id), matched whole.
_RUN_ID = re.compile(r"[a-zA-Z0-9][\w\-]{0,255}")


def _new_run_id(conn: sqlite3.Connection, run_name: str) -> str:
    """The job's name as its run id, as on Azure ML (where `MlflowClient().get_run(job_name)`
    finds a job's run); a generated id where MLflow would refuse the name (a dot in
    `PIPELINE.STEP`) or a run already has it (a deleted job's name used again)."""
    if not _RUN_ID.fullmatch(run_name):
        return uuid.uuid4().hex
    if conn.execute("SELECT 1 FROM runs WHERE run_uuid = ?", (run_name,)).fetchone() is None:
        return run_name
    return uuid.uuid4().hex


_MLFLOW_TABLES = frozenset({"runs", "experiments", "tags", "metrics", "alembic_version"})


def _names(conn: sqlite3.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}


def hold_runs_open(path: Path) -> None:
    """Add distrun's table and trigger (idempotent); mlflow must have created the store."""
    with _connect(path) as conn:
        conn.executescript(_HOLD_OPEN)


def create_run(
    path: Path, experiment_name: str, run_name: str, tags: dict[str, str], artifacts: Path
) -> tuple[str, str] | None:
    """A RUNNING run in the experiment (created if new); returns (experiment id, run id), or
    None where `path` is not a store mlflow created.

    One connection does all of it: opening the store and reading its schema cost about as much
    as the run's own rows.
    """
    if not path.is_file():
        return None
    now = int(time.time() * 1000)
    with _connect(path) as conn:
        names = _names(conn)
        if not _MLFLOW_TABLES <= names:
            return None
        if not {"distrun_open_runs", "distrun_keep_run_open"} <= names:
            conn.executescript(_HOLD_OPEN)
        conn.execute("BEGIN IMMEDIATE")
        try:
            run_id = _new_run_id(conn, run_name)
            row = conn.execute(
                "SELECT experiment_id, artifact_location FROM experiments"
                " WHERE name = ? AND lifecycle_stage = 'active'",
                (experiment_name,),
            ).fetchone()
            if row is None:
                cursor = conn.execute(
                    "INSERT INTO experiments"
                    " (name, artifact_location, lifecycle_stage, creation_time, last_update_time)"
                    " VALUES (?, '', 'active', ?, ?)",
                    (experiment_name, now, now),
                )
                experiment_id = int(cursor.lastrowid or 0)
                location = (artifacts / str(experiment_id)).as_uri()
                conn.execute(
                    "UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (location, experiment_id)
                )
            else:
                experiment_id, location = int(row[0]), str(row[1])
            conn.execute(
                "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status,"
                " start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id, deleted_time)"
                " VALUES (?, ?, 'UNKNOWN', '', '', ?, 'RUNNING', ?, NULL, '', 'active', ?, ?, NULL)",
                (run_id, run_name, _user(), now, f"{location.rstrip('/')}/{run_id}/artifacts", experiment_id),
            )
            all_tags = {"mlflow.runName": run_name, "mlflow.user": _user(), **tags}
            conn.executemany(
                "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                [(key, value, run_id) for key, value in all_tags.items()],
            )
            conn.execute("INSERT INTO distrun_open_runs (run_uuid) VALUES (?)", (run_id,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return str(experiment_id), run_id


def open_run(path: Path, run_id: str) -> None:
    with _connect(path) as conn:
        conn.execute("INSERT OR IGNORE INTO distrun_open_runs (run_uuid) VALUES (?)", (run_id,))


def artifact_folder(path: Path, run_id: str) -> Path | None:
    """Where the run's artifacts go, when that is a local folder (file: URI or plain path)."""
    with _connect(path) as conn:
        row = conn.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
    uri = str(row[0]) if row and row[0] else ""
    if uri.startswith("file://"):
        return Path(unquote(urlparse(uri).path))
    return Path(uri) if uri.startswith("/") else None


def run_job_name(path: Path, run_id: str) -> str | None:
    """The distrun job whose run this is (the run's `distrun.job_name` tag)."""
    with _connect(path) as conn:
        row = conn.execute(
            "SELECT value FROM tags WHERE run_uuid = ? AND key = 'distrun.job_name'", (run_id,)
        ).fetchone()
    return str(row[0]) if row else None


def job_run_artifacts(path: Path, job_name: str, name: str) -> Path | None:
    """What the MLflow run of distrun job `job_name` logged as `name`: its artifact `name` (an
    MLflow 2 `log_model(artifact_path=name)`), else its logged model named `name` (MLflow 3
    keeps a logged model apart from the run's artifacts); a local folder, or None."""
    with _connect(path) as conn:
        row = conn.execute(
            "SELECT run_uuid FROM tags WHERE key = 'distrun.job_name' AND value = ? ORDER BY rowid DESC", (job_name,)
        ).fetchone()
        if row is None:
            return None
        run_id = str(row[0])
        names = _names(conn)
        logged = None
        if "logged_models" in names:
            logged = conn.execute(
                "SELECT artifact_location FROM logged_models WHERE source_run_id = ? AND name = ?"
                " ORDER BY creation_timestamp_ms DESC",
                (run_id, name),
            ).fetchone()
    folder = artifact_folder(path, run_id)
    if folder is not None and (folder / name).exists():
        return folder / name
    uri = str(logged[0]) if logged else ""
    if uri.startswith("file://"):
        return Path(unquote(urlparse(uri).path))
    return Path(uri) if uri.startswith("/") else None


def close_run(path: Path, run_id: str, status: str) -> None:
    """Set the run's final status (FINISHED / FAILED / KILLED), in one transaction."""
    with _connect(path) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM distrun_open_runs WHERE run_uuid = ?", (run_id,))
            conn.execute(
                "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?",
                (status, int(time.time() * 1000), run_id),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def sqlite_file(uri: str) -> Path | None:
    """The database file of a `sqlite:///...` tracking URI; None for any other store."""
    if not uri.startswith("sqlite:"):
        return None
    parsed = urlparse(uri)
    # sqlite:////abs/path -> path '//abs/path'; sqlite:///rel -> '/rel'
    text = parsed.path[1:] if parsed.path.startswith("//") else parsed.path.lstrip("/")
    return Path(unquote(text)) if text else None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
