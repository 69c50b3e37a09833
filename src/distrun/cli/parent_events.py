"""`distrun job stream PIPELINE` (or SWEEP) of a detached parent: its own event lines.

A parent started in the background (`distrun run -d`, `job create`) says its event lines (a step
started, a trial's metric, a step Completed) into its `system_logs/launcher.txt`, and then its
execution summary. They are read as written (`distrun.runner.launcher_lines`: no link followed,
whole lines only, without the file's RunId line and its summary) and shown terminal-safe
(`neutral`), under the lock the children's lines are written under.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from distrun.cli.stdout_reader import reader_gone
from distrun.core.terminal_text import neutral
from distrun.runner.launcher_lines import LauncherLines
from distrun.store.layout import JobFolder

LOOK_SECONDS = 0.2  # how often the file is read for new lines


class ParentEvents:
    """The event lines of one parent's launcher.txt, shown as they are written."""

    def __init__(self, folder: JobFolder, name: str, out: BinaryIO, lock: threading.Lock) -> None:
        self.lines = LauncherLines(folder, name)
        self.out = out
        self.lock = lock
        self.blank = False  # a blank line held back: the summary starts with one
        self.unread = False  # a write failed: the reader went away (`| head`)

    @property
    def done(self) -> bool:
        """The summary began (or the file cannot be read): nothing more is shown."""
        return self.lines.done

    @property
    def pending(self) -> bytes:
        return self.lines.pending

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
            lines = self.lines.read()
        except OSError as exc:  # replaced by a link, a pipe, ...: never read through
            self._write(neutral(f"distrun: its events are not shown: {exc}".encode()) + b"\n")
            return
        shown: list[bytes] = []
        for line in lines:
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
