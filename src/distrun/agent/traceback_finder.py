"""Find the last Python traceback in a process's log, so users need not search every rank."""

from __future__ import annotations

import os
import re

from distrun.core.safe_files import open_regular, tail_of

_HEAD = b"Traceback (most recent call last):"
_TAIL_BYTES = 256 * 1024
_MAX_LINES = 80
# `ValueError: message`, `KeyboardInterrupt`, `mpi4py.MPI.Exception: ...`
_EXCEPTION_LINE = re.compile(rb"^[A-Za-z_][\w.]*(?::.*)?$")
_MAX_NOISE = 200
_MAX_MESSAGE_LINES = 40
# Lines another part of the process logs after the exception: `[W1122 10:00:00 ...]`,
# `2026-11-22 10:00:00,123 INFO ...`, `INFO:root:...`.
_LOG_RECORD = re.compile(rb"^(?:\[[A-Z]?\d|\[[a-z]+\d*\]|\d{4}-\d\d-\d\d|(?:DEBUG|INFO|WARNING|ERROR)[: ])")
_CHAIN = (b"During handling of the above exception", b"The above exception was the direct cause")


def last_traceback(log_path: str, fd: int | None = None) -> str:
    """The last traceback block (head to exception line) near the end of the log, or ''.

    `fd`: the descriptor distrun wrote the log through. The job can rename, replace or link
    the name away (to a pipe that would block the read, or to another file whose text would
    end up in the record); the descriptor still reads the file distrun wrote.
    """
    tail = tail_bytes(log_path, _TAIL_BYTES, fd)
    start = tail.rfind(_HEAD)
    if start < 0:
        return ""
    # Whatever precedes the head on its line starts every line of the block: torch's
    # `[rank2]: ` (its excepthook, once a process group exists), or a logger's prefix.
    prefix = tail[tail.rfind(b"\n", 0, start) + 1 : start]
    # Chained exceptions print several blocks; keep the whole chain ending in the last one.
    chain = max(tail.rfind(b"\n" + lead + sentence, 0, start) for sentence in _CHAIN for lead in (prefix, b""))
    if chain >= 0:
        first = tail.rfind(_HEAD, 0, chain)
        if first >= 0:
            start = first
    lines = [_unprefixed(line, prefix) for line in tail[start:].splitlines()]
    kept: list[bytes] = []
    noise = 0
    for index, line in enumerate(lines):
        if index == 0 or not line or line[:1].isspace() or line.startswith((_HEAD, *_CHAIN)):
            kept.append(line)
            continue
        if not _EXCEPTION_LINE.match(line) and noise < _MAX_NOISE:
            # A line of another stream between the frames: stdout and stderr of one process
            # (or two processes sharing a pipe) are not ordered line by line.
            noise += 1
            continue
        kept.append(line)
        # An unindented line after the frames is the exception; the block goes on only when
        # a chaining sentence follows it.
        following = [f for f in lines[index + 1 : index + 4] if f.strip()]
        if not (following and following[0].startswith(_CHAIN)):
            kept.extend(_message_rest(lines[index + 1 :]))
            break
    text = b"\n".join(kept).decode("utf-8", "replace")
    lines_out = text.splitlines()
    if len(lines_out) > _MAX_LINES:
        lines_out = lines_out[:10] + ["  ..."] + lines_out[-(_MAX_LINES - 11) :]
    return "\n".join(lines_out)


def _message_rest(lines: list[bytes]) -> list[bytes]:
    """The further lines of a multi-line exception message (`raise ValueError("a\\nb")`, torch's
    "Error(s) in loading state_dict:\\n\\tMissing key(s)..."): up to a blank line, a new
    traceback, a log record such as torch's `[W1122 ...]`, or a bound."""
    rest: list[bytes] = []
    for line in lines[:_MAX_MESSAGE_LINES]:
        if not line.strip() or line.startswith((_HEAD, *_CHAIN)) or _LOG_RECORD.match(line):
            break
        rest.append(line)
    return rest


def tail_bytes(log_path: str, size: int, fd: int | None = None) -> bytes:
    """The last `size` bytes of a log: through `fd` when given, else a regular file, no link."""
    try:
        if fd is not None and fd >= 0:
            return tail_of(fd, size)
        own = open_regular(log_path)
        try:
            return tail_of(own, size)
        finally:
            os.close(own)
    except OSError:
        return b""


def _unprefixed(line: bytes, prefix: bytes) -> bytes:
    return line[len(prefix) :] if prefix and line.startswith(prefix) else line


TAIL_LINES = 10
_TAIL_LINE_CHARS = 500


def log_tail(log_path: str, count: int = TAIL_LINES, fd: int | None = None) -> str:
    """The last `count` non-empty lines of a log (each cut to a bounded length): the cause of a
    failure without a traceback (`python: can't open file`, an argparse usage error,
    `sudo: command not found`). Read like `last_traceback`: never through a link or a pipe."""
    tail = tail_bytes(log_path, 64 * 1024, fd)
    lines = [line for line in tail.decode("utf-8", "replace").splitlines() if line.strip()][-count:]
    return "\n".join(line if len(line) <= _TAIL_LINE_CHARS else line[:_TAIL_LINE_CHARS] + " ..." for line in lines)
