"""Which pipeline steps start now, which a failure stops, and which to look at: pure decisions over plain data.

A step starts when every step it reads from Completed. Steps on local compute share this
machine's cores: a step starts only while its processes fit beside the local steps already
running (a step larger than the machine starts alone, as `distrun run` of that job would
run). They share its GPUs the same way: a step that asks for GPUs
(`resources.properties.gpus_per_node`, times its nodes) starts only while that many are free
beside the running steps', and is given GPUs no running step holds (`gpus_for`). Steps on a
cluster engine take no local room: the engine queues them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from distrun.core.job_status import JobStatus
from distrun.spec.pipeline_graph import downstream_of

NOT_STARTED = "NotStarted"  # Azure ML's word for a step still waiting


def startable(
    depends_on: Mapping[str, Sequence[str]],
    status: Mapping[str, str],
    local_size: Mapping[str, int],
    capacity: int,
    gpu_need: Mapping[str, int] | None = None,
    gpus: int = 0,
) -> list[str]:
    """The steps to start now, in file order.

    `status`: each step's status (NotStarted, or its job's). `local_size`: each step's process
    count on this machine (0 for a step on a cluster engine). `capacity`: this machine's cores.
    `gpu_need`: the GPUs each local step asks for (0 or missing: none). `gpus`: this machine's.
    A step asking for more cores or GPUs than the machine has starts alone (its job then says
    what does not fit), rather than never.
    """
    need = gpu_need or {}
    running = [s for s, state in status.items() if state != NOT_STARTED and not _ended(state)]
    used = sum(local_size[s] for s in running)
    used_gpus = sum(need.get(s, 0) for s in running)
    chosen = []
    for step, upstream in depends_on.items():
        if status[step] != NOT_STARTED:
            continue
        if not all(status[u] == JobStatus.COMPLETED for u in upstream):
            continue
        size, asked = local_size[step], need.get(step, 0)
        if size and used and used + size > capacity:
            continue  # waits for room; a later, smaller step may still fit
        if asked and used_gpus and used_gpus + asked > gpus:
            continue  # waits for GPUs; a step asking for none, or fewer, may still start
        used += size
        used_gpus += asked
        chosen.append(step)
    return chosen


def gpus_for(asked: int, machine: Sequence[str], held: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """The GPUs a starting step is given: the first `asked` of the machine's that no running step
    holds (all that are free when fewer are: the step's job then says how many it lacks)."""
    taken = {gpu for devices in held for gpu in devices}
    return tuple(gpu for gpu in machine if gpu not in taken)[:asked]


def stopped_by(failed: str, depends_on: Mapping[str, Sequence[str]], status: Mapping[str, str]) -> list[str]:
    """The steps that will now never start: every waiting step downstream of `failed`."""
    below = downstream_of(failed, depends_on)
    return [s for s in depends_on if s in below and status[s] == NOT_STARTED]


def _ended(state: str) -> bool:
    return JobStatus.of(state).terminal if state != NOT_STARTED else False
