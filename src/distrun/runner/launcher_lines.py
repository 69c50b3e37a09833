"""The event lines a parent supervised in the background writes to its `system_logs/launcher.txt`
(a step started, a trial's metric, a trial Completed), read as they are written.

Read by `distrun job stream PARENT` (`distrun.cli.parent_events`) and by a pipeline following its
sweep step (`distrun.runner.pipeline_step_jobs`), whose trials' events it says as its own. That
file is in the job's folder, which its children may write: it is opened each time through
`open_beneath` (no link followed on the way, a pipe or device refused), read from where the last
read ended, and given as whole lines only, a line without end bounded by MAX_PENDING. The file's
own RunId line and its execution summary are left out: whoever shows the lines says both itself.
"""

from __future__ import annotations

import os

from distrun.agent.line_stream import MAX_PENDING
from distrun.core.safe_files import open_beneath
from distrun.store.layout import JobFolder

LAUNCHER_LOG = "system_logs/launcher.txt"
SUMMARY_START = b"Execution Summary"  # the first line of every summary (distrun.runner.report)


class LauncherLines:
    """The lines of one parent's launcher.txt not read yet, up to its summary."""

    def __init__(self, folder: JobFolder, name: str) -> None:
        self.folder = folder
        self.offset = 0
        self.pending = b""  # the start of a line not yet ended
        self.skip_first: bytes | None = f"RunId: {name}".encode()
        self.done = False  # the summary began: nothing more is given

    def read(self) -> list[bytes]:
        """The whole lines written since the last read (blank ones too), without their ends; [] when
        the file is not there yet. Raises OSError when it cannot be read safely (then `done`)."""
        lines: list[bytes] = []
        try:
            fd = open_beneath(self.folder.root, LAUNCHER_LOG)
        except FileNotFoundError:
            return lines  # not started in the background yet
        except OSError:  # replaced by a link, a pipe, ...: never read through
            self.done = True
            raise
        with os.fdopen(fd, "rb") as handle:
            handle.seek(self.offset)
            while not self.done and (data := handle.read(1 << 20)):
                self.offset += len(data)
                lines += self._lines(data)
        return lines

    def _lines(self, data: bytes) -> list[bytes]:
        split = (self.pending + data).split(b"\n")
        self.pending = split.pop()
        if len(self.pending) >= MAX_PENDING:  # memory is bounded whatever the file holds
            split.append(self.pending)
            self.pending = b""
        lines = []
        for line in split:
            if self.skip_first is not None:
                first, self.skip_first = self.skip_first, None
                if line == first:
                    continue
            if line.rstrip(b"\r") == SUMMARY_START:
                self.done = True
                break
            lines.append(line)
        return lines
