"""The job index: one SQLite row per job, written in whole transactions.

WAL mode and a long busy timeout let many readers (`job list` in a loop) and several
launchers share the file; every update is one statement, so no reader sees a torn record.
A job whose launcher died is turned into Failed ("launcher lost") by the first reader that
notices, so nothing shows Running forever. A job on a cluster engine (a record with a
`backend_id`) is brought up to date by the orchestrator (`distrun.runner.jobs`), which asks its
backend: the store imports nothing above itself and never starts a process.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError, JobNotFoundError
from distrun.core.file_modes import make_home
from distrun.core.job_kind import JobKind, inferred_kind
from distrun.core.job_status import TERMINAL_STATUSES, JobStatus
from distrun.core.safe_files import refuse_special_store
from distrun.store.index_repair import DamagedRecordError, checked_row, file_identity, recover_rows

QUEUED = JobStatus.QUEUED
STARTING = JobStatus.STARTING
RUNNING = JobStatus.RUNNING
FINALIZING = JobStatus.FINALIZING
COMPLETED = JobStatus.COMPLETED
FAILED = JobStatus.FAILED
CANCELED = JobStatus.CANCELED
TERMINAL = TERMINAL_STATUSES
LAUNCHER_LOST = "launcher lost: the distrun process supervising this job ended without recording an outcome"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    name TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    display_name TEXT,
    experiment_name TEXT,
    compute TEXT NOT NULL,
    distribution TEXT,
    folder TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    reason TEXT,
    root_cause TEXT,
    processes TEXT,
    launcher_pid INTEGER,
    launcher_host TEXT,
    launcher_started REAL,
    backend_id TEXT,
    tags TEXT,
    attempts TEXT,
    target TEXT,
    parent TEXT,
    steps TEXT,
    sweep TEXT
)
"""
_JSON_FIELDS = ("root_cause", "processes", "tags", "attempts", "target", "steps", "sweep", "timeouts")
# Columns added after the first release: (name, type), added to an older index when it is opened.
_ADDED_COLUMNS = (
    ("attempts", "TEXT"),
    ("target", "TEXT"),
    ("parent", "TEXT"),
    ("steps", "TEXT"),
    ("sweep", "TEXT"),
    ("timeouts", "TEXT"),
    ("kind", "TEXT"),
    ("archived_at", "REAL"),
    ("spark_application_id", "TEXT"),
)
# How long the first connections to a new index retry its set-up (see _initialize).
_INIT_SECONDS = 60.0
# Below this much free space, an index error is put down to the full filesystem.
_ROOM_NEEDED = 256 * 1024


@dataclass
class JobRecord:
    name: str
    status: JobStatus
    compute: str
    folder: str
    created_at: float
    display_name: str | None = None
    experiment_name: str | None = None
    distribution: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str | None = None
    root_cause: dict[str, Any] | None = None
    processes: list[dict[str, Any]] | None = None
    launcher_pid: int | None = None
    launcher_host: str | None = None
    launcher_started: float | None = None
    backend_id: str | None = None  # e.g. the Slurm job id
    tags: dict[str, str] = field(default_factory=dict)
    attempts: list[dict[str, Any]] | None = None  # a job that ran more than once: each run, oldest first
    # The compute target as it was when the job was submitted ({"type": ..., "settings": {...}}):
    # every later show, cancel, logs or download goes to that engine, whatever config.yaml says
    # by then. None in records written before distrun kept it (they read config.yaml).
    target: dict[str, Any] | None = None
    # A pipeline step's or a sweep trial's job: the name of its pipeline's or sweep's record.
    parent: str | None = None
    # A pipeline's record: each step, in file order, with its job's name and state
    # ({"job": NAME, "status": ..., "depends_on": [...], "compute": ...}); a sweep's: each trial
    # ({"job": NAME, "status": ..., "parameters": {...}, "metric": ...}).
    steps: dict[str, Any] | None = None
    # A sweep's record: its objective, sampling, policy and limits, and its best trial so far.
    sweep: dict[str, Any] | None = None
    # The timeouts that apply to the job (`distrun.prepare.timeouts`): limits', the framework's.
    timeouts: list[dict[str, Any]] | None = None
    # What the job is (`distrun.core.job_kind`): set at submit; the faces dispatch on it. Left out
    # (a record from before kinds were stored), it is inferred from what the record holds.
    kind: JobKind = None  # type: ignore[assignment]
    # When `distrun job archive` hid it from `job list` (as Azure ML's archive); None: listed.
    archived_at: float | None = None
    # A Spark job's application id (local-1765..., app-2026...-0001), once its driver named it.
    spark_application_id: str | None = None

    def __post_init__(self) -> None:
        self.status = JobStatus.of(self.status)
        self.kind = inferred_kind(self.steps, self.sweep) if self.kind is None else JobKind(self.kind)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["status"] = self.status.value
        data["kind"] = self.kind.value
        for key in ("created_at", "started_at", "ended_at", "archived_at"):
            if data[key] is not None:
                data[key] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(data[key]))
        data.pop("launcher_started")
        if self.kind is JobKind.PIPELINE:  # its own outputs, each a step's (by the pipeline's names)
            from distrun.store.pipeline_outputs import pipeline_outputs

            data["outputs"] = {name: out.to_dict(self.name) for name, out in pipeline_outputs(self.steps).items()}
        return data


def process_start_time(pid: int) -> float | None:
    """When a process started (boot-relative clock ticks), to tell a reused pid from ours."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):  # dead, waiting to be reaped
        return None
    return float(fields[19])


@dataclass(frozen=True)
class JobFilter:
    """Which records a listing keeps (as `az ml job list`'s filters): each field given narrows it."""

    status: str | None = None
    parent: str | None = None  # only this pipeline's steps or sweep's trials
    experiment: str | None = None
    children: bool = True  # False: only jobs without a parent (steps and trials folded under it)
    archived: bool = True  # False: no archived job
    older_than: float | None = None  # only jobs created before this time

    def sql(self) -> tuple[str, tuple[str | float, ...]]:
        """A WHERE clause (empty if it keeps every record) and its values, as placeholders."""
        terms: list[str] = []
        values: list[str | float] = []
        for column, value in (("status", self.status), ("parent", self.parent), ("experiment_name", self.experiment)):
            if value is not None:
                terms.append(f"{column} = ?")  # the column names are these constants, never input
                values.append(value)
        if self.parent is None and not self.children:
            terms.append("parent IS NULL")
        if not self.archived:
            terms.append("archived_at IS NULL")
        if self.older_than is not None:
            terms.append("created_at < ?")
            values.append(self.older_than)
        return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(values)


class JobIndex:
    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        # One connection per process and thread, opened on first use and kept: `distrun run`
        # writes its record ~8 times, and opening and checking the index each time cost ~15 ms.
        self._conn: sqlite3.Connection | None = None
        self._owner: tuple[int, int] | None = None
        self._identity: tuple[int, int] | None = None  # the index file the connection has open

    def _open(self) -> sqlite3.Connection:
        try:
            make_home(self.db_path.parent)  # the index lies in DISTRUN_HOME
            # A job's processes can reach DISTRUN_HOME: a named pipe in place of jobs.db (or its
            # -wal) would block SQLite's first read forever.
            refuse_special_store(self.db_path)
            conn = sqlite3.connect(self.db_path, timeout=60, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._error(f"cannot open the job index {self.db_path}: {exc}") from None
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout = 60000")
            _initialize(conn)
            # SQLite's advice for WAL: no fsync at every commit (a crash of distrun loses
            # nothing; a power cut may lose the last updates). `distrun run` writes ~8 times:
            # on a busy disk the fsyncs alone took 100-200 ms.
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise self._error(f"job index {self.db_path}: {exc}") from None
        return conn

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # A connection must not cross a fork (the watchdog) or a thread: each gets its own.
        owner = (os.getpid(), threading.get_ident())
        if self._conn is None or self._owner != owner:
            self._conn, self._owner = self._open(), owner
            self._identity = file_identity(self.db_path)
        elif file_identity(self.db_path) != self._identity:
            # jobs.db was removed or replaced under us (a running job's supervisor keeps its
            # connection for the job's whole life): its rows, still readable through the old
            # connection, are put back into the new file, so no record is lost.
            old, self._conn = self._conn, self._open()
            recover_rows(old, self._conn)
            old.close()
            self._identity = file_identity(self.db_path)
        try:
            yield self._conn
        except sqlite3.Error as exc:
            # After an error (a full disk, say) start afresh next time.
            self._conn.close()
            self._conn = None
            raise self._error(f"job index {self.db_path}: {exc}") from None

    def _error(self, text: str) -> DistrunError:
        """SQLite says 'disk I/O error' or 'database or disk is full'; say which disk, and what to do."""
        try:
            stat = os.statvfs(self.db_path.parent)
            full = stat.f_bavail * stat.f_frsize < _ROOM_NEEDED
        except OSError:
            full = False
        if full:
            return DistrunError(
                f"{text} (the filesystem holding {self.db_path.parent} is full)",
                "free space there; distrun needs a little room to record jobs (DISTRUN_HOME picks the place)",
            )
        return DistrunError(text)

    # ------------------------------------------------------------ writes

    def insert(self, record: JobRecord) -> None:
        row = _to_row(record)
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._connect() as conn:
            try:
                conn.execute(f"INSERT INTO jobs ({columns}) VALUES ({marks})", list(row.values()))
            except sqlite3.IntegrityError:
                raise DistrunError(
                    f"a job named {record.name!r} already exists", "choose another name, or leave `name` out"
                ) from None

    def update(self, name: str, only_if_not_terminal: bool = True, **values: Any) -> bool:
        """Change some fields in one statement; a finished job's outcome is never rewritten."""
        row = {key: (json.dumps(v) if key in _JSON_FIELDS and v is not None else v) for key, v in values.items()}
        sets = ", ".join(f"{key} = ?" for key in row)
        guard = f" AND status NOT IN {tuple(sorted(s.value for s in TERMINAL))}" if only_if_not_terminal else ""
        with self._connect() as conn:
            cursor = conn.execute(f"UPDATE jobs SET {sets} WHERE name = ?{guard}", [*row.values(), name])
            return cursor.rowcount > 0

    def set_launcher(self, name: str, pid: int) -> bool:
        """Make `pid` the job's supervisor; False when the job already ended (e.g. was canceled)."""
        return self.update(
            name, launcher_pid=pid, launcher_host=socket.gethostname(), launcher_started=process_start_time(pid)
        )

    def cancel_if_not_running(self, name: str, reason: str) -> bool:
        """Cancel a job that is still Queued or Starting, in one statement; False if it moved on.

        Its supervisor checks the record before each step (prepare, take the job, note Running)
        and stops there, so nobody is signalled: the supervisor of a job being prepared may be
        a user's own Python process (the SDK)."""
        with self._connect() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET status = ?, reason = ?, ended_at = ? WHERE name = ? AND status IN (?, ?)",
                (CANCELED.value, reason, time.time(), name, QUEUED.value, STARTING.value),
            )
            return cursor.rowcount > 0

    def archive(self, name: str, archived: bool = True) -> bool:
        """Hide a job from `job list` (or show it again); False if there is no such job."""
        return self.update(name, only_if_not_terminal=False, archived_at=time.time() if archived else None)

    def delete_ended(self, name: str) -> bool:
        """Remove an ended job's record, in one statement; False if it is not there or has not ended."""
        ended = tuple(sorted(s.value for s in TERMINAL))
        with self._connect() as conn:
            cursor = conn.execute(f"DELETE FROM jobs WHERE name = ? AND status IN {ended}", (name,))
            return cursor.rowcount > 0

    def mark_launcher_lost(self, name: str) -> None:
        self.update(name, status=FAILED, reason=LAUNCHER_LOST, ended_at=time.time())

    # ------------------------------------------------------------ reads

    def get(self, name: str) -> JobRecord:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM jobs WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise JobNotFoundError(f"no job named {name!r}", "`distrun job list` shows the jobs there are")
        return self._checked(self._record(dict(row)))

    def list(self, limit: int = 50, where: JobFilter | None = None) -> list[JobRecord]:
        """The newest `limit` records (all with -1) that `where` keeps."""
        clause, values = (where or JobFilter()).sql()
        with self._connect() as conn:
            query = f"SELECT * FROM jobs{clause} ORDER BY created_at DESC LIMIT ?"
            rows = conn.execute(query, (*values, limit)).fetchall()
        records = []
        for row in rows:
            try:
                records.append(self._checked(self._record(dict(row))))
            except DamagedRecordError as exc:  # the other jobs still list; this one is named
                import sys

                print(f"distrun: warning: {exc.message}", file=sys.stderr)
        return records

    def _record(self, row: dict[str, Any]) -> JobRecord:
        return _from_row(checked_row(row, self.db_path))

    def names(self) -> list[str]:
        with self._connect() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM jobs ORDER BY created_at DESC")]

    def _checked(self, record: JobRecord) -> JobRecord:
        """A live-looking record whose local launcher is gone becomes Failed: launcher lost.

        A job an engine runs (it has a backend id) is left as it is: its engine, not a local
        process, keeps it alive, and the orchestrator refreshes it from there.
        """
        if record.backend_id is not None:
            return record
        if record.terminal or record.launcher_pid is None or record.launcher_host != socket.gethostname():
            return record
        started = process_start_time(record.launcher_pid)
        if started is not None and (record.launcher_started is None or started == record.launcher_started):
            return record
        # Let the launcher's own last write win if it is racing with us.
        time.sleep(0.05)
        self.mark_launcher_lost(record.name)
        if record.compute == "local":
            # Its watchdog may have been killed too (by a job that hunted it down): whatever
            # the job left running goes now, before anyone is told the job has ended.
            from distrun.core.launch_leftovers import stop_launch_leftovers

            stop_launch_leftovers(f"{record.name}-{record.launcher_pid}")
        return self.get(record.name)


def _initialize(conn: sqlite3.Connection) -> None:
    """WAL mode and the table, for the first connections to a new index.

    Several distrun processes may open a new index at the same moment (jobs started together).
    Switching to WAL, and creating the table from a read, are lock upgrades that SQLite refuses
    at once with "database is locked" rather than wait on (two upgrades would deadlock), so
    they are retried here; the table is created in an IMMEDIATE transaction, which takes its
    write lock up front and so does wait. Once both are done this is two cheap reads.
    """
    give_up = time.monotonic() + _INIT_SECONDS
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone() is None:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(_SCHEMA)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            have = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
            for column, kind in _ADDED_COLUMNS:
                if column not in have:
                    _add_column(conn, column, kind)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > give_up:
                raise
            time.sleep(random.uniform(0.005, 0.05))


def _add_column(conn: sqlite3.Connection, column: str, kind: str) -> None:
    """Add the column, in one transaction with filling it in the rows already there (`kind`)."""
    conn.execute("BEGIN IMMEDIATE")  # "locked" is retried by the caller
    try:
        if column not in {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
            if column == "kind":
                _fill_kinds(conn)
        # else another process added it (and filled it) first: fine.
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _fill_kinds(conn: sqlite3.Connection) -> None:
    """The migration of an index from before kinds were stored: each record's kind, inferred
    once from what it holds. (A record an older distrun writes later is inferred as it is read.)"""
    rows = conn.execute("SELECT name, steps, sweep FROM jobs WHERE kind IS NULL").fetchall()
    for name, steps, sweep in rows:
        conn.execute("UPDATE jobs SET kind = ? WHERE name = ?", (inferred_kind(steps, sweep).value, name))


def _to_row(record: JobRecord) -> dict[str, Any]:
    row = dict(record.__dict__)
    row["kind"] = record.kind.value
    for key in _JSON_FIELDS:
        if row[key] is not None:
            row[key] = json.dumps(row[key])
    return row


def _from_row(row: dict[str, Any]) -> JobRecord:
    for key in _JSON_FIELDS:
        if row.get(key) is not None:
            row[key] = json.loads(row[key])
    if row.get("tags") is None:
        row["tags"] = {}
    return JobRecord(**row)  # a row without a kind (from an older distrun): inferred
