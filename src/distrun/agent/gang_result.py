"""What a gang's run comes to: every process's outcome, and the stop's root cause where it stopped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from distrun.agent.containers import ContainerRun, start_failure
from distrun.agent.gang_state import GangStop, RunningProcess
from distrun.agent.outcome import COMPLETED, GangResult, never_started, root_cause_of
from distrun.agent.traceback_finder import last_traceback
from distrun.plan.model import LaunchPlan, NodePlan


def gang_result(
    plan: LaunchPlan,
    nodes: Sequence[NodePlan],
    running: Sequence[RunningProcess],
    stop: GangStop | None,
    log_dir: Path,
    container: ContainerRun | None,
) -> GangResult:
    """Read before the logs are closed: the root cause's traceback is read through the
    descriptor distrun wrote, not by a name the job may have pointed elsewhere."""
    outcomes = [item.outcome for item in running]
    started = {o.name for o in outcomes}
    outcomes += [
        never_started(spec, node.host, log_dir) for node in nodes for spec in node.processes if spec.name not in started
    ]
    if stop is None:
        return GangResult(COMPLETED, "all processes completed", None, outcomes)
    root = None
    reason = stop.reason
    if stop.root is not None and stop.root.demux is not None:
        from distrun.agent.mpi_output import mpi_root_cause

        root = mpi_root_cause(stop.root.outcome, stop.root.demux, [node.host for node in plan.nodes])
        reason = root["reason"]
    elif stop.root_cause is not None:
        root = stop.root_cause
    elif stop.root is not None:
        root = root_cause_of(stop.root.outcome, last_traceback(stop.root.outcome.log, stop.root.log_fd))
        if container is not None:
            said = start_failure(container, root["exit_code"], root["log_tail"])
            root["reason"] = said or root["reason"]
        reason = root["reason"]
    return GangResult(stop.status, reason, root, outcomes)
