"""The tasks of a `type: tensorflow` job and the node each runs on (`distrun.plan.tensorflow` plans them).

Tasks come in TF_CONFIG's cluster order: `chief`, `worker`, `ps`; task k of that sequence lands
on node `k % node_count`. Its own module, below the planner and the GPU slicing that both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrun.plan.plan_job import PlanJob

ROLES = ("chief", "worker", "ps")  # TF_CONFIG's cluster order, and the port order


@dataclass(frozen=True)
class TensorFlowTask:
    role: str  # chief | worker | ps
    index: int  # index within the role, as in TF_CONFIG's task.index
    sequence: int  # position in chief, workers, ps order: picks the port and the node
    node_rank: int


def task_counts(job: PlanJob) -> dict[str, int]:
    """How many tasks of each role the job runs, in cluster order."""
    dist = job.tensorflow
    workers = dist.worker_count if dist.worker_count is not None else job.node_count
    return {"chief": dist.chief_count, "worker": workers, "ps": dist.parameter_server_count}


def task_count(job: PlanJob) -> int:
    return sum(task_counts(job).values())


def layout(counts: dict[str, int], node_count: int) -> list[TensorFlowTask]:
    """Every task with its node: task k of the cluster-order sequence on node k % node_count."""
    tasks = []
    for role in ROLES:
        for index in range(counts.get(role, 0)):
            sequence = len(tasks)
            tasks.append(TensorFlowTask(role, index, sequence, sequence % node_count))
    return tasks


def is_auxiliary(role: str, counts: dict[str, int]) -> bool:
    """Tasks that serve until stopped: parameter servers; workers too under a chief with ps."""
    if role == "ps":
        return True
    return role == "worker" and counts["chief"] > 0 and counts["ps"] > 0
