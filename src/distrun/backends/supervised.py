"""The supervised family of backends (local, Ray): a distrun process on this machine runs the job.

That supervisor (`distrun run` itself, or a launcher started in the background by `schedule`)
writes the job's record as the job goes, and a watchdog records it lost if the supervisor dies:
there is no engine to observe and no log to fetch (the supervisor writes every rank's log into
the job folder). Stopping the job is signalling its supervisor, which stops every rank.
`distrun run` supervises in its own process (`supervise`); what it prints around the stream is
`distrun.runner.attach`'s.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, ClassVar

from distrun.agent.stop_signals import stop_signals_blocked
from distrun.backends.base import Backend
from distrun.backends.launcher_server import launch_served
from distrun.core.errors import DistrunError
from distrun.core.file_modes import open_append, write_file_beneath
from distrun.core.job_status import JobStatus
from distrun.metrics.tracking_server import held_uses
from distrun.store.index import JobIndex, JobRecord, process_start_time

if TYPE_CHECKING:
    from distrun.backends.values import Observation, RenderedJob
    from distrun.plan.model import LaunchPlan
    from distrun.prepare.compute import ComputeTarget
    from distrun.prepare.submission import PreparedJob
    from distrun.store.layout import JobFolder, Layout

NOT_RUNNING_YET = "canceled before it was running"
CANCEL_MARKER = "cancel_requested"  # in the job folder (see cancel_marker)


def cancel_marker(folder: JobFolder) -> Path:
    """Written by `job cancel` before it signals the supervisor: that SIGTERM is a cancel, not a preemption."""
    return folder.root / CANCEL_MARKER


def mark_cancel(folder: JobFolder) -> None:
    try:
        write_file_beneath(folder.root, cancel_marker(folder), b"")
    except OSError:
        pass  # the SIGTERM that follows still stops the job (as a preemption, if it has restarts)


def start_detached(prepared: PreparedJob, layout: Layout, argv: list[str], module: str | None = None) -> int:
    """Supervise the job from a new background process running `argv`; returns its pid.

    Where this process serves launchers of `module` (a pipeline's steps: `launcher_server`), the
    supervisor is forked from that server instead, without a new interpreter's imports.
    """
    pid = None if module is None else launch_served(module, layout.home, prepared.name, prepared.folder.launcher_log)
    if pid is not None:
        JobIndex(layout.db_path).set_launcher(prepared.name, pid)
        return pid
    log = os.fdopen(open_append(prepared.folder.launcher_log, root=prepared.folder.root), "ab")
    env = dict(os.environ, DISTRUN_HOME=str(layout.home))
    # A SIGTERM right after `job create` reaches the launcher while Python starts: held until
    # it can act on it, instead of killing it before it records anything.
    with stop_signals_blocked():
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            pass_fds=held_uses(),  # the MLflow server its ranks were given, held across this process's exit
        )
    log.close()
    JobIndex(layout.db_path).set_launcher(prepared.name, proc.pid)
    return proc.pid


class SupervisedBackend(Backend):
    """A backend whose jobs a distrun process on this machine supervises; that process writes the record."""

    launcher_module: ClassVar[str]
    """`python -m <launcher_module> NAME` supervises job NAME in the background (`distrun job create`)."""

    def launcher_argv(self, name: str) -> list[str]:
        """The background process that supervises job `name`."""
        return [sys.executable, "-m", self.launcher_module, name]

    def schedule(self, rendered: RenderedJob, layout: Layout) -> JobRecord:
        """Start the job's supervisor in the background; returns at once."""
        start_detached(rendered.job, layout, self.launcher_argv(rendered.job.name), self.launcher_module)
        return JobIndex(layout.db_path).get(rendered.job.name)

    @abstractmethod
    def supervise(
        self,
        rendered: RenderedJob,
        layout: Layout,
        stream: BinaryIO,
        color: bool,
        on_plan: Callable[[LaunchPlan], None],
    ) -> JobRecord:
        """`distrun run`: supervise the job in this process until it ends; returns its final record.

        Every rank's lines go to `stream` as they come (with their prefixes; `color` for ANSI
        ones), and so do the supervisor's own lines about the job's course ("distrun: ...").
        `on_plan` is called once the job's plan is known, before any rank starts. A stop signal
        stops the job (Canceled) as `cancel` would. Prints nothing else: the header and the
        summary are the runner's.
        """

    @abstractmethod
    def attached_notes(self, rendered: RenderedJob, plan: LaunchPlan) -> list[str]:
        """What `distrun run` says before the stream's header, once the plan is known (one line each)."""

    def finished(self, rendered: RenderedJob, record: JobRecord) -> None:
        """After `distrun run` printed the summary of a job supervised here: what is left to do (nothing)."""

    def observe(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> Observation | None:
        """The supervisor writes the record itself (and the store notices a lost one): nothing to add."""
        return None

    def cancel(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> None:
        """Ask the supervising process to stop the job (SIGTERM); a job not yet running is canceled in the record."""
        index = JobIndex(layout.db_path)
        name = record.name
        if index.cancel_if_not_running(name, NOT_RUNNING_YET):
            return  # its supervisor sees the record and starts nothing more
        record = index.get(name)  # it moved on meanwhile: Running now, or ended
        if record.terminal:
            return
        if record.launcher_pid is None or record.launcher_host != socket.gethostname():
            index.update(name, status=JobStatus.CANCELED, reason=NOT_RUNNING_YET, ended_at=time.time())
            return
        if process_start_time(record.launcher_pid) != record.launcher_started:
            return  # the reader's check records it as launcher lost
        mark_cancel(layout.job(name))  # this SIGTERM is a cancel, not a preemption
        try:
            os.kill(record.launcher_pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        except PermissionError:
            raise DistrunError(
                f"not allowed to signal the process supervising {name} (pid {record.launcher_pid})"
            ) from None

    def fetch_logs(self, record: JobRecord, layout: Layout) -> None:
        """Nothing to fetch: the supervisor writes every rank's log into the job folder as it is written."""
