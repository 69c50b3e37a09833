"""`python -m distrun.backends.kubernetes.pod_agent`: the entry point of distrun's node agent in a pod.

Each pod of a job runs this, from the zip of distrun's modules its job's ConfigMap carries
(`agent_zip`: the image needs python3 >= 3.10, not distrun); it imports only the standard library
and distrun's own modules. It unpacks the job's files from the
ConfigMap mounted at `<work_dir>/files` into the pod's job folder, learns the node's
`NodeFacts` from the pod (node rank = the role's first node, DISTRUN_K8S_FIRST_NODE, plus
JOB_COMPLETION_INDEX, which Kubernetes sets in each pod of an Indexed Job; hosts and ports from
the job's placement) and hands them to the engine-free node agent (`distrun.agent.node.
run_node`): per-rank logs in `<work_dir>/<job>/user_logs` inside the pod, prefixed lines on
stdout, which is the pod's log. It reports the node's outcome on a `PodOutcomeChannel`, where
the client reads it without a shared filesystem (after the outputs the processes wrote, sent
back in the same log: `output_records`):

- the termination message (`<work_dir>/termination-log`, compact, Kubernetes keeps 4 KiB);
- a final log record, one line `distrun-outcome: {json}` with every process.

Exit status: 0 completed, 1 failed, 143 stopped (Kubernetes sends SIGTERM when it ends a pod);
a failed rank's own exit code when it is in limits.no_restart_exit_codes, so the Job's
podFailurePolicy fails the JobSet at once instead of restarting it.

MPI: a worker pod's agent runs no plan node; it starts what the launcher pod's mpirun asks for
(its daemon, `orted`, which starts the ranks) through distrun's remote start, on port
DISTRUN_K8S_REMOTE_START_PORT + its node rank, for requests that carry the token from the job's
Secret. The launcher's agent gives mpirun (distrun's or the job's own) that remote start as its
remote shell, so no SSH server or keys are needed.

Hangs and `distrun job stacks`: node 0's agent serves the pods' exchange on
DISTRUN_K8S_EXCHANGE_PORT, and every other pod's agent that runs processes keeps its job
folder's progress and stack files alike with node 0's (`pod_exchange`), so the hang watchdog
judges the whole job and reaches every pod's agent, as on a shared filesystem.

With restarts (limits.max_restarts, JobSet only), DISTRUN_K8S_RESTART_ATTEMPT is the JobSet
restart the pod belongs to (its `jobset.sigs.k8s.io/restart-attempt` label, through the downward
API): every process sees it as DISTRUN_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.backends.kubernetes.pod_contract import OUTCOME_MARK

if TYPE_CHECKING:
    from distrun.agent.node_facts import NodeFacts, NodeOutcome
    from distrun.backends.kubernetes.pod_exchange import ExchangeHub, ExchangeLink
    from distrun.plan.model import LaunchPlan, Placement, ProcessSpec
    from distrun.restarts.policy import RestartPolicy

TERMINATION_LIMIT = 4000  # Kubernetes truncates termination messages at 4096 bytes
EXIT_FAILED = 1
ENV_PREFIX = "DISTRUN_K8S_"


class PodOutcomeChannel:
    """A pod's `OutcomeChannel`: its termination message and a final log record.

    No pod reads another's: `outcomes` is empty, and "main work done" markers are not shared,
    so parameter servers (and workers under a chief) serve until Kubernetes deletes their pod,
    which JobSet's successPolicy (or the distrun client, with Indexed Jobs) does once the
    training pods have completed.
    """

    def __init__(self, work_dir: Path, pod: str, node: str, job_dir: Path | None = None) -> None:
        self.work_dir = work_dir
        self.pod = pod
        self.node = node
        self.job_dir = job_dir

    def publish(self, outcome: NodeOutcome) -> None:
        # The outputs first: once the client reads the outcome, the outputs are in the job folder.
        self.send_outputs()
        data = outcome.to_dict()
        data["pod"], data["node"] = self.pod, self.node
        for proc in data.get("processes") or []:
            proc["pod"], proc["host"] = self.pod, self.node
        root = data.get("root_cause")
        if root and root.get("node_rank") in (None, outcome.node_rank):
            root["pod"], root["host"] = self.pod, self.node
        try:
            (self.work_dir / "termination-log").write_text(compact(data), encoding="utf-8")
        except OSError as exc:  # the log record below still carries it
            print(f"distrun pod agent: could not write the termination message: {exc}", file=sys.stderr, flush=True)
        sys.stdout.write(OUTCOME_MARK + json.dumps(data, default=str) + "\n")
        sys.stdout.flush()

    def send_outputs(self) -> None:
        """What this pod's processes wrote to the named outputs, ./outputs and ./logs, as log records."""
        from distrun.agent.output_archive import pack_outputs
        from distrun.backends.kubernetes.output_records import output_records

        if self.job_dir is None or not self.job_dir.is_dir():
            return  # the agent failed before the job's files were unpacked: nothing was written
        try:
            records = output_records(pack_outputs(self.job_dir))
        except OSError as exc:
            print(f"distrun pod agent: could not pack the outputs: {exc}", file=sys.stderr, flush=True)
            return
        for record in records:
            sys.stdout.write(record + "\n")
        sys.stdout.flush()

    def outcomes(self, node_ranks: Iterable[int] | None = None) -> dict[int, NodeOutcome]:
        return {}

    def set_marker(self, marker: str, node_rank: int) -> None:
        pass

    def marked(self, marker: str) -> set[int]:
        return set()


def compact(outcome: Mapping[str, Any], limit: int = TERMINATION_LIMIT) -> str:
    """The outcome without its process list, the traceback shortened until it fits `limit` bytes."""
    small = {k: v for k, v in outcome.items() if k != "processes"}
    root = dict(small.get("root_cause") or {})
    small["root_cause"] = root or None
    text = json.dumps(small, default=str)
    while len(text.encode()) > limit and root.get("traceback"):
        tb = str(root["traceback"])
        root["traceback"] = "..." + tb[len(tb) // 2 :] if len(tb) > 64 else ""
        text = json.dumps(small, default=str)
    if len(text.encode()) > limit:
        small["reason"] = str(small.get("reason", ""))[:500]
        small["root_cause"] = None
        text = json.dumps(small, default=str)
    return text


def node_rank_from(env: Mapping[str, str]) -> int:
    from distrun.core.errors import DistrunError

    index, first = env.get("JOB_COMPLETION_INDEX", ""), env.get("DISTRUN_K8S_FIRST_NODE", "")
    if not index.isdigit() or not first.isdigit():
        raise DistrunError(
            "not inside a distrun pod: JOB_COMPLETION_INDEX or DISTRUN_K8S_FIRST_NODE is not set",
            "the Kubernetes backend starts this agent in the pods of an Indexed Job; it is not run by hand",
        )
    return int(first) + int(index)


def pod_facts(env: Mapping[str, str], where: Placement, node_rank: int, job_dir: Path) -> NodeFacts:
    """This pod's facts: the plan's hosts are the pods' stable DNS names, their first label the hostnames."""
    from distrun.agent.node_facts import NodeFacts
    from distrun.metrics.rank_token import with_token

    return NodeFacts(
        node_rank=node_rank,
        node_names=tuple(host.split(".", 1)[0] for host in where.hosts),
        addresses=where.hosts,
        master_port=where.master_port,
        task_ports=where.task_ports,
        job_dir=job_dir,
        # The ranks' MLflow token comes from the job's Secret (manifests.MLFLOW_TOKEN_VARIABLE).
        base_env=with_token(
            {k: v for k, v in env.items() if not k.startswith(ENV_PREFIX)}, env.get(f"{ENV_PREFIX}MLFLOW_TOKEN")
        ),
        engine="Kubernetes",
        engine_job_id=env.get(f"{ENV_PREFIX}POD_NAME", ""),
    )


def restart_attempt(env: Mapping[str, str]) -> int:
    """The JobSet restart this pod belongs to; 0 without one (first attempt, or Indexed Jobs)."""
    value = env.get(f"{ENV_PREFIX}RESTART_ATTEMPT", "")
    return int(value) if value.isdigit() else 0


def with_restart_count(plan: LaunchPlan, attempt: int) -> LaunchPlan:
    """The plan with every process's restart variables set to `attempt` (the job files say 0)."""
    import dataclasses

    from distrun.restarts.policy import restart_env

    if attempt == 0:
        return plan
    extra = restart_env(attempt)
    nodes = tuple(
        dataclasses.replace(node, processes=tuple(_with_env(p, extra) for p in node.processes)) for node in plan.nodes
    )
    return dataclasses.replace(plan, nodes=nodes)


def _with_env(proc: ProcessSpec, extra: Mapping[str, str]) -> ProcessSpec:
    import dataclasses

    return dataclasses.replace(proc, env={**proc.env, **extra})


def pod_exit_code(outcome: NodeOutcome, restarts: RestartPolicy) -> int:
    """The agent's exit status; a failed rank's own code when it is one that must not be restarted."""
    from distrun.agent.node import exit_code
    from distrun.backends.kubernetes.pod_contract import pod_exit_codes
    from distrun.core.job_status import JobStatus

    code = (outcome.root_cause or {}).get("exit_code")
    if outcome.status == JobStatus.FAILED and code in pod_exit_codes(restarts):
        return int(code)
    return exit_code(outcome)


def unpack_job(work: Path, job_dir: Path, env: Mapping[str, str]) -> None:
    """The job's files from the ConfigMap into the pod's job folder, as prepare_job lays them out."""
    from distrun.backends.kubernetes import bundle
    from distrun.backends.kubernetes.pod_contract import BUNDLE_KEY, FILES_DIR

    bundle.unpack((work / FILES_DIR / BUNDLE_KEY).read_bytes(), job_dir)
    code_in_image = env.get(f"{ENV_PREFIX}CODE_IN_IMAGE")
    if code_in_image and not (job_dir / "code").exists():
        (job_dir / "code").symlink_to(code_in_image)
    for sub in ("code", "user_logs", "system_logs", "named-outputs"):
        (job_dir / sub).mkdir(exist_ok=True)


def remote_start_hosts(hosts: Iterable[str], port_base: int) -> dict[str, str]:
    """mpirun's hosts (the worker pods' DNS names, node rank order) -> where their agents listen."""
    return {host: f"{host}:{port_base + rank}" for rank, host in enumerate(hosts)}


def pod_folders(env: Mapping[str, str]) -> tuple[Path, Path]:
    """The pod's work folder (volumes, termination log) and its job folder."""
    work = Path(env.get(f"{ENV_PREFIX}WORK_DIR", "/distrun"))
    return work, Path(env.get(f"{ENV_PREFIX}JOB_DIR") or work / "job")


def run_pod(env: Mapping[str, str], channel: PodOutcomeChannel) -> int:
    from distrun.agent.node import node_plan, note_stop_requests, read_job, run_node
    from distrun.backends.kubernetes.pod_contract import PLACEMENT_FILE, placement_from

    stop_requested = note_stop_requests()
    work, job_dir = pod_folders(env)
    node_rank = node_rank_from(env)
    unpack_job(work, job_dir, env)
    port_base = env.get(f"{ENV_PREFIX}REMOTE_START_PORT", "")
    role = env.get(f"{ENV_PREFIX}ROLE", "")
    if port_base.isdigit() and role != "launcher":
        return serve_remote_starts(env, job_dir, int(port_base) + node_rank, stop_requested)
    job = read_job(job_dir)  # plain data: job.json was validated when the job was submitted
    for name in job.bindings.outputs:
        (job_dir / "named-outputs" / name).mkdir(parents=True, exist_ok=True)
    where = placement_from(json.loads((job_dir / PLACEMENT_FILE).read_text(encoding="utf-8")))
    facts = pod_facts(env, where, node_rank, job_dir)
    if port_base.isdigit():
        import dataclasses

        from distrun.agent.remote_start import client_env

        hosts = remote_start_hosts(where.hosts, int(port_base))
        remote = client_env(hosts, _token(env), sys.executable)
        facts = dataclasses.replace(facts, base_env={**facts.base_env, **remote})
    attempt = restart_attempt(env)
    adapt = functools.partial(with_restart_count, attempt=attempt)
    exchange = start_exchange(env, job_dir, node_plan(job, facts, adapt), node_rank, where.hosts[0])
    try:
        outcome = run_node(
            facts,
            channel,
            job,
            adapt_plan=adapt,
            stop_requested=stop_requested,
            # Relayed through node 0's exchange; without one, a pod judges a hang on its own ranks.
            peers_share_job_folder=exchange is not None,
        )
    finally:
        if exchange is not None:
            exchange.close()
    return pod_exit_code(outcome, job.plan_job.restarts)


def start_exchange(
    env: Mapping[str, str], job_dir: Path, plan: LaunchPlan, node_rank: int, first_host: str
) -> ExchangeHub | ExchangeLink | None:
    """Node 0: the exchange's hub; a pod that runs processes: its link to node 0 (`pod_exchange`).

    None where the job's objects give no exchange port (a job submitted by an earlier distrun).
    """
    from distrun.backends.kubernetes.pod_exchange import ExchangeHub, ExchangeLink

    port = env.get(f"{ENV_PREFIX}EXCHANGE_PORT", "")
    token = env.get(f"{ENV_PREFIX}EXCHANGE_TOKEN", "")
    if not port.isdigit() or not token:
        return None
    working = [node for node in plan.nodes if node.processes]
    if node_rank == 0:
        processes = sum(len(node.processes) for node in working)
        try:
            return ExchangeHub(job_dir, token, int(port), {node.node_rank for node in working}, processes)
        except OSError as exc:  # the job still runs; its hangs are judged pod by pod, as said here
            print(
                f"distrun pod agent: cannot serve the pods' exchange on port {port} ({exc}): each pod judges "
                "a hang on its own ranks, and `distrun job stacks` cannot reach this job",
                file=sys.stderr,
                flush=True,
            )
            return None
    if any(node.node_rank == node_rank for node in working):
        return ExchangeLink(job_dir, token, first_host, int(port), node_rank)
    return None


def _token(env: Mapping[str, str]) -> str:
    from distrun.core.errors import DistrunError

    token = env.get(f"{ENV_PREFIX}REMOTE_START_TOKEN", "")
    if not token:
        raise DistrunError(
            "DISTRUN_K8S_REMOTE_START_TOKEN is empty: the job's Secret did not reach the pod",
            "check that the Secret <job>-token exists in the namespace and the pod may read it",
        )
    return token


def serve_remote_starts(env: Mapping[str, str], job_dir: Path, port: int, stop_requested: list[int]) -> int:
    """An MPI worker pod: start what the launcher's mpirun asks for until Kubernetes ends the pod.

    What it starts carries the launch marker: if this agent dies, its watchdog ends them, as a
    node agent's does its ranks; a SIGTERM (the launcher is done, or the job is stopped) closes
    the server, which kills every process group it started.
    """
    import time

    from distrun.agent.process_tree import LAUNCH_MARKER
    from distrun.agent.remote_start import RemoteStartServer
    from distrun.agent.watchdog import Watchdog

    token = _token(env)
    launch_id = f"{job_dir.name}-k8s-{env.get(f'{ENV_PREFIX}POD_NAME', '')}"
    watchdog = Watchdog.start(launch_id, lambda: None)  # before any thread: it forks
    base = {k: v for k, v in env.items() if not k.startswith(ENV_PREFIX)}
    try:
        server = RemoteStartServer(token, port, env={**base, LAUNCH_MARKER: launch_id}, cwd=str(job_dir / "code"))
    except OSError:
        watchdog.release()
        raise
    print(f"distrun pod agent: starting mpirun's daemons on request (port {port})", flush=True)
    try:
        while not stop_requested:
            time.sleep(0.2)
    finally:
        server.close()
        watchdog.release()
    return 0


def main() -> int:
    from distrun.agent.node import setup_failure_outcome
    from distrun.core.errors import DistrunError
    from distrun.core.module_command import distrun_root

    env = dict(os.environ)
    print(
        f"distrun pod agent: Python {sys.version.split()[0]} ({sys.executable}), distrun from {distrun_root()}",
        flush=True,
    )
    pod = env.get(f"{ENV_PREFIX}POD_NAME", "")
    work, job_dir = pod_folders(env)
    channel = PodOutcomeChannel(work, pod, env.get(f"{ENV_PREFIX}NODE_NAME", ""), job_dir)
    try:
        return run_pod(env, channel)
    except Exception as exc:  # whatever stops the agent, the client must read why
        message = exc.render() if isinstance(exc, DistrunError) else f"{type(exc).__name__}: {exc}"
        print(f"distrun pod agent: error: {message}", file=sys.stderr, flush=True)
        index = env.get("JOB_COMPLETION_INDEX", "")
        first = env.get(f"{ENV_PREFIX}FIRST_NODE", "")
        rank = int(first) + int(index) if index.isdigit() and first.isdigit() else -1
        channel.publish(setup_failure_outcome(rank, pod, pod, message))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
