"""The live stream's writer: never blocks the supervisor, whoever reads (or not) at the other end.

`distrun run | less` left open, Ctrl-S on a terminal, a pipe nobody drains: a blocking write
would stop the supervisor's loop, and with it timeouts, cancels and the reading of the ranks'
pipes (which would then block the ranks). So the stream writes without blocking to its own open
file description of the same pipe or terminal (O_NONBLOCK on the shared one would leak into
the shell) and keeps what the reader has not taken yet. A reader that is only slower than a
burst of output (a busy machine) loses nothing: up to MAX_BACKLOG bytes are kept in any case,
and up to HARD_BACKLOG while the reader keeps taking some. Beyond that, or once the reader has
taken nothing for STALL_SECONDS, the stream skips ahead: whole writes (whole lines) are dropped
and counted, and once the reader catches up a marker says how many bytes were not shown. The
log files have every byte regardless.
"""

from __future__ import annotations

import os
import stat
import time
from collections import deque
from typing import BinaryIO

from distrun.core.terminal_text import neutral

MAX_BACKLOG = 4 << 20
HARD_BACKLOG = 32 << 20
STALL_SECONDS = 5.0


class NonBlockingOutput:
    def __init__(self, out: BinaryIO, fd: int) -> None:
        self._out = out  # the caller's stream, for the blocking writes at the end
        self._fd = fd
        self._backlog: deque[memoryview] = deque()
        self._size = 0
        self._skipped = 0
        self._gone = False
        self._progress_at = time.monotonic()  # when the reader last took something (or owed nothing)

    @classmethod
    def wrap(cls, out: BinaryIO) -> BinaryIO | NonBlockingOutput:
        """`out` itself unless it is a pipe or a terminal (a file or /dev/null never holds a writer up)."""
        try:
            fd = out.fileno()
            if not (stat.S_ISFIFO(os.fstat(fd).st_mode) or os.isatty(fd)):
                return out
            own = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except (OSError, ValueError, AttributeError):
            return out
        out.flush()
        return cls(out, own)

    # BinaryIO's part that LineStream uses
    def write(self, data: bytes) -> int:
        if self._gone:
            return len(data)
        now = time.monotonic()
        if not self._size:
            self._progress_at = now
        wanted = self._size + len(data)
        stalled = now - self._progress_at > STALL_SECONDS
        if wanted > HARD_BACKLOG or (wanted > MAX_BACKLOG and stalled):
            self._skipped += len(data)
        else:
            self._backlog.append(memoryview(bytes(data)))
            self._size += len(data)
        self.pump()
        return len(data)

    def flush(self) -> None:
        self.pump()

    @property
    def backlog(self) -> int:
        return self._size

    def pump(self) -> None:
        """Write what the reader takes now, without waiting."""
        while not self._gone:
            if not self._backlog:
                if not self._skipped:
                    return
                self._backlog.append(memoryview(self._marker()))
                self._size += len(self._backlog[0])
            head = self._backlog[0]
            try:
                written = os.write(self._fd, head)
            except BlockingIOError:
                return
            except OSError:  # the reader went away (EPIPE, EIO): nothing more to show
                self._gone = True
                self._backlog.clear()
                self._size = 0
                return
            self._size -= written
            if written:
                self._progress_at = time.monotonic()
            if written == len(head):
                self._backlog.popleft()
            else:
                self._backlog[0] = head[written:]

    def finish(self) -> None:
        """The job has ended and its record is written: now wait for the reader, then let go."""
        if not self._gone:
            os.set_blocking(self._fd, True)
            self.pump()
        os.close(self._fd)
        self._gone = True

    def _marker(self) -> bytes:
        text = (
            f"distrun: {self._skipped} bytes of output not shown here (the terminal or pipe was not "
            "reading); the log files have every byte: distrun logs <job name>\n"
        )
        self._skipped = 0
        return text.encode()


def say(out: BinaryIO, text: str) -> None:
    """Text for the user's terminal, which may have gone (closed window: EIO; `| head`: EPIPE)."""
    try:
        out.write(neutral(text.encode("utf-8", "surrogateescape")) + b"\n")  # job names, reasons: the job's text
        out.flush()
    except (OSError, ValueError):
        # What is still buffered would fail again when Python exits (exit status 120).
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        except (OSError, ValueError, AttributeError):
            pass
