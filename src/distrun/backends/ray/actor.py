"""The Ray actor that runs one node of a job: it starts distrun's node agent there and relays it.

One actor per bundle of the job's placement group (bundle i = node rank i). The driver (the
`distrun` process) creates it with `max_concurrency` > 1, so `stop` and `poll` are served
while `start`'s agent runs: a stop is never queued behind a running call. The actor itself
runs no rank: it unpacks the job's files into a fresh folder on its node, starts
`python -m distrun.backends.ray.node_agent` as a child (PDEATHSIG=SIGTERM, set by setpriv: if
Ray kills this actor, or the driver dies and Ray kills the actor with it, the agent stops its
ranks), and hands back, on each `poll`, what is new: per-rank log bytes, stream lines, the agent's own
lines, whether this node's main work is done, and its outcome once it ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Any

from distrun.agent.folder_mirror import FROM_NODES, Changes, MirrorSide
from distrun.backends.ray.node_agent import CHANNEL, REQUEST, job_folder, marker_path, outcome_path
from distrun.core.death_signal import setpriv_prefix
from distrun.metrics.rank_token import write_owner_only

# At most this much of one log per poll: a chatty rank cannot make one reply huge.
POLL_CHUNK = 4 << 20
_PR_SET_PDEATHSIG = 1


def _stop_with_parent() -> None:  # in the agent, between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _check_runnable(program: str) -> None:
    """OSError, in the words Popen would use, when `program` cannot be executed from here."""
    if shutil.which(program) is not None:
        return
    if os.sep in program and os.path.exists(program):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def pack_folders(root: Path, names: list[str]) -> bytes:
    """A tar (gzip) of the folders `names` under `root` that exist; links are stored, never followed."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for name in names:
            if (root / name).is_dir() and not (root / name).is_symlink():
                archive.add(root / name, arcname=name)
    return buffer.getvalue()


def unpack_into(data: bytes, root: Path) -> None:
    """Unpack a tar made by `pack_folders`; the data filter refuses members that would leave `root`."""
    if not data:
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(root, filter="data")


def node_workdir(job_name: str, node_rank: int) -> Path:
    """This node's folder for the job: the same path on every host of the job where it can be.

    An MPI job's ranks on node k get paths from node 0 (mpirun's working directory, the
    command's rendered input and output paths): with the same folder on every host they name
    node k's own copy. A second node of the job on the same machine (or a path someone else
    took first: mkdir never follows or reuses one) gets a folder of its own; the first node's
    folder is then on that machine too.
    """
    shared = Path(tempfile.gettempdir()) / f"distrun-{job_name}"
    try:
        shared.mkdir(mode=0o700)
        return shared
    except OSError:
        return Path(tempfile.mkdtemp(prefix=f"distrun-{job_name}-node{node_rank}-"))


class RayNodeAgent:
    """One node of one job. Methods are called by the driver through Ray."""

    def __init__(self, job_name: str, node_rank: int) -> None:
        self.job_name = job_name
        self.node_rank = node_rank
        self.workdir = node_workdir(job_name, node_rank)
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.stream = bytearray()  # prefixed lines not yet handed back
        self.system = bytearray()  # the agent's own lines
        self.offsets: dict[str, int] = {}
        self.readers: list[threading.Thread] = []
        self.exit_code: int | None = None
        self.start_error: str | None = None
        self.ended = threading.Event()
        # Stack requests and answers, each node's progress, hang/: relayed through the driver.
        self.mirror = MirrorSide(job_folder(self.workdir, job_name), FROM_NODES)

    def where(self) -> dict[str, Any]:
        import ray

        return {
            "address": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "workdir": str(self.workdir),
        }

    def free_ports(self, count: int) -> list[int]:
        from distrun.backends.ports import free_ports

        return free_ports(count)

    def start(self, request: dict[str, Any], files: bytes, python: str | None = None) -> None:
        job = job_folder(self.workdir, self.job_name)
        job.mkdir()
        (self.workdir / CHANNEL).mkdir()
        unpack_into(files, job)
        # The owner's alone: it holds the ranks' MLflow token and the remote-start token.
        import ray

        # The cluster this node is in, for a rank that spreads work over it (an AutoML search).
        request = {**request, "ray_cluster": ray.get_runtime_context().gcs_address}
        write_owner_only(self.workdir / REQUEST, json.dumps(request))
        argv = [python or sys.executable, "-m", "distrun.backends.ray.node_agent", str(self.workdir)]
        started = threading.Event()
        # The agent is started from a thread of our own that lives as long as it does: PDEATHSIG
        # fires when the creating *thread* ends, and a pool thread of Ray's could end first.
        keeper = threading.Thread(target=self._keep, args=(argv, started), daemon=True)
        keeper.start()
        started.wait()
        if self.start_error:
            raise RuntimeError(self.start_error)

    def _keep(self, argv: list[str], started: threading.Event) -> None:
        # setpriv sets the death signal where it can: a preexec hook would fork this whole Ray
        # worker (threads and all) and run Python in the copy (see distrun.core.death_signal).
        prefix = setpriv_prefix("TERM")
        try:
            if prefix:  # an interpreter that cannot run is said as Popen says it, not as setpriv's exit 127
                _check_runnable(argv[0])
            self.proc = subprocess.Popen(
                [*prefix, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.workdir,
                preexec_fn=None if prefix else _stop_with_parent,
            )
        except OSError as exc:
            self.start_error = f"could not start the node agent ({argv[0]}): {exc.strerror or exc}"
            self.ended.set()
            started.set()
            return
        started.set()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        err = threading.Thread(target=self._pump, args=(self.proc.stderr, self.system), daemon=True)
        err.start()
        self._pump(self.proc.stdout, self.stream)
        err.join()
        self.exit_code = self.proc.wait()
        self.ended.set()

    def _pump(self, pipe: Any, into: bytearray) -> None:
        for chunk in iter(lambda: pipe.read1(1 << 16), b""):
            with self.lock:
                into += chunk

    def poll(
        self,
        peers_done: list[int],
        peers_ended: dict[int, dict[str, Any]] | None = None,
        mirrored: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What is new since the last poll.

        `peers_done`: nodes whose main work is done (TF's ps wait for them); `peers_ended`: the
        outcomes of nodes that ended (an MPI job's nodes other than 0 wait for node 0's);
        `mirrored`: what changed in the exchanged files of the driver's job folder
        (`agent.folder_mirror`); the reply's `mirrored` is what changed in this node's.
        """
        self.mirror.apply(Changes.from_dict(mirrored))
        for rank in peers_done:
            marker = marker_path(self.workdir, rank)
            if rank != self.node_rank and not marker.exists():
                marker.write_text("done\n", encoding="utf-8")
        for rank, outcome in (peers_ended or {}).items():
            relayed = outcome_path(self.workdir, int(rank))
            if int(rank) != self.node_rank and not relayed.exists():
                hidden = relayed.with_name(f".{relayed.name}")
                hidden.write_text(json.dumps(outcome), encoding="utf-8")
                hidden.rename(relayed)  # read whole or not at all
        ended = self.ended.is_set()  # read first: after it, the pipes are drained
        with self.lock:
            cut = len(self.stream) if ended else self.stream.rfind(b"\n") + 1
            stream, self.stream[:cut] = bytes(self.stream[:cut]), b""
            system, self.system[:] = bytes(self.system), b""
        logs, more = self._new_log_bytes()
        outcome = None
        if ended and not more:
            outcome = self._outcome()
        return {
            "logs": logs,
            "stream": stream,
            "system": system,
            "main_done": marker_path(self.workdir, self.node_rank).exists(),
            "outcome": outcome,
            "mirrored": self.mirror.changes().to_dict(),
        }

    def _new_log_bytes(self) -> tuple[dict[str, bytes], bool]:
        logs: dict[str, bytes] = {}
        more = False
        folder = job_folder(self.workdir, self.job_name) / "user_logs"
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(folder):
                if not entry.is_file(follow_symlinks=False):
                    continue
                offset = self.offsets.get(entry.name, 0)
                if entry.stat().st_size <= offset:
                    continue
                with open(entry.path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read(POLL_CHUNK)
                    more = more or bool(handle.read(1))
                self.offsets[entry.name] = offset + len(data)
                logs[entry.name] = data
        return logs, more

    def _outcome(self) -> dict[str, Any]:
        try:
            return json.loads(outcome_path(self.workdir, self.node_rank).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            # The agent died before it could report (killed, or could not import distrun).
            return {
                "node_rank": self.node_rank,
                "status": "Failed",
                "reason": self.start_error
                or f"the node agent on node {self.node_rank} ({socket.gethostname()}) ended with code "
                f"{self.exit_code} without a report",
                "agent_lost": True,
                "processes": [],
            }

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Ask the agent to stop its ranks (SIGTERM: grace, then SIGKILL); served while `start` runs."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signum)

    def collect(self) -> bytes:
        """The job's outputs written on this node: named outputs and the code folder's outputs/ and logs/."""
        from distrun.agent.output_archive import pack_outputs

        return pack_outputs(job_folder(self.workdir, self.job_name))

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
