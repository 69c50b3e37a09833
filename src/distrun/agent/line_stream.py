"""The live stream: every process's lines, whole, each with its `[label]` prefix.

Output arrives from pipes in arbitrary chunks. Each process keeps the tail of its last chunk
until the newline that completes it arrives, so two processes' lines are never fused or
split. Prefixing is done on whole chunks with `bytes.replace`, in C, not line by line in
Python: that is what keeps the stream above 150 MB/s.
"""

from __future__ import annotations

from typing import BinaryIO

# A line longer than this is passed on in pieces (the log file keeps it whole): memory is
# bounded whatever a process writes.
MAX_PENDING = 1 << 20
_COLORS = (b"\x1b[36m", b"\x1b[33m", b"\x1b[35m", b"\x1b[32m", b"\x1b[34m", b"\x1b[31m")
_RESET = b"\x1b[0m"


class LineStream:
    def __init__(self, out: BinaryIO | None, color: bool = False) -> None:
        self._out = out
        self._color = color
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
        if self._out is None:
            return
        if not self._prefix[key]:
            # No prefix (one process's log on its own): its bytes as they are, a line longer
            # than MAX_PENDING is not cut, and nothing needs holding back.
            self._write(data)
            return
        pending = self._pending[key] + data
        cut = pending.rfind(b"\n") + 1
        if cut:
            complete, self._pending[key] = pending[:cut], pending[cut:]
        elif len(pending) < MAX_PENDING:
            self._pending[key] = pending
            return
        else:
            complete, self._pending[key] = pending + b"\n", b""
        prefix = self._prefix[key]
        # b"a\nb\n" -> b"P a\nP b\n": prefix the first line, and every line after a newline.
        body = complete[:-1].replace(b"\n", b"\n" + prefix)
        self._write(prefix + body + b"\n")

    def finish(self, key: str) -> None:
        """A process's pipe closed: pass on its last line even without a newline."""
        rest = self._pending.get(key, b"")
        if rest and self._out is not None:
            self._pending[key] = b""
            self._write(self._prefix[key] + rest.replace(b"\n", b"\n" + self._prefix[key]) + b"\n")

    def message(self, text: str) -> None:
        self._write(text.encode() + b"\n")

    def _write(self, data: bytes) -> None:
        if self._out is None:
            return
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError):
            # The reader went away (`| head`: EPIPE; a closed terminal: EIO; a full disk under
            # a redirect: ENOSPC): keep supervising, stop streaming. The log files have it all.
            self._out = None
