"""`python -m distrun.backends.kubernetes.pod_agent`: the distrun node agent of one pod.

Each pod of a job runs this (the image must have distrun). It unpacks the job's files from
the ConfigMap mounted at `<work_dir>/files`, rebuilds the job's plan, runs its own node's
processes with the gang supervisor every compute uses (per-rank logs in `<work_dir>/<job>/
user_logs` inside the pod, prefixed lines on stdout, which is the pod's log), and reports
its outcome where the client can read it without a shared filesystem:

- the termination message (`<work_dir>/termination-log`, compact, Kubernetes keeps 4 KiB);
- a final log record, one line `distrun-outcome: {json}` with every process.

Node rank = the role's first node (DISTRUN_K8S_FIRST_NODE) + JOB_COMPLETION_INDEX, which
Kubernetes sets in each pod of an Indexed Job. Exit status: 0 completed, 1 failed, 143
stopped (Kubernetes sends SIGTERM when it ends a pod).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distrun.backends.kubernetes.manifests import OUTCOME_MARK

TERMINATION_LIMIT = 4000  # Kubernetes truncates termination messages at 4096 bytes
EXIT_FAILED = 1
EXIT_CANCELED = 143


class StoppedByKubernetes:
    """The job-wide "main work done" for a pod: never known here.

    A pod of parameter servers (or of workers under a chief) runs only auxiliary processes; they
    serve until the job's training pods have completed, which JobSet's successPolicy (or the
    distrun client, with Indexed Jobs) answers by deleting this pod: SIGTERM ends them.
    """

    def mark_done(self) -> None:
        pass

    def all_done(self) -> bool:
        return False


def node_rank_from(env: Mapping[str, str]) -> int:
    from distrun.errors import DistrunError

    index, first = env.get("JOB_COMPLETION_INDEX", ""), env.get("DISTRUN_K8S_FIRST_NODE", "")
    if not index.isdigit() or not first.isdigit():
        raise DistrunError(
            "not inside a distrun pod: JOB_COMPLETION_INDEX or DISTRUN_K8S_FIRST_NODE is not set",
            "the Kubernetes backend starts this agent in the pods of an Indexed Job; it is not run by hand",
        )
    return int(first) + int(index)


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


def pod_outcome(result: dict[str, Any], node_rank: int, pod: str, node: str, started_at: float) -> dict[str, Any]:
    status, reason, root = result["status"], result["reason"], result["root_cause"]
    failed_at = None
    for proc in result["processes"]:
        proc["host"] = node
        proc["pod"] = pod
    if root is not None:
        root["host"], root["pod"] = node, pod
        if root.get("after_ms") is not None:
            failed_at = started_at + root["after_ms"] / 1000
        if root.get("signal") == "SIGTERM" and not root.get("stopped_by_distrun"):
            status, reason = "Canceled", f"stopped by Kubernetes: {root.get('reason') or 'SIGTERM'}"
    return {
        "node_rank": node_rank,
        "pod": pod,
        "node_name": node,
        "status": status,
        "reason": reason,
        "root_cause": root if status == "Failed" else None,
        "failed_at": failed_at if status == "Failed" else None,
        "started_at": started_at,
        "ended_at": time.time(),
        "processes": result["processes"],
    }


def report(outcome: dict[str, Any], work_dir: Path) -> None:
    try:
        (work_dir / "termination-log").write_text(compact(outcome), encoding="utf-8")
    except OSError as exc:  # the log record below still carries it
        print(f"distrun pod agent: could not write the termination message: {exc}", file=sys.stderr, flush=True)
    sys.stdout.write(OUTCOME_MARK + json.dumps(outcome, default=str) + "\n")
    sys.stdout.flush()


def run_pod(env: Mapping[str, str]) -> int:
    from distrun.agent.gang import run_gang
    from distrun.backends.kubernetes import bundle
    from distrun.backends.kubernetes.manifests import BUNDLE_KEY
    from distrun.backends.kubernetes.render import BINDINGS_FILE, JOB_FILE, PLACEMENT_FILE, placement_from
    from distrun.plan import build_plan
    from distrun.plan.model import Bindings
    from distrun.spec.models import JobSpec

    stop_requested: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop_requested.append(signum))
    work = Path(env.get("DISTRUN_K8S_WORK_DIR", "/distrun"))
    pod = env.get("DISTRUN_K8S_POD_NAME", "")
    node = env.get("DISTRUN_K8S_NODE_NAME", "")
    node_rank = node_rank_from(env)
    job_dir = Path(env.get("DISTRUN_K8S_JOB_DIR") or work / "job")
    started_at = time.time()
    bundle.unpack((work / "files" / BUNDLE_KEY).read_bytes(), job_dir)
    code_in_image = env.get("DISTRUN_K8S_CODE_IN_IMAGE")
    if code_in_image and not (job_dir / "code").exists():
        (job_dir / "code").symlink_to(code_in_image)
    (job_dir / "code").mkdir(exist_ok=True)
    for sub in ("user_logs", "system_logs", "named-outputs"):
        (job_dir / sub).mkdir(exist_ok=True)
    spec = JobSpec.model_validate(json.loads((job_dir / JOB_FILE).read_text(encoding="utf-8")))
    bindings = Bindings(**json.loads((job_dir / BINDINGS_FILE).read_text(encoding="utf-8")))
    for name in spec.outputs:
        (job_dir / "named-outputs" / name).mkdir(parents=True, exist_ok=True)
    where = placement_from(json.loads((job_dir / PLACEMENT_FILE).read_text(encoding="utf-8")))
    plan = build_plan(spec, where, bindings)
    mine = [p.name for n in plan.nodes if n.node_rank == node_rank for p in n.processes]
    print(
        f"distrun pod agent: pod {pod} on {node or '?'}: node {node_rank} of {len(plan.nodes)}, "
        f"{', '.join(mine) or 'no process'}; MASTER_ADDR={plan.master_addr} MASTER_PORT={plan.master_port}",
        flush=True,
    )
    if stop_requested:
        outcome = pod_outcome(
            {
                "status": "Canceled",
                "reason": "stopped by Kubernetes before the processes started",
                "root_cause": None,
                "processes": [],
            },
            node_rank,
            pod,
            node,
            started_at,
        )
    else:
        grace = spec.limits.grace_seconds
        result = run_gang(
            plan,
            [node_rank],
            job_dir / "user_logs",
            stream=sys.stdout.buffer,
            grace_period=grace,
            timeout=spec.limits.timeout,
            base_env={k: v for k, v in env.items() if not k.startswith("DISTRUN_K8S_")},
            launch_id=f"{where.run_id}-pod{node_rank}",
            peers=StoppedByKubernetes(),
        )
        outcome = pod_outcome(result.to_dict(), node_rank, pod, node, started_at)
    report(outcome, work)
    if outcome["status"] == "Completed":
        return 0
    return EXIT_CANCELED if outcome["status"] == "Canceled" else EXIT_FAILED


def main() -> int:
    from distrun.errors import DistrunError

    try:
        return run_pod(dict(os.environ))
    except Exception as exc:  # whatever stops the agent, the client must read why
        message = exc.render() if isinstance(exc, DistrunError) else str(exc)
        print(f"distrun pod agent: error: {message}", file=sys.stderr, flush=True)
        now = time.time()
        pod = os.environ.get("DISTRUN_K8S_POD_NAME", "")
        failure = {
            "status": "Failed",
            "reason": f"the distrun agent in pod {pod} could not start: {message}",
            "root_cause": None,
            "failed_at": now,
            "started_at": now,
            "ended_at": now,
            "pod": pod,
            "processes": [],
        }
        report(failure, Path(os.environ.get("DISTRUN_K8S_WORK_DIR", "/distrun")))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
