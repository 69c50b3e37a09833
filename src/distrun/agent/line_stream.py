"""The live stream: every process's lines, whole, each with its `[label]` prefix.

Output arrives from pipes in arbitrary chunks. Each process keeps the tail of its last chunk
until the newline that completes it arrives, so two processes' lines are never fused or
split. Prefixing is done on whole chunks with `bytes.replace`, in C, not line by line in
Python: that is what keeps the stream above 150 MB/s.
"""

from __future__ import annotations

from typing import BinaryIO

from distrun.core.terminal_text import neutral

# A line longer than this is passed on in pieces (the log file keeps it whole): memory is
# bounded whatever a process writes.
MAX_PENDING = 1 << 20
_COLORS = (b"\x1b[36m", b"\x1b[33m", b"\x1b[35m", b"\x1b[32m", b"\x1b[34m", b"\x1b[31m")
_RESET = b"\x1b[0m"


class LineStream:
    def __init__(self, out: BinaryIO | None, color: bool = False, raw: bool = False) -> None:
        self._out = out  # None: nothing to show (or the reader went away)
        self._color = color
        # Shown on a terminal: escape sequences but colours neutralized (terminal_text).
        # `raw`: the exact bytes, for one log written to a file or a pipe.
        self._raw = raw
        self._prefix: dict[str, bytes] = {}
        self._pending: dict[str, bytes] = {}

    def add(self, key: str, label: str | None, color_index: int = 0) -> None:
        """A new source; `label=None` streams its lines without a prefix."""
        self._pending[key] = b""
        if label is None:
            self._prefix[key] = b""
            return
        text = f"[{label}] ".encode()
        if self._color:
            text = _COLORS[color_index % len(_COLORS)] + text + _RESET
        self._prefix[key] = text

    def feed(self, key: str, data: bytes) -> None:
        if self._out is None or not data:
            return
        prefix = self._prefix[key]
        if not prefix:
            # No prefix (one process's log on its own): its bytes as they are, a line longer
            # than MAX_PENDING is not cut, and nothing needs holding back.
            self._write(data)
            return
        pending = self._pending[key]
        cut = data.rfind(b"\n") + 1
        if not cut:  # no line ends in this chunk
            pending += data
            if len(pending) < MAX_PENDING:
                self._pending[key] = pending
            else:
                self._pending[key] = b""
                self._write(prefix + pending + b"\n")
            return
        self._pending[key] = data[cut:]
        # b"a\nb\nc" after pending b"z" -> b"P za\nP b\n", c kept. One pass in C puts the prefix
        # after every newline of the chunk; the copy ends at its last newline (the prefix meant
        # for the kept tail is dropped). A chunk is copied twice in all, not six times as with
        # slicing and concatenating first: at 64 KiB chunks that halved the stream's CPU.
        body = data.replace(b"\n", b"\n" + prefix)
        end = len(body) - (len(data) - cut) - len(prefix)
        self._write(b"".join((prefix, pending, memoryview(body)[:end])))

    def finish(self, key: str) -> None:
        """A process's pipe closed: pass on its last line even without a newline."""
        rest = self._pending.get(key, b"")
        if rest and self._out is not None:
            self._pending[key] = b""
            self._write(self._prefix[key] + rest.replace(b"\n", b"\n" + self._prefix[key]) + b"\n")

    @property
    def unread(self) -> bool:
        """A write failed: nobody reads what this stream shows any more."""
        return self._out is None

    @property
    def backlog(self) -> int:
        """Bytes written but not yet taken by the reader (a non-blocking output's backlog)."""
        return getattr(self._out, "backlog", 0) if self._out is not None else 0

    def pump(self) -> None:
        """Hand the reader what it will take now (see agent.terminal_output)."""
        if self.backlog:
            self._out.pump()  # type: ignore[union-attr]

    def message(self, text: str) -> None:
        self._write(text.encode() + b"\n")

    def _write(self, data: bytes) -> None:
        if self._out is None:
            return
        if not self._raw:
            data = neutral(data)
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError):
            # The reader went away (`| head`: EPIPE; a closed terminal: EIO; a full disk under
            # a redirect: ENOSPC): keep supervising, stop streaming. The log files have it all.
            self._out = None
