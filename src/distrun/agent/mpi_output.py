"""Splitting an MPI launcher's output into one log per rank, and finding the rank that failed.

All ranks of an MPI job write through mpirun, which tags every line with its sender:
`[1,3]<stderr>:text` (Open MPI's `--tag-output`; horovodrun's Gloo mode writes `[3]<stderr>:`).
`MpiOutput` turns that into what other jobs have: `std_log_process_03.txt` per rank and
`[node/rank]` in the live stream. Untagged lines are mpirun's own and go to `mpi_log.txt`.

When mpirun fails, its own message names the rank that failed first; `failed_rank` reads it,
so the root cause is that rank and its traceback, not "mpirun exited with code 1".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from distrun.agent.line_stream import LineStream
from distrun.plan.common import process_log_name

# A tag may also appear mid-line: mpirun glues a rank's unterminated last line to the next one.
_TAG = re.compile(rb"\[(?:\d+,)?(\d+)\]<std(?:out|err|diag)>:")
_TRACEBACK = b"Traceback (most recent call last):"
LAUNCHER_KEY = "launcher"


def rank_key(rank: int) -> str:
    return f"rank_{rank}"


class MpiOutput:
    """Demultiplexes one launcher's output; fed raw chunks from its pipe."""

    def __init__(self, log_dir: Path, launcher_log_fd: int, stream: LineStream, launcher_key: str, per_node: int) -> None:
        self.log_dir = log_dir
        self._launcher_fd = launcher_log_fd
        self._stream = stream
        self._launcher_key = launcher_key
        self._per_node = max(per_node, 1)  # rank r runs on node r // per_node (`--map-by slot`)
        self._pending = b""
        self._rank_fds: dict[int, int] = {}
        # Ranks in the order their first traceback line arrived: the fallback root cause.
        self.traceback_order: list[int] = []
        self.write_error: OSError | None = None

    # ------------------------------------------------------------ feeding

    def feed(self, data: bytes) -> None:
        data = self._pending + data
        cut = data.rfind(b"\n") + 1
        self._pending = data[cut:]
        if cut:
            self._lines(data[:cut])

    def finish(self) -> None:
        """The pipe closed: pass on a last line without a newline, close the rank logs."""
        if self._pending:
            rest, self._pending = self._pending + b"\n", b""
            self._lines(rest)
        for fd in self._rank_fds.values():
            os.close(fd)
        self._rank_fds.clear()

    def _lines(self, block: bytes) -> None:
        own: list[bytes] = []
        per_rank: dict[int, list[bytes]] = {}
        for line in block.split(b"\n")[:-1]:
            if b"]<std" not in line:  # cheap test first: most launcher lines have no tag
                own.append(line)
                continue
            matches = list(_TAG.finditer(line))
            if not matches:
                own.append(line)
                continue
            if matches[0].start() > 0:
                own.append(line[: matches[0].start()])
            for index, match in enumerate(matches):
                end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
                rank = int(match.group(1))
                text = line[match.end() : end]
                per_rank.setdefault(rank, []).append(text)
                if text.startswith(_TRACEBACK) and rank not in self.traceback_order:
                    self.traceback_order.append(rank)
        if own:
            self._emit(self._launcher_fd, self._launcher_key, own)
        for rank, texts in per_rank.items():
            self._emit(self._rank_fd(rank), rank_key(rank), texts)

    def _emit(self, fd: int, key: str, lines: list[bytes]) -> None:
        data = b"\n".join(lines) + b"\n"
        if fd >= 0 and self.write_error is None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                self.write_error = exc
        self._stream.feed(key, data)

    def _rank_fd(self, rank: int) -> int:
        fd = self._rank_fds.get(rank)
        if fd is None:
            fd = os.open(self.rank_log(rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            self._rank_fds[rank] = fd
            node = self.node_of(rank)
            self._stream.add(rank_key(rank), f"{node}/{rank}", node)
        return fd

    # ------------------------------------------------------------ facts

    def rank_log(self, rank: int) -> Path:
        return self.log_dir / process_log_name(rank)

    def node_of(self, rank: int) -> int:
        return rank // self._per_node


@dataclass(frozen=True)
class RankFailure:
    rank: int
    exit_code: int | None = None
    signal: str | None = None
    how: str = ""  # what mpirun said, e.g. "called MPI_Abort with error code 5"


_EXIT = re.compile(rb"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(-?\d+)")
_SIGNAL = re.compile(rb"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)(?: \(([^)]*)\))?")
_ABORT = re.compile(rb"MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+)")
_BOX_RULE = b"-" * 20


def failed_rank(launcher_log: bytes) -> RankFailure | None:
    """The rank mpirun blames in its own output (the first such report), or None."""
    found: list[tuple[int, RankFailure]] = []
    match = _EXIT.search(launcher_log)
    if match:
        code = int(match.group(2))
        found.append((match.start(), RankFailure(int(match.group(1)), exit_code=code)))
    match = _SIGNAL.search(launcher_log)
    if match:
        name = _signal_name(int(match.group(2)))
        found.append((match.start(), RankFailure(int(match.group(1)), signal=name)))
    match = _ABORT.search(launcher_log)
    if match:
        code = int(match.group(2))
        how = f"called MPI_Abort with error code {code}"
        found.append((match.start(), RankFailure(int(match.group(1)), exit_code=code, how=how)))
    if not found:
        return None
    return min(found, key=lambda item: item[0])[1]


def launcher_message(launcher_log: bytes) -> str:
    """mpirun's last boxed message (between its dashed rules): its own account of an error."""
    end = launcher_log.rfind(_BOX_RULE)
    start = launcher_log.rfind(_BOX_RULE, 0, end)
    if start < 0:
        return launcher_log[-2000:].decode("utf-8", "replace").strip()
    body = launcher_log[launcher_log.find(b"\n", start) + 1 : end]
    return body.decode("utf-8", "replace").strip()


def _signal_name(number: int) -> str:
    from distrun.agent.outcome import signal_name

    return signal_name(number)
