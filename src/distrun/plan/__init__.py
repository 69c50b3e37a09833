"""Planning: pure functions from a validated job and its placement to a `LaunchPlan`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from distrun.core.errors import DistrunError
from distrun.plan.model import Bindings, LaunchPlan, NodePlan, Placement, ProcessSpec, with_shared_env
from distrun.plan.plan_job import PlanJob

if TYPE_CHECKING:
    from distrun.spec.models import JobSpec

Planner = Callable[[PlanJob, Placement, Bindings], LaunchPlan]


def _planner(kind: str) -> Planner:
    # One module per distribution type; imported on demand to keep the CLI start fast.
    if kind in ("pytorch", "none"):
        from distrun.plan.pytorch import plan_pytorch

        return plan_pytorch
    if kind == "tensorflow":
        from distrun.plan.tensorflow import plan_tensorflow

        return plan_tensorflow
    if kind == "mpi":
        from distrun.plan.mpi import plan_mpi

        return plan_mpi
    if kind == "ray":
        from distrun.plan.ray import plan_ray

        return plan_ray
    raise DistrunError(
        f"distribution type {kind!r} validates but distrun cannot launch it yet",
        "use type: pytorch, or run the framework's own launcher under type: pytorch with process_count_per_instance: 1",
    )


def plan_job(job: JobSpec | PlanJob) -> PlanJob:
    """What the planner reads of a job: a validated spec is dumped and read as its job.json would be."""
    return job if isinstance(job, PlanJob) else PlanJob.of(job)


def task_port_count(job: JobSpec | PlanJob) -> int:
    """How many per-task ports a job needs besides MASTER_PORT (the backend finds them)."""
    job = plan_job(job)
    if job.distribution_type == "tensorflow":
        from distrun.plan.tensorflow_tasks import task_count

        return task_count(job)  # one address:port per TF task, in cluster order
    if job.distribution_type == "ray":
        from distrun.plan.ray import port_count

        return port_count(job)  # the Ray cluster's ports (plan.ray.ray_ports)
    return 0


def build_plan(job: JobSpec | PlanJob, placement: Placement, bindings: Bindings) -> LaunchPlan:
    job = plan_job(job)
    return with_shared_env(_planner(job.distribution_type or "none")(job, placement, bindings))


__all__ = [
    "Bindings",
    "LaunchPlan",
    "NodePlan",
    "Placement",
    "PlanJob",
    "ProcessSpec",
    "build_plan",
    "plan_job",
    "task_port_count",
]
