"""What the SDK does with a job: the CLI's own path, called from Python.

    job data -> distrun.loading.loader.load_job_data  (the one validation path)
             -> distrun.runner.jobs.submit_job  (preflight, record, render, schedule: as `distrun job create`)
    stream   -> distrun.runner.jobs.stream_job  (like `distrun job stream`)

Both SDK styles (v2 `MLClient`, v1 `Experiment`/`Run`) come through here, so a job built in
Python is recorded, run, listed and followed exactly like one from a YAML file.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from distrun.core.errors import JobFailedError, Position
from distrun.core.job_status import JobStatus
from distrun.loading.loader import LoadedJob, load_job_data
from distrun.sdk.notices import say_once
from distrun.spec.source_map import SourceMap
from distrun.store.index import JobRecord
from distrun.store.layout import Layout

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
    from distrun.runner.jobs import submit_job

    record, rendered = submit_job(job.load(), layout, compute)
    for warning in rendered.warnings:
        say_once(warning, warning)
    return record


def stream(layout: Layout, name: str, out: TextIO) -> JobRecord:
    """Print a job's logs until it ends, then its execution summary (`distrun job stream`)."""
    from distrun.runner.jobs import stream_job

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    # The sink is made after the header is written: what was written as text comes first.
    return stream_job(layout, name, _LazySink(out), say, color=_color(out))


def wait(layout: Layout, name: str) -> JobRecord:
    """Wait quietly until a job ends."""
    from distrun.runner.jobs import wait_job

    return wait_job(layout, name)


def raise_if_failed(record: JobRecord) -> None:
    """A failed job becomes `JobFailedError` carrying the rank that failed first and its traceback."""
    if record.status != JobStatus.FAILED:
        return
    cause = dict(record.root_cause or {})
    if record.reason:
        cause.setdefault("reason", record.reason)
    error = JobFailedError(record.name, record.status.value, cause)
    if cause.get("log"):
        error.hint = f"the log of the process that failed first: {cause['log']}"
    raise error


def _color(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(callable(isatty) and isatty()) and "NO_COLOR" not in os.environ


class _LazySink:
    """`binary_view(out)`, taken at the first write (after the header went out as text)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._sink: BinaryIO | None = None

    def write(self, data: bytes) -> int:
        if self._sink is None:
            self._sink = binary_view(self._out)
        return self._sink.write(data)

    def flush(self) -> None:
        if self._sink is not None:
            self._sink.flush()


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
