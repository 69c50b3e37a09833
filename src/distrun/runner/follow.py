"""Follow a job's per-process log files from any shell (`job stream`, `logs --follow`).

The supervising process streams straight from the pipes; a second reader can only read
the files, so it reads what is new every 0.2 s, whole lines only, with the same prefixes.

The job's own processes can write into its folder, so what is read there is checked: only
regular files directly in a real user_logs folder, opened without following links. A link
a job plants there (to another user's file, say) is never read through.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from distrun.agent.line_stream import LineStream
from distrun.core.safe_files import open_regular
from distrun.store.layout import JobFolder
from distrun.store.log_labels import label_of_unplanned, log_labels

__all__ = ["follow_logs", "lines_of", "log_files", "log_labels", "tail_bytes"]

POLL_SECONDS = 0.2


def log_files(folder: JobFolder) -> list[Path]:
    """The log files of a job: regular `*.txt` files in user_logs, never through a link."""
    logs = folder.user_logs
    if logs.is_symlink() or not logs.is_dir():
        return []
    with os.scandir(logs) as entries:
        return sorted(logs / e.name for e in entries if e.name.endswith(".txt") and e.is_file(follow_symlinks=False))


def _open_log(path: Path) -> int:
    # The listing said "regular file", but the job may have swapped it since: checked again on
    # the descriptor (a pipe or device is refused, a link is never followed).
    return open_regular(path)


def follow_logs(
    folder: JobFolder,
    out: BinaryIO,
    is_finished: Callable[[], bool],
    *,
    only: str | None = None,
    color: bool = False,
    follow: bool = True,
    prefix: bool = True,
    raw: bool = False,
    stop_when_unread: bool = False,
) -> None:
    """Show the job's logs as they grow until `is_finished()` (or once, without `follow`).

    `stop_when_unread`: return as soon as nobody reads `out` (`distrun job stream NAME | head`),
    where nothing else depends on the loop; `distrun run` on an engine keeps going, as its
    loop also brings the job's record to its end.
    """
    stream = LineStream(out, color, raw)
    offsets: dict[str, int] = {}
    files: dict[str, int] = {}  # name -> inode: a new file under a known name is read from its start
    while True:
        finished = is_finished()  # read before the files: nothing written after is missed
        labels = log_labels(folder)
        for path in log_files(folder):
            if only is not None and path.name != only:
                continue
            if path.name not in offsets:
                label, node = labels.get(path.name) or label_of_unplanned(path.name)
                stream.add(path.name, label if prefix else None, node)
                offsets[path.name] = 0
            inode = _inode(path)
            if files.setdefault(path.name, inode) != inode:  # a restarted job's next attempt (the last moved away)
                files[path.name], offsets[path.name] = inode, 0
            offsets[path.name] = _read_new(path, offsets[path.name], lambda data, key=path.name: stream.feed(key, data))
            if stop_when_unread and stream.unread:
                return
        if finished or not follow:
            for key in offsets:
                stream.finish(key)
            return
        time.sleep(POLL_SECONDS)


def _inode(path: Path) -> int:
    try:
        return path.stat().st_ino
    except OSError:
        return 0


def _read_new(path: Path, offset: int, sink: Callable[[bytes], None]) -> int:
    try:
        with os.fdopen(_open_log(path), "rb") as handle:
            handle.seek(offset)
            while True:
                data = handle.read(1 << 20)
                if not data:
                    break
                sink(data)
                offset += len(data)
    except OSError:
        pass
    return offset


def tail_bytes(path: Path, lines: int) -> bytes:
    """The last `lines` lines of a file, read from its end."""
    with os.fdopen(_open_log(path), "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        block = 1 << 16
        data = b""
        pos = end
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(block, pos)
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + data
    parts = lines_of(data)
    return b"".join(parts[-lines:]) if lines else b""


def lines_of(data: bytes) -> list[bytes]:
    """Lines ended by \\n only, each with its newline: a progress bar's \\r does not end a line."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines
