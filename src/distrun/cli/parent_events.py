"""`distrun job stream PIPELINE` (or SWEEP) of a detached parent: its own event lines.

A parent started in the background (`distrun run -d`, `job create`) says its event lines (a step
started, a trial's metric, a step Completed) into its `system_logs/launcher.txt`, and then its
execution summary. That file is in the job's folder, which its children may write: it is opened
each time through `open_beneath` (no link followed on the way, a pipe or device refused), read
from where the last look ended, and shown whole lines only, terminal-safe (`neutral`), under the
lock the children's lines are written under. The file's own RunId line and its summary are left
out: the stream says both itself, from the record.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from distrun.agent.line_stream import MAX_PENDING
from distrun.cli.stdout_reader import reader_gone
from distrun.core.safe_files import open_beneath
from distrun.core.terminal_text import neutral
from distrun.store.layout import JobFolder

LOOK_SECONDS = 0.2  # how often the file is read for new lines
LAUNCHER_LOG = "system_logs/launcher.txt"
SUMMARY_START = b"Execution Summary"  # the first line of every summary (distrun.runner.report)


class ParentEvents:
    """The event lines of one parent's launcher.txt, shown as they are written."""

    def __init__(self, folder: JobFolder, name: str, out: BinaryIO, lock: threading.Lock) -> None:
        self.folder = folder
        self.out = out
        self.lock = lock
        self.offset = 0
        self.pending = b""  # the start of a line not yet ended
        self.blank = False  # a blank line held back: the summary starts with one
        self.skip_first = f"RunId: {name}".encode()  # said by the stream's own header
        self.done = False  # the summary began (or the file cannot be read): nothing more is shown
        self.unread = False  # a write failed: the reader went away (`| head`)

    def follow(self, ended: Callable[[], bool]) -> None:
        """Show new lines until `ended()` (read before the file: no line written before it is missed)."""
        while not self.done and not self.unread:
            if self._reader_gone():  # `| head` took what it wanted while no line came
                self.unread = True
                return
            last = ended()
            self.look()
            if last:
                return
            time.sleep(LOOK_SECONDS)

    def look(self) -> None:
        """Show the whole lines written since the last look."""
        try:
            fd = open_beneath(self.folder.root, LAUNCHER_LOG)
        except FileNotFoundError:
            return  # not (yet) started in the background: a parent run attached has no such file
        except OSError as exc:  # replaced by a link, a pipe, ...: never read through
            self.done = True
            self._write(neutral(f"distrun: its events are not shown: {exc}".encode()) + b"\n")
            return
        with os.fdopen(fd, "rb") as handle:
            handle.seek(self.offset)
            while not self.done and not self.unread and (data := handle.read(1 << 20)):
                self.offset += len(data)
                self._feed(data)

    def _feed(self, data: bytes) -> None:
        joined = self.pending + data
        lines = joined.split(b"\n")
        self.pending = lines.pop()
        if len(self.pending) >= MAX_PENDING:  # memory is bounded whatever the file holds
            lines.append(self.pending)
            self.pending = b""
        shown: list[bytes] = []
        for line in lines:
            if self.skip_first is not None:
                first, self.skip_first = self.skip_first, None
                if line == first:
                    continue
            if line.rstrip(b"\r") == SUMMARY_START:
                self.done = True
                break
            if self.blank:
                shown.append(b"")
            self.blank = not line.strip()
            if not self.blank:
                shown.append(line)
        if shown:
            self._write(b"".join(neutral(line) + b"\n" for line in shown))

    def _reader_gone(self) -> bool:
        try:
            fd = self.out.fileno()
        except (OSError, ValueError, AttributeError):  # not a file (a test's buffer)
            return False
        return reader_gone(fd)

    def _write(self, data: bytes) -> None:
        with self.lock:
            try:
                self.out.write(data)
                self.out.flush()
            except OSError:
                self.unread = True
