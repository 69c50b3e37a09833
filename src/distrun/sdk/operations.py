"""What the SDK does with a job: the CLI's own path, called from Python.

    job data -> distrun.spec.loader.load_job_data  (the one validation path)
             -> submission.choose_target / prepare_job -> backend.submit_detached
    stream   -> distrun.follow.follow_logs + report.execution_summary  (like `distrun job stream`)

Both SDK styles (v2 `MLClient`, v1 `Experiment`/`Run`) come through here, so a job built in
Python is recorded, run, listed and followed exactly like one from a YAML file.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from distrun.errors import JobFailedError, Position
from distrun.sdk.notices import say_once
from distrun.spec.loader import LoadedJob, load_job_data
from distrun.spec.source_map import SourceMap
from distrun.store.index import FAILED, JobIndex, JobRecord
from distrun.store.layout import Layout

POLL_SECONDS = 0.2
IGNORED_PROPERTY = "distrun.ignored"  # the Azure ML arguments a job was built with that distrun did not use


@dataclass
class JobSource:
    """A job as plain data, the folder its relative paths start from, and where it was written."""

    data: dict[str, Any]
    base_dir: Path
    source: str = "<python>"
    positions: dict[tuple[str | int, ...], Position] = field(default_factory=dict)

    def load(self, overrides: list[str] | tuple[str, ...] = ()) -> LoadedJob:
        smap = SourceMap(self.source, dict(self.positions))
        return load_job_data(copy.deepcopy(self.data), self.base_dir, self.source, overrides, smap)


def python_source(data: dict[str, Any], base_dir: Path, where: Position) -> JobSource:
    """A job built in Python: every problem points at the line that built it."""
    return JobSource(data, base_dir, "<python>", {(): where})


def submit(job: JobSource, layout: Layout, compute: str | None = None) -> JobRecord:
    """Validate, record and start a job in the background, as `distrun job create` does."""
    from distrun.backends import backend_for
    from distrun.report import environment_note
    from distrun.submission import choose_target, prepare_job

    loaded = job.load()
    target = choose_target(loaded, layout, compute)
    backend = backend_for(target.type)
    if target.type == "local":
        note = environment_note(loaded.spec.environment)
        if note:
            say_once(f"environment:{loaded.spec.environment!r}", note.removeprefix("distrun: "))
    prepared = prepare_job(loaded, layout, target)
    return backend.submit_detached(prepared, layout)


def stream(layout: Layout, name: str, out: TextIO) -> JobRecord:
    """Print a job's logs until it ends, then its execution summary (`distrun job stream`)."""
    from distrun.follow import follow_logs
    from distrun.report import execution_summary

    index = JobIndex(layout.db_path)
    record = index.get(name)
    out.write(f"RunId: {record.name}\nStreaming {record.folder}/user_logs\n")
    out.flush()
    sink = binary_view(out)
    follow_logs(layout.job(record.name), sink, lambda: index.get(record.name).terminal, color=_color(out))
    sink.flush()
    final = index.get(record.name)
    out.write(execution_summary(final) + "\n")
    out.flush()
    return final


def wait(layout: Layout, name: str) -> JobRecord:
    """Wait quietly until a job ends."""
    index = JobIndex(layout.db_path)
    while True:
        record = index.get(name)
        if record.terminal:
            return record
        time.sleep(POLL_SECONDS)


def raise_if_failed(record: JobRecord) -> None:
    """A failed job becomes `JobFailedError` carrying the rank that failed first and its traceback."""
    if record.status != FAILED:
        return
    cause = dict(record.root_cause or {})
    if record.reason:
        cause.setdefault("reason", record.reason)
    error = JobFailedError(record.name, record.status, cause)
    if cause.get("log"):
        error.hint = f"the log of the process that failed first: {cause['log']}"
    raise error


def _color(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(callable(isatty) and isatty()) and "NO_COLOR" not in os.environ


class _TextSink:
    """Bytes written to a text stream that has no binary buffer (a notebook's output)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, data: bytes) -> int:
        self._out.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self._out.flush()


def binary_view(out: TextIO) -> BinaryIO:
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()  # what was written as text comes first
        return buffer  # type: ignore[no-any-return]
    return _TextSink(out)  # type: ignore[return-value]
