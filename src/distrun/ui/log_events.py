"""The live log of the job page: server-sent events read from the log files at byte offsets.

Every event carries, as its id, the offset reached in each file, so a browser that reconnects
(EventSource sends the last id back as Last-Event-ID) resumes exactly where it stopped: no
line shown twice, none lost. Only whole lines are sent; a file's unfinished last line waits
for its newline, or for the job's end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distrun.store.layout import JobFolder
from distrun.ui.job_files import read_from, regular_files

READ_LIMIT = 256 * 1024  # bytes read from one file for one event; a longer line goes in pieces
BATCH_LIMIT = 1 << 20  # bytes read for one event from all files together; the rest comes next
MAX_LOG_FILES = 8192  # log files followed in one job: as many as the largest plan has processes
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


def log_names(folder: JobFolder, only: str | None) -> list[str]:
    """The job's log files (regular files directly in user_logs, reached without a link)."""
    names = regular_files(folder, folder.user_logs, MAX_LOG_FILES, valid_log_name)
    return [name for name in names if only is None or name == only]


def read_batch(
    folder: JobFolder, offsets: dict[str, int], only: str | None, final: bool, labels: dict[str, tuple[str, int]]
) -> LogBatch:
    """What is new in the job's logs since `offsets` (whole lines; with `final`, the rest too).

    At most BATCH_LIMIT bytes in all: the files not reached this time are read next time.
    A file swapped for a pipe, a link or a device is skipped (nothing is read through it).
    """
    lines: list[str] = []
    reached = dict(offsets)
    budget = BATCH_LIMIT
    names = log_names(folder, only)
    # Start at a different file each time (the offsets move on), so that a few chatty ranks
    # cannot take the whole budget of every event from the others.
    first = sum(offsets.values()) % len(names) if names else 0
    for name in names[first:] + names[:first]:
        if budget <= 0:
            break
        start = offsets.get(name, 0)
        data = read_from(folder, folder.user_logs / name, start, min(READ_LIMIT, budget))
        budget -= len(data)
        cut = data.rfind(b"\n") + 1
        if final or (cut == 0 and len(data) >= READ_LIMIT):
            cut = len(data)
        if cut == 0:
            reached.setdefault(name, start)
            continue
        reached[name] = start + cut
        prefix = "" if only is not None else f"[{labels.get(name, (name.rsplit('.', 1)[0], 0))[0]}] "
        lines.extend(prefix + line for line in _lines(data[:cut]))
    return LogBatch(lines, reached)


def sse_event(batch: LogBatch) -> str:
    """One server-sent event: each line a `data:` field (the browser joins them with newlines)."""
    body = "".join(f"data: {line}\n" for line in batch.lines)
    return f"id: {encode_cursor(batch.offsets)}\n{body}\n"


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    # A carriage return would end an SSE field early; progress bars redraw with it.
    return [line.replace("\r", "") for line in text.split("\n")[: -1 if text.endswith("\n") else None]]
