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
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.agent.line_stream import LineStream
from distrun.agent.outcome import ProcessOutcome, root_cause_of, signal_name
from distrun.agent.traceback_finder import last_traceback, tail_bytes
from distrun.core.file_modes import open_append
from distrun.plan import deepspeed
from distrun.plan.common import SHELL, process_log_name
from distrun.plan.model import LaunchPlan, ProcessSpec
from distrun.plan.mpi import OUTPUT_DEMUX, user_launcher

# A tag may also appear mid-line: mpirun glues a rank's unterminated last line to the next one.
_TAG = re.compile(rb"\[(?:\d+,)?(\d+)\]<(std(?:out|err|diag))>:")
# torch's excepthook prefixes every line with `[rankN]: ` once a process group exists.
_TRACEBACK = re.compile(rb"^(?:\[rank\d+\]:\s*)?Traceback \(most recent call last\):")
LAUNCHER_KEY = "launcher"


_TAIL_BYTES = 256 * 1024
_INSTALL_HINTS = {
    "horovodrun": "install Horovod in this Python environment (pip install horovod) with Open MPI or Gloo support",
    **dict.fromkeys(deepspeed.LAUNCHER_PROGRAMS, deepspeed.INSTALL_HINT),
}
_OPEN_MPI_HINT = (
    "install Open MPI on every node: apt-get install openmpi-bin libopenmpi-dev (Debian/Ubuntu), "
    "dnf install openmpi-devel (Fedora/RHEL) or conda install -c conda-forge openmpi; or put its bin folder on PATH"
)


def rank_key(rank: int) -> str:
    return f"rank_{rank}"


def demux_for(spec: ProcessSpec, plan: LaunchPlan, log_dir: Path, log_fd: int, stream: LineStream) -> MpiOutput | None:
    """The demultiplexer a process's `output_demux` asks for; None for a plain process."""
    if spec.output_demux is None:
        return None
    if spec.output_demux != OUTPUT_DEMUX:
        raise ValueError(f"unknown output_demux {spec.output_demux!r}")
    per_node = max(plan.world_size // max(len(plan.nodes), 1), 1)
    return MpiOutput(log_dir, log_fd, stream, spec.name, per_node)


def launcher_program(spec: ProcessSpec) -> str | None:
    """The MPI launcher a demuxed process needs on PATH: mpirun, or the command's own launcher."""
    if spec.output_demux is None or not spec.argv:
        return None
    if spec.argv[0] == SHELL and len(spec.argv) == 3:
        return user_launcher(spec.argv[2])
    return spec.argv[0]


def missing_launcher(spec: ProcessSpec, env: Mapping[str, str]) -> str | None:
    """Why the launcher cannot start on this node (not on PATH, with how to fix it), or None."""
    program = launcher_program(spec)
    return None if program is None else missing_program(program, env.get("PATH", os.defpath))


def missing_program(program: str, path: str) -> str | None:
    """Why an MPI launcher `program` cannot start with this PATH (and how to install it), or None."""
    if shutil.which(program, path=path):
        return None
    hint = _INSTALL_HINTS.get(os.path.basename(program), _OPEN_MPI_HINT)
    return f"{program} was not found on PATH, so the MPI job cannot start: {hint}"


class MpiOutput:
    """Demultiplexes one launcher's output; fed raw chunks from its pipe."""

    def __init__(
        self, log_dir: Path, launcher_log_fd: int, stream: LineStream, launcher_key: str, per_node: int
    ) -> None:
        self.log_dir = log_dir
        self._launcher_fd = launcher_log_fd
        self._stream = stream
        self._launcher_key = launcher_key
        self._per_node = max(per_node, 1)  # rank r runs on node r // per_node (`--map-by slot`)
        self._pending = b""
        self._partial: dict[tuple[int, bytes], bytes] = {}  # a rank's line written so far, per stream
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
        per_rank: dict[int, list[bytes]] = {}
        for (rank, _), text in sorted(self._partial.items()):
            self._add_rank_line(per_rank, rank, text)
        self._partial.clear()
        for rank, texts in per_rank.items():
            self._emit(self._rank_fd(rank), rank_key(rank), texts)
        for fd in self._rank_fds.values():
            if fd >= 0:
                os.close(fd)
        self._rank_fds.clear()

    def _lines(self, block: bytes) -> None:
        # mpirun tags each write of a rank, not each line: `[1,2]<stderr>:    [1,2]<stderr>:main()`
        # is one line written in two pieces. A piece runs to the next tag or the end of the line;
        # only the piece that ends a line completes its rank's line (per rank and stream).
        own: list[bytes] = []
        per_rank: dict[int, list[bytes]] = {}
        for line in block.split(b"\n")[:-1]:
            matches = list(_TAG.finditer(line)) if b"]<std" in line else []
            if not matches:
                own.append(line)
                continue
            if matches[0].start() > 0:
                own.append(line[: matches[0].start()])
            last = len(matches) - 1
            for index, match in enumerate(matches):
                end = matches[index + 1].start() if index < last else len(line)
                key = (int(match.group(1)), match.group(2))
                piece = line[match.end() : end]
                if index < last:
                    self._partial[key] = self._partial.get(key, b"") + piece
                    continue
                text = self._partial.pop(key, b"") + piece
                self._add_rank_line(per_rank, key[0], text)
        if own:
            self._emit(self._launcher_fd, self._launcher_key, own)
        for rank, texts in per_rank.items():
            self._emit(self._rank_fd(rank), rank_key(rank), texts)

    def _add_rank_line(self, per_rank: dict[int, list[bytes]], rank: int, text: bytes) -> None:
        per_rank.setdefault(rank, []).append(text)
        if _TRACEBACK.match(text) and rank not in self.traceback_order:
            self.traceback_order.append(rank)

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
            try:
                # Opened while the ranks run: no folder of the job folder is followed if a link.
                fd = open_append(self.rank_log(rank), root=self.log_dir.parent)
            except OSError as exc:
                self.write_error = self.write_error or exc
                fd = -1
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
    lines = launcher_log.decode("utf-8", "replace").splitlines()
    rules = [i for i, line in enumerate(lines) if len(line) >= 20 and set(line) == {"-"}]
    if len(rules) < 2:
        return "\n".join(lines[-20:]).strip()
    return "\n".join(lines[rules[-2] + 1 : rules[-1]]).strip()


def _signal_name(number: int) -> str:
    return signal_name(number)


def _tail(path: str | Path) -> bytes:
    return tail_bytes(str(path), _TAIL_BYTES)


def mpi_root_cause(launcher: ProcessOutcome, output: MpiOutput, hosts: list[str]) -> dict[str, Any]:
    """The root cause of a failed MPI launcher: the rank mpirun blames, with its traceback.

    Without such a report, the rank whose traceback came first; without that either, the
    launcher itself, with mpirun's own error message (e.g. not enough slots) as the text.
    """
    log = _tail(launcher.log)
    failure = failed_rank(log)
    if failure is None and output.traceback_order:
        failure = RankFailure(output.traceback_order[0])
    if failure is None:
        return root_cause_of(launcher, last_traceback(launcher.log) or launcher_message(log))
    node = output.node_of(failure.rank)
    rank = ProcessOutcome(
        name=rank_key(failure.rank),
        role="rank",
        index=failure.rank,
        rank=failure.rank,
        node_rank=node,
        host=hosts[node] if node < len(hosts) else launcher.host,
        log=str(output.rank_log(failure.rank)),
        label=f"{node}/{failure.rank}",
        exit_code=failure.exit_code,
        signal=failure.signal,
        after_ms=launcher.after_ms,
    )
    if failure.exit_code is None and failure.signal is None:
        # Only its traceback points at it: say how the launcher ended instead.
        rank.exit_code, rank.signal = launcher.exit_code, launcher.signal
    cause = root_cause_of(rank, last_traceback(rank.log))
    if failure.how:
        cause["reason"] = f"rank {failure.rank} on node {node} {failure.how}"
    cause["reason"] += f"; {launcher.label} {launcher.describe_exit()}"
    return cause
