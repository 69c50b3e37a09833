"""What a gang's processes leave behind: processes they started, containers, shared memory.

Processes of the launch are found by the launch's marker in their environment and by its cgroup,
so a daemon that left its process group and session is found too.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Collection, Iterable

from distrun.agent import process_tree
from distrun.agent.cgroup import LaunchCgroup
from distrun.agent.containers import ContainerRun, container_name, remove
from distrun.agent.gang_state import RunningProcess
from distrun.plan.model import LaunchPlan

# How often a sweep looks whether the leftovers it signalled have ended.
SWEEP_POLL = 0.02


def leftover_pids(launch_id: str, cgroup: LaunchCgroup | None, started: Collection[int]) -> list[int]:
    """Live processes of the launch other than the ones the gang started itself (`started`)."""
    found = set(process_tree.marked_pids(launch_id))
    if cgroup is not None:
        found.update(process_tree.alive_pids(cgroup.pids()))
    return sorted(found - set(started))


def sweep_leftovers(launch_id: str, cgroup: LaunchCgroup | None, started: Collection[int], grace: float) -> None:
    """Processes the job started and left behind (daemons, background jobs) end with it: SIGTERM,
    then SIGKILL after `grace`."""
    process_tree.reap_orphans(set(started))
    leftovers = leftover_pids(launch_id, cgroup, started)
    if not leftovers:
        return
    process_tree.kill_pids(leftovers, signal.SIGTERM)
    give_up = time.monotonic() + grace
    while leftovers and time.monotonic() < give_up:
        time.sleep(SWEEP_POLL)
        process_tree.reap_orphans(set(started))
        leftovers = leftover_pids(launch_id, cgroup, started)
    process_tree.kill_pids(leftovers, signal.SIGKILL)
    process_tree.reap_orphans(set(started))


def remove_containers(run: ContainerRun | None, launch_id: str, running: Iterable[RunningProcess]) -> None:
    """Containers whose engine client was killed (after the grace period) are removed by name."""
    names = [container_name(launch_id, item.spec.name) for item in running]
    if run is not None and names:
        remove(run, names)


def remove_shm_leftovers(plan: LaunchPlan, running: Iterable[RunningProcess]) -> None:
    """What the ranks' frameworks left in /dev/shm for this job (`agent.shm_leftovers`): every
    process of this node has ended by now."""
    from distrun.agent.shm_leftovers import remove_leftovers

    remove_leftovers(plan.environment(item.spec) for item in running)
