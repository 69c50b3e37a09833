"""`python -m distrun.backends.ray.node_agent WORKDIR`: one node of a job on Ray, run by distrun's agent.

The Ray actor of node k (`distrun.backends.ray.actor`) fills WORKDIR on its Ray node and starts
this process: `request.json` (the job, its bindings, every node's address, the ports chosen on
node 0) and `<job name>/` (the code snapshot and downloaded inputs, shipped from the machine
that runs `distrun`: no shared filesystem is assumed). It turns the request into `NodeFacts`
and runs distrun's engine-free node agent (`distrun.agent.node.run_node`), which publishes the
node's `NodeOutcome` on a node-local outcome channel (`channel/`); the actor hands it back, and
relays the other nodes' "main work done" markers into the same folder. Per-rank logs go to
`<job name>/user_logs/`, the prefixed stream to stdout; the actor streams both back.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REQUEST = "request.json"
CHANNEL = "channel"  # the node's outcome channel: node_NN.json, main_done_NN markers (relayed by the actor)


def job_folder(workdir: Path, job_name: str) -> Path:
    """This node's copy of the job folder (named after the job, as the plan's run id is)."""
    return workdir / job_name


def outcome_path(workdir: Path, node_rank: int) -> Path:
    from distrun.store.layout import NodeChannelPaths

    return NodeChannelPaths(workdir / CHANNEL).outcome(node_rank)


def marker_path(workdir: Path, node_rank: int) -> Path:
    from distrun.agent.outcome_channel import MAIN_WORK_DONE
    from distrun.store.layout import NodeChannelPaths

    return NodeChannelPaths(workdir / CHANNEL).marker(MAIN_WORK_DONE, node_rank)


def rebased(bindings: Mapping[str, Mapping[str, Any]], old_root: str, new_root: str) -> dict[str, dict[str, Any]]:
    """Bindings whose paths point into the driver's job folder, pointed into this node's copy.

    Only text values are paths; the rest (each input's source, shown by `distrun plan`) is
    passed on as it is.
    """
    old = old_root.rstrip("/")

    def move(value: Any) -> Any:
        if isinstance(value, str) and (value == old or value.startswith(old + "/")):
            return new_root.rstrip("/") + value[len(old) :]
        return value

    return {group: {k: move(v) for k, v in values.items()} for group, values in bindings.items()}


def rank_base_env(env: Mapping[str, str]) -> dict[str, str]:
    """What the ranks inherit: the Ray node's environment without Ray's own per-worker variables.

    A Ray worker's RAY_* variables describe that worker (its job id, raylet, address); a rank,
    or a Ray cluster a `type: ray` job starts, must not take them as its own.
    """
    return {k: v for k, v in env.items() if not k.startswith("RAY_")}


def with_cluster(env: dict[str, str], cluster: str | None) -> dict[str, str]:
    """The ranks' environment with the address of the Ray cluster they run in, under distrun's own
    name (not RAY_ADDRESS: a `type: ray` job's rank starts a cluster of its own)."""
    from distrun.spec.automl_models import RAY_CLUSTER_VARIABLE

    return {**env, RAY_CLUSTER_VARIABLE: cluster} if cluster else env


def node_facts(request: Mapping[str, Any], workdir: Path, env: Mapping[str, str]) -> Any:
    from distrun.agent.node_facts import NodeFacts
    from distrun.metrics.rank_token import with_token

    return NodeFacts(
        node_rank=int(request["node_rank"]),
        node_names=tuple(request["names"]),
        addresses=tuple(request["hosts"]),
        master_port=int(request["master_port"]),
        task_ports=tuple(int(p) for p in request["task_ports"]),
        job_dir=job_folder(workdir, request["job_name"]),
        base_env=with_token(
            with_cluster(rank_base_env(env), request.get("ray_cluster")), request.get("tracking_token")
        ),
        engine="Ray",
        engine_job_id=str(request["engine_job_id"]),
    )


def run(workdir: Path) -> int:
    from distrun.agent.node import exit_code, note_stop_requests, read_job, run_node
    from distrun.agent.outcome_channel import FolderOutcomeChannel
    from distrun.agent.watchdog import Watchdog
    from distrun.core.file_modes import write_file
    from distrun.store.layout import NodeChannelPaths

    stop_requested = note_stop_requests()
    request = json.loads((workdir / REQUEST).read_text(encoding="utf-8"))
    facts = node_facts(request, workdir, os.environ)
    # The node's copy of the job folder: job.json as shipped, bindings pointed into the copy.
    write_file(facts.job_dir / "job.json", json.dumps(request["spec"]).encode("utf-8"))
    bindings = rebased(request["bindings"], request["driver_job_dir"], str(facts.job_dir))
    write_file(facts.job_dir / "bindings.json", json.dumps(bindings).encode("utf-8"))
    channel = FolderOutcomeChannel(NodeChannelPaths(workdir / CHANNEL), facts.node_count)
    layer = bindings.get("python_layer") or {}
    problem = make_python_layer(layer) if layer else None
    if not layer:
        facts, problem = with_own_layer(facts)
    if problem is not None:
        from distrun.agent.node import setup_failure_outcome

        print(f"distrun node agent: {problem}", file=sys.stderr, flush=True)
        node_name = facts.node_names[facts.node_rank]
        channel.publish(setup_failure_outcome(facts.node_rank, node_name, facts.engine_job_id, problem))
        return 1
    # The launch id run_node gives the ranks: the watchdog kills what carries it if this process dies.
    launch_id = f"{facts.job_dir.name}-{facts.engine.lower()}{facts.engine_job_id}-node{facts.node_rank}"
    watchdog = Watchdog.start(launch_id, lambda: None)  # before any thread: it forks
    server = None
    try:
        if request.get("remote_start"):
            facts, server = serve_remote_starts(facts, request["remote_start"], launch_id)
        outcome = run_node(facts, channel, read_job(facts.job_dir), stop_requested=stop_requested)
    finally:
        if server is not None:
            server.close()
        watchdog.release()
    return exit_code(outcome)


def make_python_layer(layer: Mapping[str, str]) -> str | None:
    """The job's writable layer over its built environment, in this node's copy of the job
    folder (the driver ships no layer: each node's ranks install into their own); what stops
    it, in words, when this node cannot make it."""
    if not layer:
        return None
    from distrun.environments.layer import make_layer

    try:
        make_layer(Path(layer["built"]), Path(layer["layer"]))
    except OSError as exc:
        return (
            f"cannot use the job's environment {layer['built']} on this node: {exc}; "
            "a built environment must be at the same path on every Ray node (give them one DISTRUN_HOME "
            "on a shared filesystem), or run the job on local or Slurm compute"
        )
    return None


def with_own_layer(facts: Any) -> tuple[Any, str | None]:
    """A job whose ranks run in this node's own Python (it names no built environment) gets a
    layer of its own over it in this node's copy of the job folder, first on the ranks' PATH, as
    on local compute: its `pip install` never changes the Ray node's Python nor what a later job
    gets there. What stops it, in words, when this node cannot make it."""
    from dataclasses import replace

    from distrun.environments.own_layer import own_layer
    from distrun.store.layout import JobFolder

    try:
        variables, _ = own_layer(JobFolder(facts.job_dir).python_layer, materialize=True)
    except OSError as exc:
        return facts, f"cannot make the job's layer over this node's Python ({sys.executable}): {exc}"
    return replace(facts, base_env={**facts.base_env, **variables}), None


def serve_remote_starts(facts: Any, remote: Mapping[str, Any], launch_id: str) -> tuple[Any, Any]:
    """An MPI job: this node's agent starts what mpirun on node 0 asks for (its daemon, `orted`).

    Every node listens on its own address and port (chosen free there by the driver) for requests
    carrying the job's token; what it starts carries the launch marker, so this agent's sweep
    and watchdog end it like a rank. Node 0's launcher gets mpirun's remote shell settings.
    """
    from dataclasses import replace

    from distrun.agent.process_tree import LAUNCH_MARKER
    from distrun.agent.remote_start import RemoteStartServer, client_env

    ports = [int(p) for p in remote["ports"]]
    env = {**facts.base_env, LAUNCH_MARKER: launch_id}
    try:
        server = RemoteStartServer(
            str(remote["token"]), ports[facts.node_rank], host=facts.address, env=env, cwd=str(facts.job_dir / "code")
        )
    except OSError as exc:
        # Two Ray nodes on one address (one machine): mpirun counts them as one host and starts
        # their ranks itself, so this node's remote start is never asked for.
        print(f"distrun node agent: no remote start on {facts.address}:{ports[facts.node_rank]}: {exc}", flush=True)
        server = None
    if facts.node_rank == 0:
        hosts = {address: f"{address}:{port}" for address, port in zip(facts.addresses, ports, strict=True)}
        facts = replace(facts, base_env={**facts.base_env, **client_env(hosts, str(remote["token"]), sys.executable)})
    return facts, server


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
