"""Which pipeline steps start now, which a failure stops, and which to look at: pure decisions over plain data.

A step starts when every step it reads from Completed. Steps on local compute share this
machine's cores: a step starts only while its processes fit beside the local steps already
running (a step larger than the machine starts alone, as `distrun run` of that job would
run). Steps on a cluster engine take no local room: the engine queues them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from distrun.core.job_status import JobStatus
from distrun.spec.pipeline_graph import downstream_of

NOT_STARTED = "NotStarted"  # Azure ML's word for a step still waiting
# How often the engine running a step is asked about it, as `distrun run` asks about a job
# (`distrun.runner.attach.POLL_S`): each look is a request to the engine (on Slurm, `scontrol
# show job`, an RPC to slurmctld), which a scheduler's users must not send many times a second.
ENGINE_LOOK_SECONDS = 0.5


def startable(
    depends_on: Mapping[str, Sequence[str]],
    status: Mapping[str, str],
    local_size: Mapping[str, int],
    capacity: int,
) -> list[str]:
    """The steps to start now, in file order.

    `status`: each step's status (NotStarted, or its job's). `local_size`: each step's process
    count on this machine (0 for a step on a cluster engine). `capacity`: this machine's cores.
    """
    used = sum(local_size[s] for s, state in status.items() if state != NOT_STARTED and not _ended(state))
    chosen = []
    for step, upstream in depends_on.items():
        if status[step] != NOT_STARTED:
            continue
        if not all(status[u] == JobStatus.COMPLETED for u in upstream):
            continue
        size = local_size[step]
        if size and used and used + size > capacity:
            continue  # waits for room; a later, smaller step may still fit
        used += size
        chosen.append(step)
    return chosen


def stopped_by(failed: str, depends_on: Mapping[str, Sequence[str]], status: Mapping[str, str]) -> list[str]:
    """The steps that will now never start: every waiting step downstream of `failed`."""
    below = downstream_of(failed, depends_on)
    return [s for s in depends_on if s in below and status[s] == NOT_STARTED]


def _ended(state: str) -> bool:
    return JobStatus.of(state).terminal if state != NOT_STARTED else False


def due_looks(running: Iterable[str], last_look: Mapping[str, float], now: float) -> list[str]:
    """The running steps whose job's record to read now.

    `last_look`: when the engine was last asked about each step an engine runs; such a step is
    due once ENGINE_LOOK_SECONDS passed. Any other step's record is the job index's, read each time.
    """
    return [s for s in running if s not in last_look or now - last_look[s] >= ENGINE_LOOK_SECONDS]
