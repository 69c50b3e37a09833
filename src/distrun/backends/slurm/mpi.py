"""`type: mpi` on Slurm: the mpirun on node 0 starts the other nodes' ranks through Slurm itself.

The plan of an MPI job has one process, the launcher on node 0 (`distrun.plan.mpi`). Inside
a Slurm allocation Open MPI's mpirun needs no ssh: its Slurm launcher (`plm_slurm`, chosen
because SLURM_JOBID is set) runs `srun` to start one Open MPI daemon per node, and the
daemons start the ranks. Three things make that work from a distrun node agent:

- The hostfile names Slurm's nodes (`n1 slots=2`), not their addresses: mpirun accepts only
  hosts of the allocation, and two nodes may share an address (several nodes on one host).
- `SLURM_OVERLAP=1`: the daemons' srun is a second job step on nodes whose CPUs the node
  agents' step holds; since Slurm 20.11 such a step waits for them to be free (forever)
  unless it may overlap.
- `SLURM_TASKS_PER_NODE`: Open MPI's Slurm allocator refuses to start without it, and the
  node agent removes the agents' own value from what it passes on; the launcher gets the
  MPI job's, N ranks on each of M nodes (`N(xM)`).

A command that starts its own launcher (`mpirun --hostfile $AZUREML_MPI_HOSTFILE ...`) gets
the same hostfile and variables, so its mpirun does the same.

Pure: the node agent applies it to the plan it built, `distrun plan` to the preview.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from distrun.plan import deepspeed
from distrun.plan.model import LaunchPlan, NodePlan, ProcessSpec
from distrun.plan.mpi import HOSTFILE_PATH, hostfile_text, user_launcher

NOTE = (
    "Slurm: mpirun on node 0 starts Open MPI's daemons on the allocation's nodes with srun (an overlapping "
    "job step, SLURM_OVERLAP=1), and they start the ranks; the hostfile names Slurm's nodes"
)


def launcher_env(per_node: int, node_count: int) -> dict[str, str]:
    """What the MPI launcher needs from Slurm besides the job's own variables."""
    return {"SLURM_OVERLAP": "1", "SLURM_TASKS_PER_NODE": f"{per_node}(x{node_count})"}


def for_slurm(plan: LaunchPlan, node_names: Sequence[str]) -> LaunchPlan:
    """An MPI plan made to run inside a Slurm allocation; other plans unchanged."""
    if plan.distribution != "mpi":
        return plan
    if len(node_names) != len(plan.nodes):
        raise ValueError(f"{len(node_names)} Slurm node names for a plan of {len(plan.nodes)} nodes")
    per_node = plan.world_size // max(len(plan.nodes), 1)
    hostfile = hostfile_text(tuple(node_names), per_node, simulated=False)
    extra = launcher_env(per_node, len(node_names))
    nodes = tuple(_node_for_slurm(node, hostfile, extra) for node in plan.nodes)
    return dataclasses.replace(plan, nodes=nodes, notes=(*plan.notes, NOTE, *ssh_notes(plan.command, len(node_names))))


def ssh_notes(command: str, node_count: int) -> list[str]:
    """Launchers that reach the other nodes over ssh, not through Slurm, whatever mpirun does."""
    program = user_launcher(command) if node_count > 1 else None
    if program == "horovodrun":
        return [
            "Slurm: horovodrun reaches the other nodes over ssh (it checks each host and starts its own services "
            "there); without ssh between the nodes, run the training script without a launcher and let distrun's "
            "mpirun start it (Horovod works under any mpirun)"
        ]
    if deepspeed.is_launcher(program):
        runner = (deepspeed.launcher_options(command) or {}).get("--launcher", "pdsh")
        if runner.lower() == "pdsh":
            return [
                "Slurm: the DeepSpeed launcher's default runner (pdsh) reaches the other nodes over ssh; "
                "with --launcher openmpi it runs mpirun, which starts the ranks through Slurm"
            ]
    return []


def _node_for_slurm(node: NodePlan, hostfile: str, extra: dict[str, str]) -> NodePlan:
    files = {path: hostfile if path == HOSTFILE_PATH else text for path, text in node.files.items()}
    processes = tuple(_launcher_for_slurm(spec, extra) for spec in node.processes)
    return dataclasses.replace(node, files=files, processes=processes)


def _launcher_for_slurm(spec: ProcessSpec, extra: dict[str, str]) -> ProcessSpec:
    if spec.role != "launcher":
        return spec
    return dataclasses.replace(spec, env={**spec.env, **extra})
