"""What a run of child jobs needs, whoever its children are (a pipeline's steps, a sweep's trials).

The parent (a pipeline, a sweep) has a record of its own with no processes, its children under
`steps`, and this process as its supervisor (`record_parent`); each child is a distrun job of its
own submitted through the orchestrator. A child whose supervisor is a process of this machine
is waited on through a pidfd (`ChildExits`): the parent wakes when one ends, not at the next
tick of a poll. Local children's supervisors are forked from one launcher server
(`launchers_for`). `distrun run -d` of a parent records it and starts its supervisor in the
background (`start_supervisor`), which reads what to run from the parent's folder.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind
from distrun.core.job_status import JobStatus

if TYPE_CHECKING:
    from distrun.store.index import JobIndex, JobRecord
    from distrun.store.layout import Layout

POLL_SECONDS = 0.05  # how often the records of children whose supervisor cannot be waited on are read
IDLE_WAIT_SECONDS = 0.5  # the longest wait while every running child's supervisor can be waited on
RUN_FILE = "run_request.json"  # what `distrun run -d` asks of the background supervisor
# How often the engine running a child is asked about it, as `distrun run` asks about a job
# (`distrun.runner.attach.POLL_S`): each look is a request to the engine (on Slurm, `scontrol
# show job`, an RPC to slurmctld), which a scheduler's users must not send many times a second.
ENGINE_LOOK_SECONDS = 0.5


def record_parent(
    index: JobIndex,
    layout: Layout,
    name: str,
    status: JobStatus,
    spec: Any,
    *,
    kind: JobKind,
    compute: str,
    steps: dict[str, Any],
    sweep: dict[str, Any] | None = None,
) -> None:
    """Record the parent (no processes; this process its supervisor) of this kind and make its
    folder. `spec`: the parent's model (its `display_name`, `experiment_name` and `tags` are the record's)."""
    import socket

    from distrun.core.file_modes import DIR_MODE, make_dirs
    from distrun.store.index import JobRecord, process_start_time

    folder = layout.job(name)
    if folder.root.exists():
        raise DistrunError(f"a job folder for {name!r} already exists at {folder.root}", "choose another name")
    make_dirs(folder.root.parent)
    pid = os.getpid()
    index.insert(
        JobRecord(
            name=name,
            status=status,
            compute=compute,
            folder=str(folder.root),
            created_at=time.time(),
            started_at=time.time(),
            display_name=spec.display_name or name,
            experiment_name=spec.experiment_name,
            distribution=compute,
            tags={str(k): str(v) for k, v in spec.tags.items()},
            launcher_pid=pid,
            launcher_host=socket.gethostname(),
            launcher_started=process_start_time(pid),
            steps=steps,
            sweep=sweep,
            kind=kind,
        )
    )
    folder.root.mkdir(mode=DIR_MODE)  # not exist_ok: a parent and a job never share a folder


def taken_over(index: JobIndex, name: str, recorded: bool, record: Callable[[], None]) -> bool:
    """The parent's record, made now (`record()`), or, `recorded` by `distrun run -d`, marked
    Running by this background supervisor; False when it was canceled before it started."""
    if not recorded:
        record()
        return True
    return index.update(name, status=JobStatus.RUNNING, started_at=time.time())


def launchers_for(machine_types: Iterable[str], home: Any) -> AbstractContextManager[None]:
    """Local children's supervisors forked from one launcher server (`distrun.backends.launcher_server`):
    a new interpreter's imports for each child were most of its time."""
    from distrun.backends.launcher_server import launchers_served
    from distrun.backends.registry import backend_for
    from distrun.backends.supervised import SupervisedBackend

    types = sorted(set(machine_types))
    backend = backend_for(types[0]) if len(types) == 1 else None
    if not isinstance(backend, SupervisedBackend):
        return nullcontext()
    return launchers_served(backend.launcher_module, home)


def due_looks(running: Iterable[str], last_look: Mapping[str, float], now: float) -> list[str]:
    """The running children whose job's record to read now.

    `last_look`: when the engine was last asked about each child an engine runs; such a child is
    due once ENGINE_LOOK_SECONDS passed. Any other child's record is the job index's, read each time.
    """
    return [c for c in running if c not in last_look or now - last_look[c] >= ENGINE_LOOK_SECONDS]


class ChildExits:
    """The running children's supervisors on this machine, as pidfds: readable once one exited."""

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}

    def watch(self, key: str, record: JobRecord) -> None:
        """Keep a pidfd of the child's supervisor, when it is a process of this machine, opened while
        the record's start time still matches it (its pid not reused); otherwise its record is polled."""
        import socket

        from distrun.store.index import process_start_time

        pid = record.launcher_pid
        if pid is None or pid == os.getpid() or record.backend_id or record.launcher_host != socket.gethostname():
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone already, or a kernel without pidfds
            return
        if process_start_time(pid) != record.launcher_started:
            os.close(fd)
            return
        self.fds[key] = fd

    def forget(self, key: str) -> None:
        if key in self.fds:
            os.close(self.fds.pop(key))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def wait(self, running: Iterable[str], longest: float = IDLE_WAIT_SECONDS) -> None:
        """Until a running child's supervisor exits (it wrote the job's end first), or `longest`
        passed: at once after a child ends, not at the next tick of a poll."""
        import select

        running = list(running)
        watched = {self.fds[key]: key for key in running if key in self.fds}
        if not watched or len(watched) < len(running):
            time.sleep(min(POLL_SECONDS, longest))  # a child without a supervisor here: its record is read
            return
        ready, _, _ = select.select(list(watched), [], [], longest)
        for fd in ready:  # each fires once: a record not yet ended after it (a killed supervisor) is read
            self.forget(watched[fd])


def start_supervisor(layout: Layout, name: str, module: str, request: dict[str, Any]) -> None:
    """`distrun run -d`: the recorded parent `name` supervised from a new background process
    (`python -m MODULE NAME`), which reads `request` from the parent's folder; what it says goes
    to the parent's `system_logs/launcher.txt`."""
    import json
    import subprocess
    import sys

    from distrun.core.file_modes import make_dirs, open_append
    from distrun.store.index import JobIndex

    folder = layout.job(name)
    make_dirs(folder.system_logs)
    (folder.root / RUN_FILE).write_text(json.dumps(request), encoding="utf-8")
    log = os.fdopen(open_append(folder.launcher_log), "ab")
    env = dict(os.environ, DISTRUN_HOME=str(layout.home))
    proc = subprocess.Popen(
        [sys.executable, "-m", module, name],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    log.close()
    JobIndex(layout.db_path).set_launcher(name, proc.pid)


def detached_request(
    layout: Layout,
    name: str,
    file: str | None,
    overrides: list[str],
    compute: str | None,
    document: dict[str, Any] | None,
    base_dir: Path | None,
    built_file: str,
) -> dict[str, Any]:
    """What a parent's background supervisor is asked to run: its file as given, or the document
    of a parent built in Python, written to the parent's folder as `built_file` (JSON is YAML),
    its relative paths starting at `base_dir`."""
    import json

    if document is not None:
        built = layout.job(name).root / built_file
        built.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        file = str(built)
    return {
        "file": None if file is None else str(Path(file).resolve()),
        "overrides": overrides,
        "compute": compute,
        "base_dir": None if base_dir is None else str(base_dir),
    }


def read_request(layout: Layout, name: str) -> dict[str, Any]:
    """What `start_supervisor` asked of this background supervisor."""
    import json

    from distrun.core.safe_files import read_text

    return json.loads(read_text(layout.job(name).root / RUN_FILE))


def not_started(layout: Layout, name: str, exc: Exception) -> int:
    """A background supervisor that could not load what it runs: the parent ends Failed, said."""
    from distrun.store.index import JobIndex

    why = exc.render() if isinstance(exc, DistrunError) else str(exc)
    JobIndex(layout.db_path).update(name, status=JobStatus.FAILED, reason=f"not started: {why}", ended_at=time.time())
    print(why, flush=True)
    return 1
