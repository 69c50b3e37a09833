"""The queue of a parallel step's mini-batches, held by process 0 of the gang in its job folder
(`<job folder>/parallel`) and served to the others (`parallel_queue_server`). A claim is a file
created with O_EXCL, so an attempt takes each mini-batch once; what ended is kept for the next
attempt.

    claims/<attempt>/<i>   process that took mini-batch i in this attempt of the job
    done/<i>               its result: {"process", "items", "lines"}; written once, by rename
    failed/<i>             a mini-batch that failed every try: {"process", "items", "tries", "error"}
    short/<i>              a done mini-batch whose `run` returned fewer rows than items: {"failed_items"}
    stop                   why every process stops now (an init() that failed, a threshold passed)
    plan.json              how many mini-batches, of what (written by process 0)

A mini-batch claimed in an earlier attempt but neither done nor failed is taken again in the
next (`max_restarts`); done and failed ones are kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distrun.core.file_modes import FILE_MODE, make_dirs


class Queue:
    def __init__(self, folder: Path, attempt: int, count: int) -> None:
        self.folder = folder
        self.count = count
        self.claims = folder / "claims" / str(attempt)
        for sub in (self.claims, folder / "done", folder / "failed", folder / "short"):
            make_dirs(sub)

    def _taken(self, index: int) -> bool:
        return (self.folder / "done" / str(index)).exists() or (self.folder / "failed" / str(index)).exists()

    def claim(self, index: int, process: str) -> bool:
        """Whether `process` now holds mini-batch `index` (not ended, not held in this attempt)."""
        if self._taken(index):
            return False
        try:
            fd = os.open(self.claims / str(index), os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            return False
        os.write(fd, process.encode())
        os.close(fd)
        return True

    def _write(self, sub: str, index: int, record: dict[str, Any]) -> None:
        final = self.folder / sub / str(index)
        partial = final.with_name(f".{index}.{os.getpid()}")
        partial.write_text(json.dumps(record))
        os.replace(partial, final)

    def describe(self, plan: dict[str, Any]) -> None:
        """plan.json: how many mini-batches there are, for the faces."""
        partial = self.folder / f".plan.json.{os.getpid()}"
        partial.write_text(json.dumps(plan))
        os.replace(partial, self.folder / "plan.json")

    def done(self, index: int, process: str, items: int, lines: list[str], missing: int = 0) -> None:
        if missing:
            self._write("short", index, {"process": process, "items": items, "failed_items": missing})
        self._write("done", index, {"process": process, "items": items, "lines": lines})

    def failed_items(self) -> int:
        """Items of done mini-batches that `run` returned no row for."""
        total = 0
        for entry in os.listdir(self.folder / "short"):
            if not entry.startswith("."):
                total += int(json.loads((self.folder / "short" / entry).read_text()).get("failed_items", 0))
        return total

    def failed(self, index: int, record: dict[str, Any]) -> None:
        self._write("failed", index, record)

    def stop(self, why: str) -> None:
        """Every process stops; the first reason given is kept."""
        try:
            fd = os.open(self.folder / "stop", os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            return
        os.write(fd, why.encode())
        os.close(fd)

    def stopped(self) -> str | None:
        try:
            return (self.folder / "stop").read_text()
        except FileNotFoundError:
            return None

    def counts(self) -> tuple[int, int]:
        """(done, failed) mini-batches."""
        return _count(self.folder / "done"), _count(self.folder / "failed")

    def failures(self) -> list[dict[str, Any]]:
        found = []
        for entry in sorted(os.listdir(self.folder / "failed"), key=_number):
            if not entry.startswith("."):
                found.append(json.loads((self.folder / "failed" / entry).read_text()))
        return found

    def results(self) -> Iterator[dict[str, Any]]:
        """Every done mini-batch's result, in mini-batch order."""
        for index in range(self.count):
            try:
                yield json.loads((self.folder / "done" / str(index)).read_text())
            except FileNotFoundError:
                continue


def _count(folder: Path) -> int:
    return sum(1 for name in os.listdir(folder) if not name.startswith("."))


def _number(name: str) -> int:
    return int(name) if name.isdigit() else -1
