"""The Slurm backend (a `distrun.backends.engine.EngineBackend`): one sbatch script per job; Slurm places it.

`render` builds the batch script (`script.render_batch_script`, pure) and the plan every node
will build, with placeholders where only the nodes know the value; `distrun plan` prints both.
`schedule` writes that very script into the job folder and submits it with `sbatch --parsable`;
`observe` reads the job's state back from `scontrol` (no accounting needed) and the nodes'
outcomes from the job folder; `cancel` notes the time and runs scancel.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from distrun.agent.containers import ContainerRun
from distrun.agent.node_facts import NodeOutcome
from distrun.backends.base import Observation, RenderedJob
from distrun.backends.container_choice import choose_container
from distrun.backends.engine import EngineBackend
from distrun.backends.slurm import mpi as slurm_mpi
from distrun.backends.slurm.attempts import read_attempts, restart_aware_status
from distrun.backends.slurm.client import SlurmClient, SlurmJobInfo, SlurmSubmitError
from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.node_agent import outcome_channel
from distrun.backends.slurm.script import render_batch_script
from distrun.backends.slurm.spark_cluster import for_spark
from distrun.backends.slurm.state import distrun_status, job_state, read_canceled_at
from distrun.backends.slurm.target import SlurmSettings, pinned_master_port, slurm_time_limit
from distrun.backends.submission_failure import recorded_as_not_submitted
from distrun.core.file_modes import write_file_beneath
from distrun.core.job_status import JobState, JobStatus
from distrun.core.json_encoding import compact_json
from distrun.core.safe_files import read_text
from distrun.metrics.tracking import lease_server
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.prepare.compute import ComputeTarget
from distrun.prepare.job_notes import unused_keys_note
from distrun.prepare.submission import PreparedJob
from distrun.restarts.policy import RestartPolicy
from distrun.spec.models import JobLimits, JobSpec
from distrun.store.index import JobIndex, JobRecord
from distrun.store.layout import JobFolder, Layout

PLACEHOLDER_HOST = "<slurm node {}>"


# ---------------------------------------------------------------- one target


@dataclass(frozen=True)
class SlurmView:
    """Slurm's view of a job and the nodes' outcomes, merged into distrun's state."""

    info: SlurmJobInfo
    outcomes: list[NodeOutcome]
    state: JobState


class SlurmCluster:
    """The Slurm commands for one compute target: preflight, submit, observe, cancel."""

    def __init__(self, target: SlurmSettings, env: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.client = SlurmClient(target.client_env(env))

    @property
    def python(self) -> str:
        return self.target.python or sys.executable

    def script(self, job: JobSpec, *, job_name: str, job_dir: str) -> str:
        return render_batch_script(job, self.target, job_name=job_name, job_dir=job_dir, python=self.python)

    def preflight(self, job: JobSpec) -> None:
        """Raise before anything is recorded when Slurm cannot take the job: tools, controller, partition, size."""
        self.client.check_installed()
        # One round trip to slurmctld: the partition's answer shows the controller is up too.
        partition = self.client.partition(self.target.partition)
        total = partition.get("TotalNodes", "")
        if total.isdigit() and job.node_count > int(total):
            name = partition.get("PartitionName", "?")
            raise SlurmSubmitError(
                f"the job asks for {job.node_count} nodes (resources.instance_count) but Slurm partition "
                f"{name!r} has {total}",
                "lower resources.instance_count, or use a partition with more nodes; nothing was submitted",
            )

    def submit(self, script: str, job_dir: Path) -> str:
        """Write `script` as slurm/batch.sh into the job folder and submit it; returns Slurm's job id."""
        paths = SlurmPaths(job_dir)
        write_file_beneath(job_dir, paths.script, script.encode("utf-8"))  # never through a planted link
        job_id = self.client.submit(paths.script)
        write_file_beneath(job_dir, paths.job_id, f"{job_id}\n".encode())
        return job_id

    def observe(self, job_dir: Path, job_id: str, node_count: int, now: float) -> SlurmView:
        """Slurm's view of the job and the nodes' outcomes, merged into distrun's status."""
        paths = SlurmPaths(job_dir)
        info = self.client.show_job(job_id)
        outcomes = list(outcome_channel(job_dir, node_count).outcomes().values())
        state = job_state(info, outcomes, node_count, canceled_at=read_canceled_at(paths), now=now)
        return SlurmView(info, outcomes, state)

    def cancel(self, job_dir: Path, job_id: str, now: float) -> None:
        paths = SlurmPaths(job_dir)
        if not paths.cancel.exists():
            write_file_beneath(job_dir, paths.cancel, f"{now}\n".encode())
        self.client.cancel(job_id)


# ---------------------------------------------------------------- what `distrun plan` shows


@dataclass(frozen=True)
class SlurmBatchJob:
    """Slurm's request: the batch script, exactly as `schedule` writes and submits it."""

    script: str
    script_path: Path
    container: ContainerRun | None = None  # each process runs in a container of the job's image

    def display(self) -> dict[str, Any]:
        shown = {"script_name": f"{self.script_path} (submitted with sbatch --parsable)", "script": self.script}
        if self.container is not None:
            run = self.container
            shown["runs_in"] = f"{run.describe()} per process ({run.engine} on each node)"
        return shown


def preview_plan(job: JobSpec, job_dir: Path, bindings: Bindings, job_name: str) -> LaunchPlan:
    """The plan with placeholders where only the nodes know the value (hosts, MASTER_PORT)."""
    hosts = tuple(PLACEHOLDER_HOST.format(i) for i in range(job.node_count))
    placement = Placement(
        hosts=hosts,
        master_port=pinned_master_port(job) or 0,
        # Placeholders 1, 2, ...: each task's real port is chosen on the first node when the job starts.
        task_ports=tuple(range(1, task_port_count(job) + 1)),
        job_dir=str(job_dir),
        run_id=job_name,
    )
    # The node agents do the same with Slurm's node names (MPI jobs' hostfile), and a Spark job's cluster.
    return for_spark(slurm_mpi.for_slurm(build_plan(job, placement, bindings), hosts))


def _notes(job: JobSpec, target: SlurmSettings, home: Path) -> list[str]:
    notes = [
        "Slurm places the job: each node's agent learns its node rank from SLURM_NODEID; MASTER_ADDR is the "
        "first node of the allocation (scontrol show hostnames) and MASTER_PORT (and any task port) a port "
        "free there, all resolved when the job starts: hosts and ports below are placeholders",
        f"the job folder is under DISTRUN_HOME ({home}), which every node must see at the same path",
    ]
    shared = shared_filesystem_note(home)
    if shared:
        notes.append(shared)
    unused = unused_keys_note(job, "Slurm")
    if unused:
        notes.append(unused)
    if RestartPolicy.of(job.limits).on:
        notes.append(
            "restarts: the batch script runs the attempts (srun again after a failure, scontrol requeue after a "
            "preemption); DISTRUN_RESTART_COUNT below is attempt 0's (docs/restarts.md)"
        )
    if job.limits.timeout is not None:
        notes.append(
            f"limits.timeout {job.limits.timeout:g} s is enforced by the node agents; Slurm's --time "
            f"({slurm_time_limit(job, target)} min) is only a backstop"
        )
    return notes


def shared_filesystem_note(path: Path) -> str | None:
    """A warning when DISTRUN_HOME is on a filesystem that is surely local to this machine."""
    fs_type = filesystem_type(path)
    if fs_type in ("tmpfs", "ramfs", "overlay"):
        return (
            f"DISTRUN_HOME is on {fs_type}, which other machines cannot see: fine for a cluster on this one "
            "machine, wrong for a real one (set DISTRUN_HOME to a shared filesystem)"
        )
    return None


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding `path`: the longest mount point above it in /proc/mounts."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    # Symlinks resolved in the part that exists; DISTRUN_HOME itself may not exist yet.
    existing, rest = path.absolute(), []
    while not existing.exists() and existing != existing.parent:
        existing, rest = existing.parent, [existing.name, *rest]
    probe = existing.resolve().joinpath(*rest)
    best, kind = "", None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = parts[1].replace("\\040", " ")
        inside = probe == Path(mount) or Path(mount) in probe.parents
        if inside and len(mount) >= len(best):
            best, kind = mount, parts[2]
    return kind


def _limits(job_dir: Path) -> dict[str, Any]:
    """What `observe` needs of the job: its node count and its limits (restarts), from job.json."""
    data = json.loads(read_text(JobFolder(job_dir).job_json, root=job_dir))
    return {"instance_count": data.get("resources", {}).get("instance_count", 1), "limits": data.get("limits") or {}}


# ---------------------------------------------------------------- the contract


class SlurmBackend(EngineBackend):
    """Jobs as sbatch scripts; one node agent per node under srun; state from scontrol and the nodes' outcomes."""

    kind: ClassVar[str] = "slurm"
    engine: ClassVar[str] = "Slurm"
    cancel_command: ClassVar[str] = "scancel"
    cancel_wait_s: ClassVar[float] = 60.0
    restarts: ClassVar[bool] = True
    settings_model: ClassVar[type[SlurmSettings]] = SlurmSettings

    def cluster(self, target: ComputeTarget) -> SlurmCluster:
        return SlurmCluster(self.target_settings(target))

    def preflight(self, target: ComputeTarget, spec: JobSpec) -> None:
        self.cluster(target).preflight(spec)

    def render(self, job: PreparedJob, layout: Layout) -> RenderedJob:
        settings: SlurmSettings = self.target_settings(job.target)
        script = SlurmCluster(settings).script(job.spec, job_name=job.name, job_dir=str(job.folder.root))
        plan = preview_plan(job.spec, job.folder.root, job.bindings, job.name)
        container = choose_container(
            job.spec,
            layout.config_path,
            job.folder.root,
            job.bindings,
            any(node.gpus for node in plan.nodes),
            layout.home / "containers",
            compute="each Slurm node",
        )
        notes = _notes(job.spec, settings, layout.home)
        if container.note:
            notes.append(container.note)
        return RenderedJob(
            job=job,
            plan=plan,
            request=SlurmBatchJob(script, SlurmPaths(job.folder.root).script, container.run),
            kind=self.kind,
            notes=tuple(notes),
            warnings=(container.note,) if container.note else (),  # said when the job is submitted
        )

    def schedule(self, rendered: RenderedJob, layout: Layout) -> JobRecord:
        """Submit with sbatch and return the record (Queued); Slurm runs the job from here on."""
        job = rendered.job
        request = rendered.request
        assert isinstance(request, SlurmBatchJob)
        index = JobIndex(layout.db_path)
        with recorded_as_not_submitted(index, job.name, "the job's Slurm files"):
            cluster = self.cluster(job.target)
            # The plan as far as it is known here; node 0 replaces it with the real hosts and ports.
            root = job.folder.root
            write_file_beneath(root, job.folder.plan_json, compact_json(rendered.plan.to_dict()))
            if request.container is not None:
                write_file_beneath(root, SlurmPaths(root).container, compact_json(request.container.to_dict()))
            # No second preflight: the orchestrator ran it just before the record was made, and a
            # controller gone since then fails sbatch, which this guard records the same way.
            job_id = cluster.submit(request.script, job.folder.root)
        index.update(job.name, status=JobStatus.QUEUED, backend_id=job_id)
        # This process, which holds the use of the MLflow server the ranks were given, may exit
        # now (`job create`): the job keeps the server until its node agent holds a use.
        lease_server(job.folder, layout.home)
        return index.get(job.name)

    def observe_submitted(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> Observation | None:
        assert record.backend_id
        cluster = self.cluster(target)
        job_dir = Path(record.folder)
        limits = _limits(job_dir)
        seen = cluster.observe(job_dir, record.backend_id, int(limits["instance_count"]), time.time())
        state = seen.state
        status, reason, root = state.status, state.reason, state.root_cause
        attempts = None
        if RestartPolicy.of(JobLimits.model_validate(limits["limits"])).on:
            attempts = read_attempts(SlurmPaths(job_dir))
            slurm_status = distrun_status(seen.info.state)
            status, reason, root = restart_aware_status(slurm_status, (status, reason, root), attempts)
        return Observation(
            status=status,
            reason=reason,
            root_cause=root,
            outcomes=tuple(seen.outcomes),
            started_at=seen.info.start_time,
            attempts=attempts or None,
        )

    def cancel_submitted(self, record: JobRecord, layout: Layout, target: ComputeTarget) -> None:
        """scancel (after noting the time in slurm/cancel, so a failure before it still wins)."""
        assert record.backend_id
        cluster = self.cluster(target)
        cluster.cancel(Path(record.folder), record.backend_id, time.time())

    def fetch_logs(self, record: JobRecord, layout: Layout) -> None:
        """Nothing to fetch: every node writes its ranks' logs into the shared job folder."""
        with contextlib.suppress(OSError):
            os.listdir(JobFolder(Path(record.folder)).user_logs)  # revalidates NFS's cached view of the folder


BACKEND = SlurmBackend()
