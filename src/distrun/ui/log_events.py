"""The live log of the job page: server-sent events read from the log files at byte offsets.

Every event carries, as its id, the offset reached in each file, so a browser that reconnects
(EventSource sends the last id back as Last-Event-ID) resumes exactly where it stopped: no
line shown twice, none lost. Only whole lines are sent; a file's unfinished last line waits
for its newline, or for the job's end.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from distrun.runner.follow import log_files, log_labels
from distrun.store.layout import JobFolder

READ_LIMIT = 256 * 1024  # bytes read from one file for one event; a longer line goes in pieces
_LOG_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}\.txt$")


@dataclass
class LogBatch:
    lines: list[str]  # ready to show, prefixed with "[label] " when several logs are merged
    offsets: dict[str, int]


def encode_cursor(offsets: dict[str, int]) -> str:
    return ",".join(f"{name}:{offset}" for name, offset in sorted(offsets.items()))


def decode_cursor(text: str | None) -> dict[str, int]:
    """Offsets from a Last-Event-ID; anything malformed counts as "from the start"."""
    offsets: dict[str, int] = {}
    for part in (text or "").split(","):
        name, _, number = part.rpartition(":")
        if _LOG_NAME.match(name) and number.isdigit():
            offsets[name] = int(number)
    return offsets


def valid_log_name(name: str | None) -> bool:
    return name is not None and bool(_LOG_NAME.match(name))


def read_batch(folder: JobFolder, offsets: dict[str, int], only: str | None, final: bool) -> LogBatch:
    """What is new in the job's logs since `offsets` (whole lines; with `final`, the rest too)."""
    labels = log_labels(folder) if only is None else {}
    lines: list[str] = []
    reached = dict(offsets)
    for path in _chosen(log_files(folder), only):
        start = offsets.get(path.name, 0)
        data = _read_from(path, start)
        cut = data.rfind(b"\n") + 1
        if final or (cut == 0 and len(data) >= READ_LIMIT):
            cut = len(data)
        if cut == 0:
            reached.setdefault(path.name, start)
            continue
        reached[path.name] = start + cut
        prefix = "" if only is not None else f"[{labels.get(path.name, (path.stem, 0))[0]}] "
        lines.extend(prefix + line for line in _lines(data[:cut]))
    return LogBatch(lines, reached)


def sse_event(batch: LogBatch) -> str:
    """One server-sent event: each line a `data:` field (the browser joins them with newlines)."""
    body = "".join(f"data: {line}\n" for line in batch.lines)
    return f"id: {encode_cursor(batch.offsets)}\n{body}\n"


def _chosen(paths: Iterable[Path], only: str | None) -> list[Path]:
    return [p for p in paths if only is None or p.name == only]


def _read_from(path: Path, offset: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as handle:
        handle.seek(offset)
        return handle.read(READ_LIMIT)


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    # A carriage return would end an SSE field early; progress bars redraw with it.
    return [line.replace("\r", "") for line in text.split("\n")[: -1 if text.endswith("\n") else None]]
