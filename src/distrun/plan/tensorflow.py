"""Per-task launch for `type: tensorflow`: one process per TF task, each with its TF_CONFIG.

Tasks come in TF_CONFIG's cluster order: `chief` (the distrun extension `chief_count: 1`),
`worker` (default: one per node), `ps`. Task k of that sequence gets port
`placement.task_ports[k]` on its node's host and lands on node `k % node_count`: each role
is a contiguous run of the sequence, so every role, and the total, is spread over the nodes
as evenly as it can be, and the same job always gives the same layout.

Roles that are empty are left out of `cluster`: Azure ML writes `"ps": []`, which
TensorFlow 2.13+ rejects.

Parameter servers serve until they are stopped, so they are `auxiliary`: distrun stops them
once the tasks that do the training have finished. With a chief and parameter servers (TF2
ParameterServerStrategy) the workers are servers too (they `join()` forever), so the chief
alone decides when the job is done and the workers are auxiliary as well. Without a chief,
worker 0 acts as chief, as in Azure ML, and the workers train until they exit.
"""

from __future__ import annotations

from collections import Counter

from distrun.core.errors import DistrunError
from distrun.plan.common import code_dir, job_env, rendered_command, shell_argv
from distrun.plan.gpus import slice_gpus
from distrun.plan.model import Bindings, LaunchPlan, NodePlan, Placement, ProcessSpec, tf_config
from distrun.plan.plan_job import PlanJob
from distrun.plan.tensorflow_tasks import ROLES, TensorFlowTask, is_auxiliary, layout, task_count, task_counts

__all__ = ["is_auxiliary", "layout", "plan_tensorflow", "task_count", "task_counts", "tf_config"]


def log_name(task: TensorFlowTask, same_role_on_node: int) -> str:
    """Azure ML's per-node, per-role name; the task index is added when a node runs several."""
    base = f"std_log_node_{task.node_rank:02d}_{task.role}"
    return f"{base}.txt" if same_role_on_node == 1 else f"{base}_{task.index}.txt"


def _addresses(tasks: list[TensorFlowTask], placement: Placement) -> list[str]:
    if len(placement.task_ports) < len(tasks):
        raise DistrunError(
            f"the TensorFlow plan needs {len(tasks)} task ports, the backend gave {len(placement.task_ports)}",
            "this is a distrun bug in the backend: it must reserve task_port_count(job) ports",
        )
    addresses = [f"{placement.hosts[t.node_rank]}:{placement.task_ports[t.sequence]}" for t in tasks]
    repeated = sorted(a for a, n in Counter(addresses).items() if n > 1)
    if repeated:
        raise DistrunError(
            f"two TensorFlow tasks were given the same address: {', '.join(repeated)}",
            "this is a distrun bug in the backend: every task on a host needs its own port",
        )
    return addresses


def _notes(job: PlanJob, counts: dict[str, int], placement: Placement) -> tuple[str, ...]:
    notes = []
    if counts["ps"] and not counts["chief"]:
        notes.append(
            "no chief task: worker 0 acts as chief (as in Azure ML); "
            "TF2 ParameterServerStrategy needs `chief_count: 1` in distribution"
        )
    kept = job.tensorflow.ps_recorded
    if placement.simulated and kept:
        notes.append(
            f"parameter_server {' and '.join(kept)} recorded; on local compute "
            "parameter servers run in the job's own Python environment, without limits"
        )
    return tuple(notes)


def plan_tensorflow(job: PlanJob, placement: Placement, bindings: Bindings) -> LaunchPlan:
    counts = task_counts(job)
    node_count = len(placement.hosts)
    tasks = layout(counts, node_count)
    addresses = _addresses(tasks, placement)
    cluster = {
        role: [a for t, a in zip(tasks, addresses, strict=True) if t.role == role] for role in ROLES if counts[role]
    }

    command = rendered_command(job, bindings)
    argv = shell_argv(command)
    base = job_env(job, placement, bindings)
    ps_env = job.tensorflow.ps_environment_variables
    per_node_role = Counter((t.node_rank, t.role) for t in tasks)
    cwd = code_dir(placement)
    gpus = slice_gpus(job, placement, max(Counter(t.node_rank for t in tasks).values(), default=0))

    by_node: dict[int, list[ProcessSpec]] = {n: [] for n in range(node_count)}
    for task in tasks:
        name = f"{task.role}_{task.index}"
        env = dict(base)
        if task.role == "ps":
            env.update(ps_env)  # the draft's parameter_server.environment_variables: ps tasks only
        # No RANK, WORLD_SIZE or MASTER_*: TensorFlow reads TF_CONFIG, and a RANK on a parameter
        # server would send scripts that branch on it down the wrong path.
        env.update(
            {
                "NODE_RANK": str(task.node_rank),
                "AZUREML_CR_NODE_RANK": str(task.node_rank),
                "AZUREML_PROCESS_NAME": name,
                "DISTRUN_TASK_TYPE": task.role,
                "DISTRUN_TASK_INDEX": str(task.index),
                **gpus.env(task.node_rank),
            }
        )
        local = by_node[task.node_rank]
        local.append(
            ProcessSpec(
                name=name,
                role=task.role,
                index=task.index,
                node_rank=task.node_rank,
                local_rank=len(local),
                rank=None,
                argv=argv,
                env=env,
                env_defaults={},
                cwd=cwd,
                log_name=log_name(task, per_node_role[(task.node_rank, task.role)]),
                label=f"{task.role} {task.index}",
                auxiliary=is_auxiliary(task.role, counts),
                tf_task=(task.role, task.index),  # TF_CONFIG: LaunchPlan.environment()
            )
        )
    nodes = tuple(
        NodePlan(node_rank=n, host=host, processes=tuple(by_node[n]), gpus=gpus.of(n))
        for n, host in enumerate(placement.hosts)
    )
    return LaunchPlan(
        job_name=placement.run_id,
        distribution="tensorflow",
        command=command,
        world_size=len(tasks),
        master_addr=placement.master_addr,
        master_port=placement.master_port,
        nodes=nodes,
        tf_cluster={role: tuple(addresses) for role, addresses in cluster.items()},
        notes=(*gpus.notes, *_notes(job, counts, placement)),
    )
