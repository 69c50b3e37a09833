"""`python -m distrun.backends.ray.node_agent WORKDIR`: one node of a job on Ray, run by distrun's agent.

The Ray actor of node k (`distrun.backends.ray.actor`) fills WORKDIR on its Ray node and starts
this process: `request.json` (the job, its bindings, every node's address, the ports chosen on
node 0), `job/` (the code snapshot and downloaded inputs, shipped from the machine that runs
`distrun`: no shared filesystem is assumed). It builds the same plan every node builds, runs
its own node's processes with the gang supervisor local compute uses, and writes
`outcome.json` for the actor to hand back. Per-rank logs go to `job/user_logs/`, the prefixed
stream to stdout, the agent's own words to stderr; the actor streams all three back.

The layers that leave no process behind are the local agent's: every rank in its own process
group with PDEATHSIG, a launch marker in its environment, a cgroup where writable, and a
watchdog that kills whatever carries the marker if this process dies (the actor starts this
process with PDEATHSIG=SIGTERM, so a killed actor or a lost driver stops the ranks too).
Ray itself does not kill a rank's descendants.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REQUEST = "request.json"
OUTCOME = "outcome.json"
JOB = "job"
PEERS = "peers"


def rebased(bindings: Mapping[str, Mapping[str, str]], old_root: str, new_root: str) -> dict[str, dict[str, str]]:
    """Bindings whose paths point into the driver's job folder, pointed into this node's copy."""
    old = old_root.rstrip("/")

    def move(value: str) -> str:
        if value == old or value.startswith(old + "/"):
            return new_root.rstrip("/") + value[len(old) :]
        return value

    return {group: {k: move(v) for k, v in values.items()} for group, values in bindings.items()}


def rank_base_env(env: Mapping[str, str]) -> dict[str, str]:
    """What the ranks inherit: the Ray node's environment without Ray's own per-worker variables.

    A Ray worker's RAY_* variables describe that worker (its job id, raylet, address); a rank,
    or a Ray cluster a `type: ray` job starts, must not take them as its own.
    """
    return {k: v for k, v in env.items() if not k.startswith("RAY_")}


def outcome_of(result: Any, request: Mapping[str, Any], started_at: float, ended_at: float) -> dict[str, Any]:
    """The node's report: the gang's result with this node's host, and wall-clock times."""
    data = result.to_dict()
    node = int(request["node_rank"])
    host, address = request["names"][node], request["hosts"][node]
    for proc in data["processes"]:
        proc["host"], proc["address"] = host, address
    root = data["root_cause"]
    failed_at = None
    if root is not None:
        root["host"], root["address"] = host, address
        if root.get("after_ms") is not None:
            failed_at = started_at + root["after_ms"] / 1000
    return {
        "node_rank": node,
        "host": host,
        "address": address,
        "status": data["status"],
        "reason": data["reason"],
        "root_cause": root if data["status"] == "Failed" else None,
        "failed_at": failed_at if data["status"] == "Failed" else None,
        "started_at": started_at,
        "ended_at": ended_at,
        "processes": data["processes"],
    }


def run(workdir: Path) -> int:
    from distrun.agent.gang import DEFAULT_GRACE, run_gang
    from distrun.agent.node import write_json
    from distrun.agent.peers import FolderPeers
    from distrun.agent.stop_signals import held_stop_signals
    from distrun.agent.watchdog import Watchdog
    from distrun.plan import build_plan
    from distrun.plan.model import Bindings, Placement
    from distrun.spec.models import JobSpec

    with held_stop_signals() as stop_signals:
        request = json.loads((workdir / REQUEST).read_text(encoding="utf-8"))
        node = int(request["node_rank"])
        job_dir = workdir / JOB
        spec = JobSpec.model_validate(request["spec"])
        bindings = Bindings(**rebased(request["bindings"], request["driver_job_dir"], str(job_dir)))
        placement = Placement(
            hosts=tuple(request["hosts"]),
            master_port=int(request["master_port"]),
            task_ports=tuple(request["task_ports"]),
            job_dir=str(job_dir),
            run_id=request["job_name"],
        )
        plan = build_plan(spec, placement, bindings)
        mine = [p.name for n in plan.nodes if n.node_rank == node for p in n.processes]
        print(
            f"distrun node agent: node {node} of {len(plan.nodes)} ({request['names'][node]}, "
            f"{request['hosts'][node]}) pid {os.getpid()}: {', '.join(mine) or 'no process of its own'}; "
            f"MASTER_ADDR={plan.master_addr} MASTER_PORT={plan.master_port}",
            file=sys.stderr,
            flush=True,
        )
        grace = spec.limits.grace_period if spec.limits.grace_period is not None else DEFAULT_GRACE
        launch_id = request["launch_id"]
        watchdog = Watchdog.start(launch_id, lambda: None)  # before any thread: it forks
        started_at = time.time()
        try:
            result = run_gang(
                plan,
                [node],
                job_dir / "user_logs",
                stream=sys.stdout.buffer,
                grace_period=grace,
                timeout=spec.limits.timeout,
                base_env=rank_base_env(os.environ),
                launch_id=launch_id,
                signals=stop_signals,
                # Parameter servers wait for every node's training tasks; the actors relay the markers.
                peers=FolderPeers(workdir / PEERS, node, len(plan.nodes)),
            )
        finally:
            watchdog.release()
        outcome = outcome_of(result, request, started_at, time.time())
        write_json(workdir / OUTCOME, outcome)
    print(f"distrun node agent: node {node}: {outcome['status']} {outcome['reason']}", file=sys.stderr, flush=True)
    return 0 if outcome["status"] == "Completed" else 1


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
