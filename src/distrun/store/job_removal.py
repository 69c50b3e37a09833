"""Deleting ended jobs: their records and their folders, to reclaim the space (`distrun job
delete`). A job that has not ended is never deleted: its processes still write there."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from distrun.core.disk_usage import tree_bytes
from distrun.core.errors import DistrunError
from distrun.store.index import JobFilter, JobIndex, JobRecord
from distrun.store.layout import Layout


@dataclass(frozen=True)
class Deleted:
    name: str
    freed_bytes: int


def delete_job(layout: Layout, record: JobRecord) -> list[Deleted]:
    """Delete an ended job and, for a pipeline or sweep, its steps' or trials' jobs; each one's
    record and folder. Refused, with nothing deleted, while it or any of its children runs."""
    if record.parent:
        raise DistrunError(
            f"job {record.name} belongs to {record.parent}, whose record lists it",
            f"delete the whole of it: distrun job delete {record.parent}",
        )
    index = JobIndex(layout.db_path)
    family = [record, *index.list(-1, JobFilter(parent=record.name))]
    running = [r.name for r in family if not r.terminal]
    if running:
        raise DistrunError(
            f"job {record.name} has not ended ({', '.join(running)} still {_state(family, running[0])})",
            f"cancel it first: distrun job cancel {record.name}",
        )
    deleted = []
    for member in reversed(family):  # children first: a parent's record is gone last
        if index.delete_ended(member.name):
            deleted.append(Deleted(member.name, _remove_folder(layout.jobs_dir, member.name)))
    return deleted


def _state(family: list[JobRecord], name: str) -> str:
    return next(str(r.status) for r in family if r.name == name)


def _remove_folder(jobs_dir: Path, name: str) -> int:
    """Remove jobs/NAME (only there, whatever the record says of its folder), without following
    any link a job left in it; the bytes it held."""
    folder = jobs_dir / name
    if folder.is_symlink():
        folder.unlink(missing_ok=True)
        return 0
    if not folder.is_dir():
        return 0
    size = tree_bytes(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return size
