"""The Slurm backend: a job becomes one sbatch script; Slurm places it, distrun's node agent runs it.

distrun does not replace Slurm. It renders a batch script (`render_batch_script`, a pure
function of the job and the compute target, printed by `distrun plan`), submits it with
`sbatch --parsable`, and reads the job's state back from `scontrol`/`squeue` (no accounting
needed). Inside the allocation, `srun --ntasks-per-node=1 --kill-on-bad-exit=1` starts one
node agent per node (`python -m distrun.agent.node`), the same agent local compute uses;
it resolves the node's facts from Slurm, runs that node's ranks, and writes its outcome to
the job folder. That folder lives under DISTRUN_HOME, which every node must see.

Modules: `target` (the compute target's settings), `script` (the batch script, pure),
`client` (the Slurm commands), `state` (Slurm's state and the nodes' outcomes -> distrun's
status, pure), `layout` (the job's Slurm files), `mpi` (an MPI job's plan inside the
allocation: node 0's mpirun starts the other nodes' ranks through Slurm, pure). This module is the backend interface the
CLI calls: `validate_settings`, `preflight`, `dry_run`, `submit_detached`, `run_streaming`,
`refresh`, `cancel`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from distrun.backends.slurm import mpi as slurm_mpi
from distrun.backends.slurm.client import SlurmClient, SlurmJobInfo, SlurmSubmitError
from distrun.backends.slurm.layout import SlurmPaths
from distrun.backends.slurm.script import render_batch_script
from distrun.backends.slurm.state import JobState, job_state, read_canceled_at, read_outcomes
from distrun.backends.slurm.target import SlurmTarget, pinned_master_port, slurm_time_limit
from distrun.backends.targets import ComputeTarget, resolve_target
from distrun.errors import DistrunError
from distrun.follow import follow_logs
from distrun.metrics.tracking import finish_run
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import Bindings, LaunchPlan, Placement
from distrun.report import execution_summary, stream_header
from distrun.spec.loader import LoadedJob
from distrun.spec.models import JobSpec
from distrun.store.index import CANCELED, FAILED, QUEUED, JobIndex, JobRecord
from distrun.store.layout import JobFolder, Layout
from distrun.submission import PreparedJob, bind

POLL_S = 0.5
CANCEL_WAIT_S = 60.0


# ---------------------------------------------------------------- one target


def default_python() -> str:
    import sys

    return sys.executable


@dataclass(frozen=True)
class Observation:
    info: SlurmJobInfo
    outcomes: list[dict[str, Any]]
    state: JobState


class SlurmBackend:
    """Submit, observe and cancel distrun jobs on one Slurm compute target."""

    def __init__(self, target: SlurmTarget, env: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.client = SlurmClient(target.client_env(env))

    @property
    def python(self) -> str:
        return self.target.python or default_python()

    def render(self, job: JobSpec, *, job_name: str, job_dir: str) -> str:
        return render_batch_script(job, self.target, job_name=job_name, job_dir=job_dir, python=self.python)

    def preflight(self, job: JobSpec) -> None:
        """Raise before anything is recorded when Slurm cannot take the job: tools, controller, partition, size."""
        self.client.check_controller()
        partition = self.client.partition(self.target.partition)
        total = partition.get("TotalNodes", "")
        if total.isdigit() and job.node_count > int(total):
            name = partition.get("PartitionName", "?")
            raise SlurmSubmitError(
                f"the job asks for {job.node_count} nodes (resources.instance_count) but Slurm partition "
                f"{name!r} has {total}",
                "lower resources.instance_count, or use a partition with more nodes; nothing was submitted",
            )

    def submit(self, job: JobSpec, *, job_name: str, job_dir: Path) -> str:
        """Write slurm/batch.sh into the job folder and submit it; returns Slurm's job id."""
        paths = SlurmPaths(job_dir)
        paths.folder.mkdir(parents=True, exist_ok=True)
        paths.script.write_text(self.render(job, job_name=job_name, job_dir=str(job_dir)), encoding="utf-8")
        job_id = self.client.submit(paths.script)
        paths.job_id.write_text(job_id + "\n", encoding="utf-8")
        return job_id

    def observe(self, job_dir: Path, job_id: str, node_count: int, now: float) -> Observation:
        """Slurm's view of the job and the nodes' outcomes, merged into distrun's status."""
        paths = SlurmPaths(job_dir)
        info = self.client.show_job(job_id)
        with contextlib.suppress(OSError):
            os.listdir(paths.folder)  # revalidates NFS's cached view of the folder
        outcomes = read_outcomes(paths, node_count)
        state = job_state(info, outcomes, node_count, canceled_at=read_canceled_at(paths), now=now)
        return Observation(info, outcomes, state)

    def cancel(self, job_dir: Path, job_id: str, now: float) -> None:
        paths = SlurmPaths(job_dir)
        if not paths.cancel.exists():
            paths.cancel.write_text(f"{now}\n", encoding="utf-8")
        self.client.cancel(job_id)


# ---------------------------------------------------------------- the backend interface (distrun.backends)


def slurm_target(target: ComputeTarget) -> SlurmTarget:
    return SlurmTarget.from_settings(target.name, target.settings)


def validate_settings(name: str, settings: Mapping[str, Any]) -> None:
    """`distrun compute create --type slurm`: refuse settings a job could not use."""
    SlurmTarget.from_settings(name, settings)


def preflight(target: ComputeTarget, job: JobSpec) -> None:
    """Called before the job is recorded: a Slurm that cannot take it leaves nothing behind."""
    SlurmBackend(slurm_target(target)).preflight(job)


PLACEHOLDER_HOST = "<slurm node {}>"


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
    # The node agents do the same with Slurm's node names (MPI jobs' hostfile).
    return slurm_mpi.for_slurm(build_plan(job, placement, bindings), hosts)


def _notes(job: JobSpec, target: SlurmTarget, home: Path) -> list[str]:
    notes = [
        "Slurm places the job: each node's agent learns its node rank from SLURM_NODEID; MASTER_ADDR is the "
        "first node of the allocation (scontrol show hostnames) and MASTER_PORT (and any task port) a port "
        "free there, all resolved when the job starts: hosts and ports below are placeholders",
        f"the job folder is under DISTRUN_HOME ({home}), which every node must see at the same path",
    ]
    shared = shared_filesystem_note(home)
    if shared:
        notes.append(shared)
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


def dry_run(loaded: LoadedJob, layout: Layout, target: ComputeTarget) -> dict[str, Any]:
    """`distrun plan --compute <slurm target>`: the exact sbatch script, and the plan every node will build."""
    spec = loaded.spec
    name = spec.name or "<generated-name>"
    folder = layout.job(name)
    settings = slurm_target(target)
    backend = SlurmBackend(settings)
    bindings = bind(loaded, spec, folder, materialize=False)
    return {
        "compute": target.name,
        "type": "slurm",
        "notes": _notes(spec, settings, layout.home),
        "script_name": f"{SlurmPaths(folder.root).script} (submitted with sbatch --parsable)",
        "script": backend.render(spec, job_name=name, job_dir=str(folder.root)),
        "plan": preview_plan(spec, folder.root, bindings, name).to_dict(),
    }


def submit_detached(prepared: PreparedJob, layout: Layout) -> JobRecord:
    """Submit with sbatch and return the record (Queued); Slurm runs the job from here on."""
    index = JobIndex(layout.db_path)
    folder = prepared.folder
    try:
        backend = SlurmBackend(slurm_target(prepared.target))
        # The plan as far as it is known here; node 0 replaces it with the real hosts and ports.
        preview = preview_plan(prepared.spec, folder.root, prepared.bindings, prepared.name)
        folder.plan_json.write_text(json.dumps(preview.to_dict(), indent=2), encoding="utf-8")
        backend.preflight(prepared.spec)
        job_id = backend.submit(prepared.spec, job_name=prepared.name, job_dir=folder.root)
    except (DistrunError, OSError) as exc:
        message = exc.message if isinstance(exc, DistrunError) else f"could not write the job's Slurm files: {exc}"
        index.update(prepared.name, status=FAILED, reason=f"not submitted: {message}", ended_at=time.time())
        if isinstance(exc, DistrunError):
            raise
        raise DistrunError(f"not submitted: {message}") from None
    index.update(prepared.name, status=QUEUED, backend_id=job_id)
    return index.get(prepared.name)


def refresh(index: JobIndex, record: JobRecord) -> JobRecord:
    """Bring a live record up to date from Slurm and the nodes' outcomes.

    A Slurm that does not answer changes nothing: the record stays as it was.
    """
    if record.terminal or not record.backend_id:
        return record
    home = index.db_path.parent
    try:
        target = resolve_target(record.compute, Layout(home).config_path)
        backend = SlurmBackend(slurm_target(target))
        node_count = _node_count(Path(record.folder))
        now = time.time()
        seen = backend.observe(Path(record.folder), record.backend_id, node_count, now)
    except DistrunError:
        return record
    state = seen.state
    fields: dict[str, Any] = {}
    if state.status != record.status:
        fields["status"] = state.status
    if state.reason != (record.reason or ""):
        fields["reason"] = state.reason
    if record.started_at is None and (seen.info.start_time or state.status in ("Running", "Finalizing")):
        fields["started_at"] = seen.info.start_time or now
    if state.terminal:
        fields["root_cause"] = state.root_cause
        fields["processes"] = merged_processes(seen.outcomes)
        fields["ended_at"] = max((o.get("ended_at") or 0 for o in seen.outcomes), default=0) or now
    if fields:
        changed = index.update(record.name, **fields)
        record = dataclasses.replace(record, **fields)
        if changed and state.terminal:
            finish_run(JobFolder(Path(record.folder)), state.status)  # the reader that saw the end closes the run
    return record


def merged_processes(outcomes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    procs = [dict(p) for o in outcomes for p in o.get("processes", [])]
    return sorted(procs, key=lambda p: (p.get("node_rank", 0), p.get("rank") if p.get("rank") is not None else -1))


def _node_count(job_dir: Path) -> int:
    data = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    return int(data.get("resources", {}).get("instance_count", 1))


def cancel(record: JobRecord, layout: Layout) -> JobRecord:
    """`distrun job cancel`: scancel, then wait (bounded) until the record says Canceled."""
    index = JobIndex(layout.db_path)
    if not record.backend_id:
        index.update(record.name, status=CANCELED, reason="canceled before it was submitted", ended_at=time.time())
        return index.get(record.name)
    backend = SlurmBackend(slurm_target(resolve_target(record.compute, layout.config_path)))
    backend.cancel(Path(record.folder), record.backend_id, time.time())
    give_up = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < give_up:
        record = index.get(record.name)
        if record.terminal:
            return record
        time.sleep(0.25)
    return index.get(record.name)


def run_streaming(prepared: PreparedJob, layout: Layout, out: BinaryIO, color: bool) -> JobRecord:
    """`distrun run --compute <slurm target>`: submit, stream every rank's lines while it runs, summarize.

    Ctrl-C (or SIGTERM) cancels the Slurm job, as it cancels a local one, and the stream goes on
    until Slurm has ended it; a second Ctrl-C stops waiting.
    """
    index = JobIndex(layout.db_path)
    record = submit_detached(prepared, layout)
    plan = preview_plan(prepared.spec, prepared.folder.root, prepared.bindings, prepared.name)
    head, rule = stream_header(record, sum(1 for _ in plan.processes()), prepared.spec.node_count).rsplit("\n", 1)
    out.write(f"{head}\nSlurm job {record.backend_id} on compute {prepared.target.name}\n{rule}\n".encode())
    out.flush()
    watch = _SlurmWatch(index, prepared, out)
    previous = {sig: signal.signal(sig, watch.interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        follow_logs(prepared.folder, out, watch.finished, color=color)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    record = index.get(prepared.name)
    out.write((execution_summary(record) + "\n").encode())
    out.flush()
    finish_run(prepared.folder, record.status)
    return record


class _SlurmWatch:
    """The log follower's "is it over?" for a Slurm job.

    Asks Slurm at most every POLL_S, says when the job waits (Queued and Slurm's reason), and
    turns an interrupt into scancel without leaving the log stream.
    """

    def __init__(self, index: JobIndex, prepared: PreparedJob, out: BinaryIO) -> None:
        self.index = index
        self.prepared = prepared
        self.out = out
        self.last_check = 0.0
        self.done = False
        self.shown = ("", "")
        self.interrupted = 0
        self.signal_name = ""
        self.canceled = False

    def interrupt(self, signum: int, frame: object) -> None:
        self.interrupted += 1
        self.signal_name = signal.Signals(signum).name
        if self.interrupted > 1:
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting (the job is canceled already)

    def finished(self) -> bool:
        if self.interrupted and not self.canceled:
            self.canceled = True
            self._say(f"{self.signal_name} received, canceling the Slurm job (scancel)")
            record = self.index.get(self.prepared.name)
            if record.backend_id and not record.terminal:
                backend = SlurmBackend(slurm_target(self.prepared.target))
                backend.cancel(Path(record.folder), record.backend_id, time.time())
        now = time.monotonic()
        if self.done or now - self.last_check < POLL_S:
            return self.done
        self.last_check = now
        record = self.index.get(self.prepared.name)
        self.done = record.terminal
        seen = (record.status, record.reason or "")
        if not self.done and seen != self.shown and record.status != "Running":
            self._say(f"Slurm job {record.backend_id}: {record.status}" + (f" ({seen[1]})" if seen[1] else ""))
        self.shown = seen
        return self.done

    def _say(self, text: str) -> None:
        self.out.write(f"distrun: {text}\n".encode())
        self.out.flush()
