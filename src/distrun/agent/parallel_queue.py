"""The queue of a parallel step's mini-batches, held by process 0 of the gang in its job folder
(`<job folder>/parallel`) and served to the others (`parallel_queue_server`). Process 0 is its
only writer, so what is taken is kept in memory; what ended is appended, one JSON line each, to
logs that the next attempt of the job (`max_restarts`) reads back, so it takes none of those again:

    done.jsonl    {"index", "process", "items", "lines", "failed_items"}: a mini-batch that ran
    failed.jsonl  {"mini_batch", "process", "items", "tries", "error", ...}: one that failed every try
    stop          why every process stops (an init() that failed, a threshold passed)
    plan.json     how many mini-batches, of what (for the faces)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distrun.core.file_modes import FILE_MODE, make_dirs

DONE = "done.jsonl"
FAILED = "failed.jsonl"


def read_log(path: Path) -> list[dict[str, Any]]:
    """The whole records of a log (a last line cut short by a killed process is left out)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def _open_log(path: Path) -> int:
    """The log opened to append; a last line cut short (a killed attempt) is ended first, so the
    next record starts a line of its own."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")
    return fd


class Queue:
    def __init__(self, folder: Path, count: int) -> None:
        self.folder = folder
        self.count = count
        make_dirs(folder)
        done = read_log(folder / DONE)
        self.failed_records = read_log(folder / FAILED)
        self.ended = {int(r["index"]) for r in done} | {int(r["mini_batch"]) for r in self.failed_records}
        self.done_count = len({int(r["index"]) for r in done})
        self.short_items = sum(int(r.get("failed_items", 0)) for r in done)
        self.taken: set[int] = set()
        self.why: str | None = None  # an earlier attempt's stop is that attempt's
        self._done = _open_log(folder / DONE)
        self._failed = _open_log(folder / FAILED)

    def claim(self, index: int) -> bool:
        """Whether mini-batch `index` is to be run now (not ended, not taken in this attempt)."""
        if index in self.ended or index in self.taken:
            return False
        self.taken.add(index)
        return True

    def _append(self, fd: int, record: dict[str, Any]) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())  # one write: whole lines, appended

    def describe(self, plan: dict[str, Any]) -> None:
        partial = self.folder / f".plan.json.{os.getpid()}"
        partial.write_text(json.dumps(plan))
        os.replace(partial, self.folder / "plan.json")

    def done(self, index: int, process: str, items: int, lines: list[str], missing: int = 0) -> None:
        record = {"index": index, "process": process, "items": items, "lines": lines, "failed_items": missing}
        self._append(self._done, record)
        self.ended.add(index)
        self.done_count += 1
        self.short_items += missing

    def failed(self, index: int, record: dict[str, Any]) -> None:
        self._append(self._failed, record)
        self.failed_records.append(record)
        self.ended.add(index)

    def failed_items(self) -> int:
        """Items of done mini-batches that `run` returned no row for."""
        return self.short_items

    def stop(self, why: str) -> None:
        """Every process stops; the first reason given is kept."""
        if self.why is not None:
            return
        self.why = why
        (self.folder / "stop").write_text(why)

    def stopped(self) -> str | None:
        return self.why

    def counts(self) -> tuple[int, int]:
        """(done, failed) mini-batches."""
        return self.done_count, len(self.failed_records)

    def failures(self) -> list[dict[str, Any]]:
        return sorted(self.failed_records, key=lambda r: int(r.get("mini_batch", -1)))

    def results(self) -> Iterator[dict[str, Any]]:
        """Every done mini-batch's result, in mini-batch order."""
        by_index = {int(r["index"]): r for r in read_log(self.folder / DONE)}
        for index in sorted(by_index):
            yield by_index[index]
