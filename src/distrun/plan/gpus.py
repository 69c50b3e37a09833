"""GPUs of simulated nodes: each node gets a disjoint slice of this machine's GPUs.

On a real node every process sees the node's GPUs and picks one with LOCAL_RANK
(`torch.cuda.set_device(LOCAL_RANK)`). Simulated nodes share one machine, so without slicing
every node's LOCAL_RANK 0 would pick GPU 0: NCCL refuses two ranks on one GPU and the other
GPUs stay idle. Node i's processes therefore see `CUDA_VISIBLE_DEVICES` = node i's slice, and
LOCAL_RANK indexes into it exactly as on a real node.

Pure: the backend probes the machine (`Placement.gpus`); a job's own CUDA_VISIBLE_DEVICES in
`environment_variables` replaces the probe. A job asks for GPUs with
`resources.properties.gpus_per_node` (as on Slurm): then every node gets exactly that many,
and a node running more processes than it has GPUs is an error. Without it, the GPUs are
shared out evenly and the same mismatch is only a note.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from distrun.core.errors import DistrunError
from distrun.plan.model import Placement
from distrun.plan.plan_job import PlanJob
from distrun.plan.tensorflow_tasks import layout, task_counts

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
ASK_KEY = "gpus_per_node"  # in resources.properties
_ASK_PATTERN = re.compile(r"^(?:[A-Za-z0-9_.-]+:)?(\d+)$")
_ASK_HINT = "write resources.properties.gpus_per_node as a number of GPUs, e.g. 4 or a100:4"


@dataclass(frozen=True)
class GpuSlices:
    """Node rank -> the GPUs its processes see; empty when distrun leaves CUDA_VISIBLE_DEVICES alone."""

    per_node: tuple[tuple[str, ...], ...] = ()
    notes: tuple[str, ...] = ()

    def of(self, node_rank: int) -> tuple[str, ...]:
        return self.per_node[node_rank] if node_rank < len(self.per_node) else ()

    def env(self, node_rank: int) -> dict[str, str]:
        """The variable node `node_rank`'s processes get (none when it is given no slice)."""
        devices = self.of(node_rank)
        return {VISIBLE_DEVICES: ",".join(devices)} if devices else {}


def parse_visible_devices(text: str | None) -> tuple[str, ...] | None:
    """CUDA_VISIBLE_DEVICES as a device list: None when unset; () for "" or "-1" (no GPU)."""
    if text is None:
        return None
    devices = tuple(part.strip() for part in text.split(",") if part.strip())
    if devices and devices[0].startswith("-"):
        return ()  # CUDA stops at the first invalid index: "-1" hides every GPU
    return devices


def asked_gpus_per_node(job: PlanJob) -> int | None:
    """`resources.properties.gpus_per_node` as a count (4, "4", "a100:4"); None when not asked."""
    value = job.gpus_per_node
    if value is None:
        return None
    match = _ASK_PATTERN.match(str(value).strip()) if not isinstance(value, bool) else None
    if match is None:
        raise DistrunError(f"resources.properties.{ASK_KEY}: {value!r} is not a number of GPUs", _ASK_HINT)
    return int(match.group(1))


def processes_per_node(job: PlanJob, node_count: int) -> int:
    """The most processes any node of the job runs (that each want a GPU of their own)."""
    kind = job.distribution_type
    if kind == "tensorflow":
        per_node = Counter(task.node_rank for task in layout(task_counts(job), node_count))
        return max(per_node.values(), default=0)
    return job.process_count_per_instance


def slice_gpus(job: PlanJob, placement: Placement, per_node: int) -> GpuSlices:
    """Each simulated node's GPUs; a clear error when the job asks for GPUs it cannot have."""
    asked = asked_gpus_per_node(job)
    if not placement.simulated:
        return GpuSlices()  # a real node's GPUs are its own (Slurm sets CUDA_VISIBLE_DEVICES)
    own = parse_visible_devices(job.environment_variables.get(VISIBLE_DEVICES))
    devices = own if own is not None else (placement.gpus or ())
    source = "the job's CUDA_VISIBLE_DEVICES" if own is not None else "this machine"
    nodes = len(placement.hosts)
    if asked is not None:
        return _asked(asked, devices, source, nodes, per_node)
    if not devices:
        return GpuSlices()
    share = len(devices) // nodes
    if share == 0:
        return GpuSlices(
            notes=(
                f"local compute: {source} has {len(devices)} GPU(s) for {nodes} simulated nodes, "
                "so every node sees all of them; set resources.properties.gpus_per_node to make this an error",
            )
        )
    slices = tuple(tuple(devices[i * share : (i + 1) * share]) for i in range(nodes))
    notes = [_shown(slices)]
    if per_node > share:
        notes.append(
            f"local compute: {per_node} processes per node but {share} GPU(s) per node: ranks with "
            f"LOCAL_RANK >= {share} have no GPU of their own; set resources.properties.gpus_per_node "
            "to make this an error"
        )
    return GpuSlices(slices, tuple(notes))


def _asked(asked: int, devices: tuple[str, ...], source: str, nodes: int, per_node: int) -> GpuSlices:
    if per_node > asked:
        raise DistrunError(
            f"resources.properties.{ASK_KEY} is {asked} but each node runs {per_node} processes: "
            "every process needs a GPU of its own",
            f"set distribution.process_count_per_instance to at most {asked}, or ask for {per_node} GPUs per node",
        )
    if asked == 0:
        return GpuSlices()
    if nodes * asked > len(devices):
        raise DistrunError(
            f"resources.properties.{ASK_KEY}: {nodes} nodes x {asked} GPUs = {nodes * asked} GPUs, "
            f"but {source} has {len(devices)} ({'GPUs ' + ','.join(devices) if devices else 'none found'})",
            "lower resources.instance_count or gpus_per_node; distrun finds GPUs through CUDA_VISIBLE_DEVICES, "
            "else `nvidia-smi -L`",
        )
    slices = tuple(tuple(devices[i * asked : (i + 1) * asked]) for i in range(nodes))
    return GpuSlices(slices, (_shown(slices),))


def _shown(slices: tuple[tuple[str, ...], ...]) -> str:
    parts = ", ".join(f"node {i}: {','.join(s)}" for i, s in enumerate(slices))
    return f"local compute: each simulated node sees its own GPUs through CUDA_VISIBLE_DEVICES ({parts})"


def launcher_devices(slices: GpuSlices, per_node: int) -> tuple[str, ...]:
    """For a launcher that starts every rank on this machine itself (a user's own mpirun, DeepSpeed).

    Its ranks are local ranks 0..M*N-1 of one host. Giving it the first N GPUs of each node's
    slice, in node order, makes rank r's OMPI_COMM_WORLD_LOCAL_RANK (or LOCAL_RANK) pick GPU
    r % N of node r // N: the same GPU as per-node slicing would.
    """
    return tuple(device for node in slices.per_node for device in node[:per_node])


def rank_binding(slices: GpuSlices, per_node: int) -> str:
    """Shell text that sets a rank's CUDA_VISIBLE_DEVICES to its node's slice under mpirun.

    One mpirun cannot give each host its own `-x CUDA_VISIBLE_DEVICES`, and simulated nodes are
    one host anyway. Under `--map-by slot` rank r runs on node r // N, so each rank picks its
    node's slice from OMPI_COMM_WORLD_RANK before the user's command runs.
    """
    if not slices.per_node:
        return ""
    cases = " ".join(f"{i}) export {VISIBLE_DEVICES}={','.join(s)};;" for i, s in enumerate(slices.per_node))
    return f"case $((OMPI_COMM_WORLD_RANK / {max(per_node, 1)})) in {cases} esac; "
