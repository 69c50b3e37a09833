"""Per-process launch for `type: pytorch` (and jobs with no distribution).

M nodes x N processes: WORLD_SIZE = M*N, RANK = NODE_RANK*N + LOCAL_RANK. The node-level
variables (MASTER_ADDR, MASTER_PORT, NODE_RANK) are also what a per-node `torchrun` command
needs, so the per-node form is this plan with N = 1.
"""

from __future__ import annotations

from distrun.plan import deepspeed
from distrun.plan.common import code_dir, job_env, process_log_name, rendered_command, shell_argv
from distrun.plan.gpus import slice_gpus
from distrun.plan.model import Bindings, LaunchPlan, NodePlan, Placement, ProcessSpec
from distrun.plan.mpi import user_launcher
from distrun.plan.plan_job import PlanJob

# A job of one process that distrun runs in a role of its own (a Spark job's driver) names the
# role here, for its stream prefix and log labels (`[driver]`, not `[0/0]`). The DISTRUN_ prefix
# is refused in a job file, so only distrun sets it.
PROCESS_LABEL_VAR = "DISTRUN_PROCESS_LABEL"


def rank_of(node_rank: int, local_rank: int, per_node: int) -> int:
    return node_rank * per_node + local_rank


def _label(job: PlanJob, world: int, node_rank: int, rank: int) -> str:
    role = job.environment_variables.get(PROCESS_LABEL_VAR)
    return role if role and world == 1 else f"{node_rank}/{rank}"


def plan_pytorch(job: PlanJob, placement: Placement, bindings: Bindings) -> LaunchPlan:
    per_node = job.process_count_per_instance
    node_count = len(placement.hosts)
    world = node_count * per_node
    command = rendered_command(job, bindings)
    argv = shell_argv(command)
    base = job_env(job, placement, bindings)
    base.update(
        {
            "MASTER_ADDR": placement.master_addr,
            "MASTER_PORT": str(placement.master_port),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(per_node),
            "GROUP_WORLD_SIZE": str(node_count),
            "ROLE_WORLD_SIZE": str(world),
        }
    )
    # torchrun's habit: one OpenMP thread per process when several share a node.
    defaults = {"OMP_NUM_THREADS": "1"} if per_node > 1 else {}
    cwd = code_dir(placement)
    gpus = slice_gpus(job, placement, per_node)
    nodes = []
    for node_rank, host in enumerate(placement.hosts):
        procs = []
        for local_rank in range(per_node):
            rank = rank_of(node_rank, local_rank, per_node)
            env = dict(base)
            env.update(
                {
                    "RANK": str(rank),
                    "LOCAL_RANK": str(local_rank),
                    "NODE_RANK": str(node_rank),
                    "GROUP_RANK": str(node_rank),
                    "ROLE_RANK": str(rank),
                    "AZUREML_CR_NODE_RANK": str(node_rank),
                    "AZUREML_PROCESS_NAME": f"rank_{rank}",
                    **gpus.env(node_rank),
                }
            )
            procs.append(
                ProcessSpec(
                    name=f"rank_{rank}",
                    role="rank",
                    index=rank,
                    node_rank=node_rank,
                    local_rank=local_rank,
                    rank=rank,
                    argv=argv,
                    env=env,
                    env_defaults=defaults,
                    cwd=cwd,
                    log_name=process_log_name(rank),
                    label=_label(job, world, node_rank, rank),
                )
            )
        nodes.append(NodePlan(node_rank=node_rank, host=host, processes=tuple(procs), gpus=gpus.of(node_rank)))
    return LaunchPlan(
        job_name=placement.run_id,
        distribution=job.distribution_type or "none",
        command=command,
        world_size=world,
        master_addr=placement.master_addr,
        master_port=placement.master_port,
        nodes=tuple(nodes),
        notes=(*gpus.notes, *_launcher_notes(command, node_count, per_node)),
    )


def _launcher_notes(command: str, nodes: int, per_node: int) -> list[str]:
    # The DeepSpeed launcher starts every rank of the job from one node: run by every process,
    # each copy would start a whole job of its own. (torchrun is different: one per node is
    # its normal use, and so is DeepSpeed's `--no_ssh --node_rank` mode.)
    program = user_launcher(command)
    if not deepspeed.is_launcher(program) or nodes * per_node == 1:
        return []
    if per_node == 1 and "--no_ssh" in (deepspeed.launcher_options(command) or {}):
        return []
    return [
        f"the command starts the DeepSpeed launcher ({program}), which starts the ranks itself, and type: pytorch "
        f"runs it in each of the {nodes * per_node} processes: use type: mpi, which runs it once on node 0 with a "
        "hostfile in AZUREML_MPI_HOSTFILE"
    ]
