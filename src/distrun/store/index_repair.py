"""A damaged or replaced job index: reported and recovered from, never a traceback.

A row may hold what distrun never writes (a hand edit, another tool, a disk that lost part of
a page): text that is not JSON in a JSON column, a time that is not a number. Such a row is
refused with the job's name and how to remove it, and the other rows still read. When jobs.db
is removed or replaced while a job runs, the job's supervisor still has the old file open; the
rows are copied from it into the new file, so the job's end is recorded after all.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind

_JSON_FIELDS = {
    "root_cause": dict,
    "processes": list,
    "tags": dict,
    "attempts": list,
    "target": dict,
    "steps": dict,
    "sweep": dict,
}
_NUMBERS = ("created_at", "started_at", "ended_at", "launcher_started", "archived_at")
_TEXTS = ("name", "status", "compute", "folder")
_OPTIONAL_TEXTS = ("parent", "spark_application_id")


class DamagedRecordError(DistrunError):
    """A row of jobs.db that distrun cannot read back."""


def file_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def checked_row(row: dict[str, Any], db_path: Path) -> dict[str, Any]:
    """The row, with every field of the type distrun writes; DamagedRecordError otherwise."""
    name = row.get("name")

    def damaged(field: str, why: str) -> DamagedRecordError:
        return DamagedRecordError(
            f"the record of job {name!r} in {db_path} is damaged: {field} {why}",
            f"`distrun job cancel {name}` still stops it if it runs; remove the record with "
            f"sqlite3 {db_path} \"DELETE FROM jobs WHERE name = '{name}'\"",
        )

    for field in _TEXTS:
        if not isinstance(row.get(field), str):
            raise damaged(field, f"is {row.get(field)!r}, not text")
    for field in _OPTIONAL_TEXTS:
        if row.get(field) is not None and not isinstance(row.get(field), str):
            raise damaged(field, f"is {str(row.get(field))[:40]!r}, not text")
    for field in _NUMBERS:
        value = row.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise damaged(field, f"is {str(value)[:40]!r}, not a time")
    kind = row.get("kind")
    if kind is not None and kind not in {known.value for known in JobKind}:
        raise damaged("kind", f"is {str(kind)[:40]!r}, not a kind of job distrun knows")
    pid = row.get("launcher_pid")
    if pid is not None and not isinstance(pid, int):
        raise damaged("launcher_pid", f"is {str(pid)[:40]!r}, not a process id")
    for field, kind in _JSON_FIELDS.items():
        text = row.get(field)
        if text is None:
            continue
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            raise damaged(field, "is not valid JSON") from None
        if not isinstance(value, kind):
            raise damaged(field, f"is not a JSON {'object' if kind is dict else 'list'}")
    return row


def recover_rows(old: sqlite3.Connection, new: sqlite3.Connection) -> None:
    """Copy the rows the old (removed or replaced) index file holds into the new one."""
    try:
        rows = [dict(row) for row in old.execute("SELECT * FROM jobs")]
    except sqlite3.Error:
        return
    for row in rows:
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        try:
            new.execute(f"INSERT OR IGNORE INTO jobs ({columns}) VALUES ({marks})", list(row.values()))
        except sqlite3.Error:
            continue
