"""The local backend (a `distrun.backends.supervised.SupervisedBackend`): M simulated nodes on this machine, one gang.

Every simulated node has address 127.0.0.1; MASTER_PORT (and any per-task port) is a free
port found by binding, never a fixed one, so two jobs at once never collide. All simulated
nodes run in one gang (`agent.gang`): nothing to gain from one agent per simulated node, and
one event loop makes the gang immediate. The job's processes are supervised in this process
(`distrun run`: `supervise`) or in a detached launcher process (`distrun job create`
without --stream: `schedule`); a forked watchdog records the job as lost, and kills what is
left, if the supervising process dies. The supervisor writes the record itself, so `observe`
has nothing to add; `cancel` signals the supervisor (both the supervised family's).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

from distrun.agent.containers import ContainerRun, container_name
from distrun.agent.containers import remove as remove_containers
from distrun.agent.outcome import GangResult
from distrun.agent.stop_signals import held_stop_signals
from distrun.backends.base import RenderedJob
from distrun.backends.container_choice import ContainerChoice, choose_container
from distrun.backends.job_launcher import acting_as_launcher
from distrun.backends.local.attempts import LocalAttempts
from distrun.backends.ports import free_ports
from distrun.backends.supervised import SupervisedBackend, mark_cancel
from distrun.core.errors import DistrunError
from distrun.core.file_modes import write_file_beneath
from distrun.core.job_status import JobStatus
from distrun.core.json_encoding import compact_json
from distrun.metrics.tracking import finish_run
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import LaunchPlan, Placement
from distrun.prepare.compute import ComputeTarget
from distrun.prepare.job_notes import local_notes
from distrun.prepare.machine_gpus import probe_gpus
from distrun.prepare.submission import PreparedJob
from distrun.restarts.loop import AttemptLoop
from distrun.restarts.policy import Attempt
from distrun.spec.models import JobSpec
from distrun.store.index import JobIndex, JobRecord
from distrun.store.layout import JobFolder, Layout
from distrun.store.port_leases import PortLeases

LOCAL_ADDRESS = "127.0.0.1"
LAUNCHER_MODULE = "distrun.backends.local.launcher"


def local_placement(prepared: PreparedJob, leases: PortLeases | None = None, restart_count: int = 0) -> Placement:
    spec = prepared.spec
    pinned = spec.environment_variables.get("MASTER_PORT")
    needed = task_port_count(spec) + (0 if pinned else 1)
    ports = free_ports(needed, leases, address=LOCAL_ADDRESS) if needed else []
    master_port = int(pinned) if pinned else ports.pop(0)
    return Placement(
        hosts=(LOCAL_ADDRESS,) * spec.resources.instance_count,
        master_port=master_port,
        job_dir=str(prepared.folder.root),
        run_id=prepared.name,
        task_ports=tuple(ports),
        simulated=True,
        gpus=probe_gpus(),
        restart_count=restart_count,
    )


def plan_local(prepared: PreparedJob, leases: PortLeases | None = None, restart_count: int = 0) -> LaunchPlan:
    return build_plan(prepared.spec, local_placement(prepared, leases, restart_count), prepared.bindings)


def execute(
    prepared: PreparedJob,
    layout: Layout,
    *,
    stream: BinaryIO | None,
    color: bool = False,
    on_plan: Callable[[LaunchPlan], None] | None = None,
) -> JobRecord:
    """Run a prepared job to its end in this process; returns its final record.

    From here until the record is written, Ctrl-C, SIGTERM (`job cancel`) and SIGHUP are held
    (agent.stop_signals): one that arrives before the processes start cancels the job before
    anything runs, one that arrives after they ended leaves the job's own outcome standing.
    A job with restarts (`distrun.restarts.policy`) runs again, as a whole gang, after a failure or a
    preemption, until its policy says no.
    """
    index = JobIndex(layout.db_path)
    leases = PortLeases()  # held until this function returns (or this process ends)
    try:
        with held_stop_signals() as stop_signals:
            plan = _write_plan(prepared, index, leases)
            if on_plan is not None:
                on_plan(plan)
            container = _container(prepared, layout, plan).run
            when_lost = None if container is None else _removing_containers(container, plan, _launch_id(prepared))
            with acting_as_launcher(layout, prepared.name, _launch_id(prepared), when_lost) as started:
                if not started:
                    return index.get(prepared.name)  # it ended (was canceled) before it could start
                result, attempts = _run_attempts(prepared, index, leases, plan, stream, color, stop_signals, container)
                _record_or_say(index, prepared.name, result, attempts)
    finally:
        leases.release()
    return index.get(prepared.name)


def _run_attempts(
    prepared: PreparedJob,
    index: JobIndex,
    leases: PortLeases,
    plan: LaunchPlan,
    stream: BinaryIO | None,
    color: bool,
    stop_signals: list[int],
    container: ContainerRun | None = None,
) -> tuple[GangResult, list[Attempt]]:
    """Attempt 0, then as many restarts as the job's policy allows: the restart loop
    (`distrun.restarts.loop`) over local compute's hooks. The last result and every attempt
    (none for a job without restarts)."""
    hooks = LocalAttempts(
        prepared,
        index,
        plan,
        lambda number: _write_plan(prepared, index, leases, restart_count=number),
        stream=stream,
        color=color,
        stop_signals=stop_signals,
        container=container,
        launch_id=_launch_id(prepared),
        on_started=_noting_running(index, prepared.name, prepared.folder),
    )
    loop = AttemptLoop(hooks.policy, hooks)
    result = loop.run()
    if loop.attempts:  # the record's reason says what ended the job, when a restart could have followed
        result.reason = loop.attempts[-1].reason
    return result, loop.attempts


def _write_plan(prepared: PreparedJob, index: JobIndex, leases: PortLeases, restart_count: int = 0) -> LaunchPlan:
    try:
        plan = plan_local(prepared, leases, restart_count)
        write_file_beneath(prepared.folder.root, prepared.folder.plan_json, compact_json(plan.to_dict()))
    except (DistrunError, OSError) as exc:
        reason = exc.message if isinstance(exc, DistrunError) else f"could not write the job's plan: {exc}"
        index.update(prepared.name, status=JobStatus.FAILED, reason=reason, ended_at=time.time())
        raise DistrunError(reason) from None
    return plan


def _noting_running(index: JobIndex, name: str, folder: JobFolder) -> Callable[[object], None]:
    def started(_: object) -> None:
        try:
            running = index.update(name, status=JobStatus.RUNNING, started_at=time.time())
        except DistrunError:
            # Not being able to note "Running" (index on a full disk) must not stop the job:
            # the outcome is written, or reported, at its end.
            return
        if not running and threading.current_thread() is threading.main_thread():
            # `job cancel` canceled it in the index while it was starting: stop, as if signalled.
            mark_cancel(folder)
            os.kill(os.getpid(), signal.SIGTERM)

    return started


def _record_or_say(index: JobIndex, name: str, result: GangResult, attempts: list[Attempt] | None = None) -> None:
    try:
        record_result(index, name, result, attempts)
    except DistrunError as exc:
        # The outcome is known; only writing it down failed (e.g. the disk is full).
        raise DistrunError(
            f"job {name} ended {result.status} ({result.reason}), but its record could not be written: "
            f"{exc.message}; it will show as launcher lost",
            exc.hint,
        ) from None


def record_result(index: JobIndex, name: str, result: GangResult, attempts: list[Attempt] | None = None) -> None:
    index.update(name, status=JobStatus.FINALIZING)
    more = {"attempts": [a.to_dict() for a in attempts]} if attempts else {}
    index.update(
        name,
        status=result.status,
        reason=result.reason,
        root_cause=result.root_cause,
        processes=[p.to_dict() for p in result.processes],
        ended_at=time.time(),
        **more,
    )


def _container(prepared: PreparedJob, layout: Layout, plan: LaunchPlan) -> ContainerChoice:
    """Whether the job's processes run in a container of its image (`backends.container_choice`)."""
    gpus = any(node.gpus for node in plan.nodes)
    return choose_container(
        prepared.spec, layout.config_path, prepared.folder.root, prepared.bindings, gpus, layout.home / "containers"
    )


def _removing_containers(run: ContainerRun, plan: LaunchPlan, launch_id: str) -> Callable[[], None]:
    """For the watchdog: a SIGKILL of distrun kills the ranks, and the engine keeps their containers."""
    names = [container_name(launch_id, p.name) for node in plan.nodes for p in node.processes]
    return lambda: remove_containers(run, names)


def _launch_id(prepared: PreparedJob) -> str:
    return f"{prepared.name}-{os.getpid()}"


# ---------------------------------------------------------------- the contract


@dataclass(frozen=True)
class LocalLaunch:
    """Local compute's request: the job is supervised from this machine (here, or by this launcher)."""

    launcher: tuple[str, ...]
    container: ContainerRun | None = None

    def display(self) -> dict[str, Any]:
        # The plan says the rest; ports are chosen when the job starts.
        run = self.container
        return {} if run is None else {"runs_in": f"{run.describe()} per process ({run.program})"}


class LocalSettings:
    """Local compute's settings: none (it runs on this machine)."""

    @classmethod
    def from_settings(cls, name: str, settings: Mapping[str, Any]) -> LocalSettings:
        if settings:
            raise DistrunError(
                f"compute target {name!r} (local): local compute takes no settings "
                f"(got {', '.join(map(str, settings))})",
                "leave them out; local compute runs on this machine",
            )
        return cls()


class LocalBackend(SupervisedBackend):
    """Simulated nodes on this machine, all in one gang supervised by a distrun process here."""

    kind: ClassVar[str] = "local"
    engine: ClassVar[str] = "local"
    cancel_wait_s: ClassVar[float] = 15.0
    restarts: ClassVar[bool] = True
    settings_model: ClassVar[type[LocalSettings]] = LocalSettings
    launcher_module: ClassVar[str] = LAUNCHER_MODULE

    def preflight(self, target: ComputeTarget, spec: JobSpec) -> None:
        """A job this machine cannot start (an MPI job without mpirun, GPUs it does not have) leaves nothing behind."""
        from distrun.backends.local.preflight import preflight
        from distrun.plan.gpus import processes_per_node, slice_gpus
        from distrun.plan.plan_job import PlanJob

        preflight(spec)
        hosts = (LOCAL_ADDRESS,) * spec.node_count
        placement = Placement(hosts=hosts, master_port=0, job_dir="", run_id="", simulated=True, gpus=probe_gpus())
        job = PlanJob.of(spec)
        slice_gpus(job, placement, processes_per_node(job, job.node_count))

    def render(self, job: PreparedJob, layout: Layout) -> RenderedJob:
        """The plan with ports free now; the supervisor picks (and leases) the ports again when the job starts."""
        plan = plan_local(job)
        container = _container(job, layout, plan)
        said = local_notes(job.spec, container.note)
        notes = ["local compute: nodes are simulated on this machine (127.0.0.1); ports are chosen when the job starts"]
        return RenderedJob(
            job=job,
            plan=plan,
            request=LocalLaunch(tuple(self.launcher_argv(job.name)), container.run),
            kind=self.kind,
            notes=tuple(notes + said),
            warnings=tuple(said),
        )

    def supervise(
        self,
        rendered: RenderedJob,
        layout: Layout,
        stream: BinaryIO,
        color: bool,
        on_plan: Callable[[LaunchPlan], None],
    ) -> JobRecord:
        """Run the gang in this process (`execute`), every rank's lines to `stream` as they come."""
        return execute(rendered.job, layout, stream=stream, color=color, on_plan=on_plan)

    def attached_notes(self, rendered: RenderedJob, plan: LaunchPlan) -> list[str]:
        layout = Layout(rendered.job.folder.root.parent.parent)
        return local_notes(rendered.job.spec, _container(rendered.job, layout, plan).note) + list(plan.notes)

    def finished(self, rendered: RenderedJob, record: JobRecord) -> None:
        """Close the job's MLflow run (the launcher does it for a job started in the background)."""
        finish_run(rendered.job.folder, record.status)


BACKEND = LocalBackend()
