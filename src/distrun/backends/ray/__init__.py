"""The Ray backend: a job becomes one placement group; distrun's node agent runs each node in an actor.

distrun does not replace Ray's scheduler: it asks Ray for one STRICT_SPREAD placement group
with one bundle per node of the job (`placement`, pure), waits `placement_timeout` seconds for
it, and runs one `RayNodeAgent` actor per bundle (`actor`), which starts the same engine-free
node agent local and Slurm jobs use (`node_agent`). The `distrun` process that submitted the
job drives it (`driver`): it streams every rank's log back into the job folder on its own
machine (no shared filesystem), stops every node when one fails, and writes the record.

Modules: `target` (the compute target's settings), `placement` (the request, and the error
when it cannot be placed), `actor`, `node_agent`, `driver`. This module is the backend
interface the CLI calls: `validate_settings`, `preflight`, `dry_run`, `run_streaming`,
`submit_detached`, `execute`, `cancel`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from distrun.backends.ray.placement import placement_request
from distrun.backends.ray.target import RayTarget
from distrun.backends.targets import ComputeTarget
from distrun.errors import DistrunError
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import LaunchPlan, Placement
from distrun.report import execution_summary, stream_header
from distrun.spec.loader import LoadedJob
from distrun.spec.models import JobSpec
from distrun.store.index import FAILED, JobIndex, JobRecord
from distrun.store.layout import Layout
from distrun.submission import PreparedJob, bind

PLACEHOLDER_HOST = "<ray node {}>"
# mpirun reaches the other nodes over ssh or Slurm; a Ray node offers neither.
UNSUPPORTED = {
    "mpi": "type: mpi is not supported on Ray yet: mpirun on node 0 cannot start ranks on the other Ray nodes"
}


def ray_target(target: ComputeTarget) -> RayTarget:
    return RayTarget.from_settings(target.name, target.settings)


def validate_settings(name: str, settings: Mapping[str, Any]) -> None:
    """`distrun compute create --type ray`: refuse settings a job could not use."""
    RayTarget.from_settings(name, settings)


def preflight(target: ComputeTarget, job: JobSpec) -> None:
    """Before anything is recorded: Ray installed, the head answering, the job's type supported here."""
    from distrun.backends.ray.driver import check_reachable, import_ray

    settings = ray_target(target)
    problem = UNSUPPORTED.get(job.distribution_type or "")
    if problem:
        raise DistrunError(problem, "run it on local compute or Slurm, or use type: pytorch; nothing was submitted")
    placement_request(job, settings, "check")  # the job's per-node resources are valid
    import_ray()
    check_reachable(settings.address)


def preview_plan(job: JobSpec, job_dir: str, bindings: Any, job_name: str) -> LaunchPlan:
    """The plan with placeholders where only the placed nodes know the value (addresses, ports)."""
    pinned = job.environment_variables.get("MASTER_PORT")
    placement = Placement(
        hosts=tuple(PLACEHOLDER_HOST.format(i) for i in range(job.node_count)),
        master_port=int(pinned) if pinned and pinned.isdigit() else 0,
        task_ports=tuple(range(1, task_port_count(job) + 1)),
        job_dir=job_dir,
        run_id=job_name,
    )
    return build_plan(job, placement, bindings)


def dry_run(loaded: LoadedJob, layout: Layout, target: ComputeTarget) -> dict[str, Any]:
    """`distrun plan --compute <ray target>`: the placement request, the actors, and every process."""
    spec = loaded.spec
    name = spec.name or "<generated-name>"
    folder = layout.job(name)
    settings = ray_target(target)
    request = placement_request(spec, settings, name)
    bindings = bind(loaded, spec, folder, materialize=False)
    actors = [
        f"  node {i}: RayNodeAgent actor in bundle {i} (max_concurrency 4) -> python -m distrun.backends.ray.node_agent"
        for i in range(len(request.bundles))
    ]
    script = "\n".join(
        [
            f"ray.init(address={settings.address!r})",
            f"placement_group({[dict(b) for b in request.bundles]}, strategy={request.strategy!r}, "
            f"name={request.name!r})",
            f"wait at most {request.timeout_s:g} s, else remove it and fail with what each node has free",
            *actors,
        ]
    )
    return {
        "compute": target.name,
        "type": "ray",
        "notes": [
            "Ray places the job: node rank i runs in bundle i of the placement group; MASTER_ADDR is node 0's "
            "address in the cluster and MASTER_PORT (and any task port) a port free there, all known once the "
            "job is placed: hosts and ports below are placeholders",
            "the code snapshot and inputs are shipped to every node; logs stream back into the job folder here",
        ],
        "placement": request.to_dict(),
        "script_name": "Ray placement request",
        "script": script,
        "plan": preview_plan(spec, str(folder.root), bindings, name).to_dict(),
    }


def execute(
    prepared: PreparedJob,
    layout: Layout,
    *,
    stream: BinaryIO | None,
    color: bool = False,
    on_plan: Callable[[LaunchPlan], None] | None = None,
) -> JobRecord:
    """Run a prepared job on Ray to its end, supervised from this process; returns its final record."""
    from distrun.agent.stop_signals import held_stop_signals
    from distrun.agent.watchdog import Watchdog
    from distrun.backends.ray.driver import RayRun, record_end

    index = JobIndex(layout.db_path)
    name = prepared.name
    with held_stop_signals() as signals:
        # Forked before Ray starts any thread; records "launcher lost" if this process dies.
        watchdog = Watchdog.start(f"{name}-{os.getpid()}", lambda: JobIndex(layout.db_path).mark_launcher_lost(name))
        try:
            if not index.set_launcher(name, os.getpid()):
                return index.get(name)  # canceled before it could start
            try:
                end = RayRun(prepared, index, ray_target(prepared.target), stream, signals, on_plan).run()
            except DistrunError as exc:
                reason = exc.message + (f"\n{exc.hint}" if exc.hint else "")
                index.update(name, status=FAILED, reason=reason, ended_at=time.time())
                return index.get(name)
            record_end(index, name, end)
        finally:
            watchdog.release()
    return index.get(name)


def run_streaming(prepared: PreparedJob, layout: Layout, out: BinaryIO, color: bool) -> JobRecord:
    """`distrun run --compute <ray target>`: place, stream every rank's lines, end with the summary."""

    def header(plan: LaunchPlan) -> None:
        record = JobIndex(layout.db_path).get(prepared.name)
        hosts = ", ".join(f"node {n.node_rank} {n.host}" for n in plan.nodes)
        lines = [f"distrun: {note}" for note in plan.notes]
        lines.append(stream_header(record, sum(1 for _ in plan.processes()), len(plan.nodes)))
        lines.insert(-1, f"distrun: placed on Ray compute {prepared.target.name}: {hosts}")
        out.write(("\n".join(lines) + "\n").encode())
        out.flush()

    record = execute(prepared, layout, stream=out, color=color, on_plan=header)
    out.write((execution_summary(record) + "\n").encode())
    out.flush()
    return record


def submit_detached(prepared: PreparedJob, layout: Layout) -> JobRecord:
    """Drive the job from a background process (like a local job); returns its record."""
    from distrun.backends.local import start_detached

    start_detached(prepared, layout)
    return JobIndex(layout.db_path).get(prepared.name)


def cancel(record: JobRecord, layout: Layout) -> JobRecord:
    """`distrun job cancel`: the job's driver is a local process: signal it, as for a local job."""
    from distrun.cancel import cancel_supervised

    return cancel_supervised(layout, record.name)
