"""Find the last Python traceback in a process's log, so users need not search every rank."""

from __future__ import annotations

import os

_HEAD = b"Traceback (most recent call last):"
_TAIL_BYTES = 256 * 1024
_MAX_LINES = 80
_CHAIN = (b"During handling of the above exception", b"The above exception was the direct cause")


def last_traceback(log_path: str) -> str:
    """The last traceback block (head to exception line) near the end of the log, or ''."""
    try:
        with open(log_path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return ""
    start = tail.rfind(_HEAD)
    if start < 0:
        return ""
    # Chained exceptions print several blocks; keep the whole chain ending in the last one.
    chain = tail.rfind(b"\nDuring handling of the above exception", 0, start)
    chain = max(chain, tail.rfind(b"\nThe above exception was the direct cause", 0, start))
    if chain >= 0:
        first = tail.rfind(_HEAD, 0, chain)
        if first >= 0:
            start = first
    lines = tail[start:].splitlines()
    kept: list[bytes] = []
    for index, line in enumerate(lines):
        kept.append(line)
        if index == 0 or not line or line[:1].isspace() or line.startswith((_HEAD, *_CHAIN)):
            continue
        # An unindented line after the frames is the exception; the block goes on only when
        # a chaining sentence follows it.
        following = [f for f in lines[index + 1 : index + 4] if f.strip()]
        if not (following and following[0].startswith(_CHAIN)):
            break
    text = b"\n".join(kept).decode("utf-8", "replace")
    lines_out = text.splitlines()
    if len(lines_out) > _MAX_LINES:
        lines_out = lines_out[:10] + ["  ..."] + lines_out[-(_MAX_LINES - 11) :]
    return "\n".join(lines_out)
