"""The Ray backend (`BACKEND`, `RayBackend`: a `distrun.backends.supervised.SupervisedBackend`).

`execute` drives a job (`distrun run`, or `python -m distrun.backends.ray.launcher` in the
background). The package's docstring says how a job runs on Ray.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

from distrun.backends.base import RenderedJob
from distrun.backends.ray.placement import PlacementRequest, placement_request
from distrun.backends.ray.target import RaySettings
from distrun.backends.supervised import SupervisedBackend
from distrun.core.errors import DistrunError
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import LaunchPlan, Placement
from distrun.prepare.compute import ComputeTarget
from distrun.prepare.submission import PreparedJob
from distrun.spec.models import JobSpec
from distrun.store.index import FAILED, JobIndex, JobRecord
from distrun.store.layout import Layout

PLACEHOLDER_HOST = "<ray node {}>"
AGENT_MODULE = "distrun.backends.ray.node_agent"
# Distribution types a Ray target refuses, with why (none today: mpirun reaches the other Ray
# nodes through their node agents, distrun.agent.remote_start).
UNSUPPORTED: dict[str, str] = {}


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


NOTES = (
    "Ray places the job: node rank i runs in bundle i of the placement group; MASTER_ADDR is node 0's "
    "address in the cluster and MASTER_PORT (and any task port) a port free there, all known once the "
    "job is placed: hosts and ports below are placeholders",
    "the code snapshot and inputs are shipped to every node; logs stream back into the job folder here",
)

MPI_NOTE = (
    "type: mpi: mpirun on node 0 starts its daemons on the other nodes through their node agents "
    "(OMPI_MCA_plm_rsh_agent='python -m distrun.agent.remote_start'; each agent's port and the job's token "
    "are chosen at placement)"
)


def execute(
    prepared: PreparedJob, layout: Layout, stream: BinaryIO | None, on_plan: Callable[[LaunchPlan], None] | None = None
) -> JobRecord:
    """Run a prepared job on Ray to its end, supervised from this process; returns its final record.

    The stream carries the ranks' lines as the nodes' agents prefixed them (no colour of its own).
    """
    from distrun.agent.stop_signals import held_stop_signals
    from distrun.backends.job_launcher import acting_as_launcher
    from distrun.backends.ray.driver import RayRun, record_end

    index = JobIndex(layout.db_path)
    name = prepared.name
    # The launcher's watchdog is forked before Ray starts any thread.
    with held_stop_signals() as signals, acting_as_launcher(layout, name, f"{name}-{os.getpid()}") as started:
        if not started:
            return index.get(name)  # canceled before it could start
        try:
            settings: RaySettings = BACKEND.target_settings(prepared.target)
            end = RayRun(prepared, index, settings, stream, signals, on_plan).run()
        except DistrunError as exc:
            reason = exc.message + (f"\n{exc.hint}" if exc.hint else "")
            index.update(name, status=FAILED, reason=reason, ended_at=time.time())
            return index.get(name)
        record_end(index, name, end)
    return index.get(name)


# ---------------------------------------------------------------- the contract


@dataclass(frozen=True)
class RayRequest:
    """Ray's request for one job: the placement group, and one node-agent actor per bundle."""

    address: str
    placement: PlacementRequest

    def display(self) -> dict[str, Any]:
        actors = [
            f"  node {i}: RayNodeAgent actor in bundle {i} (max_concurrency 4) -> python -m {AGENT_MODULE}"
            for i in range(len(self.placement.bundles))
        ]
        script = "\n".join(
            [
                f"ray.init(address={self.address!r})",
                f"placement_group({[dict(b) for b in self.placement.bundles]}, strategy={self.placement.strategy!r}, "
                f"name={self.placement.name!r})",
                f"wait at most {self.placement.timeout_s:g} s, else remove it and fail with what each node has free",
                *actors,
            ]
        )
        return {"placement": self.placement.to_dict(), "script_name": "Ray placement request", "script": script}


class RayBackend(SupervisedBackend):
    """A Ray cluster: the job's nodes are bundles of one placement group, driven from the `distrun` process.

    The driver is a process on this machine (`distrun run`, or the launcher `schedule` starts):
    it writes the record and every rank's log, and `cancel` signals it; it stops every node.
    """

    kind: ClassVar[str] = "ray"
    engine: ClassVar[str] = "Ray"
    cancel_wait_s: ClassVar[float] = 30.0
    settings_model: ClassVar[type[RaySettings]] = RaySettings
    launcher_module: ClassVar[str] = "distrun.backends.ray.launcher"

    def preflight(self, target: ComputeTarget, spec: JobSpec) -> None:
        """Before anything is recorded: Ray installed, the head answering, the job's type supported here."""
        from distrun.backends.ray.driver import check_reachable, import_ray

        settings: RaySettings = self.target_settings(target)
        problem = UNSUPPORTED.get(spec.distribution_type or "")
        if problem:
            raise DistrunError(problem, "run it on local compute or Slurm, or use type: pytorch; nothing was submitted")
        placement_request(spec, settings, "check")  # the job's per-node resources are valid
        import_ray()
        check_reachable(settings.address)

    def render(self, job: PreparedJob, layout: Layout) -> RenderedJob:
        settings: RaySettings = self.target_settings(job.target)
        return RenderedJob(
            job=job,
            plan=preview_plan(job.spec, str(job.folder.root), job.bindings, job.name),
            request=RayRequest(settings.address, placement_request(job.spec, settings, job.name)),
            kind=self.kind,
            notes=NOTES + (MPI_NOTE,) if job.spec.distribution_type == "mpi" else NOTES,
        )

    def supervise(
        self,
        rendered: RenderedJob,
        layout: Layout,
        stream: BinaryIO,
        color: bool,
        on_plan: Callable[[LaunchPlan], None],
    ) -> JobRecord:
        """Drive the job from this process (`execute`); lines come as the nodes' agents prefixed them."""
        return execute(rendered.job, layout, stream, on_plan=on_plan)

    def attached_notes(self, rendered: RenderedJob, plan: LaunchPlan) -> list[str]:
        hosts = ", ".join(f"node {n.node_rank} {n.host}" for n in plan.nodes)
        return [*plan.notes, f"placed on Ray compute {rendered.job.target.name}: {hosts}"]


BACKEND = RayBackend()
# `distrun compute create --type ray` as a function (the Ray test cluster's fixture calls it).
validate_settings = BACKEND.validate_settings
