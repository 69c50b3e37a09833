"""B5 scale of the plan, and of the local agent.

- Plan and render a 1024-node x 8-process PyTorch job, and a TensorFlow job with 8192
  workers, in a fresh process (workloads/plan_scale.py): time and peak memory. Also the
  PyTorch one end to end, `distrun plan job.yml --output json` on local compute.
- The local agent starting 128 ranks of `sleep 5`: time from the command's start until all
  are running (the job record's started_at, taken once the last process is started), with a
  bare shell loop starting the same processes as the floor.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
from pathlib import Path

from benchmarks.bench import Bench
from benchmarks.harness import Method, alternate
from benchmarks.profiling import cprofile
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "scale of the plan and of the local agent"
MAX_PLAN_S = 1.0  # the targets for the 8192-rank plan
MAX_PLAN_MB = 200.0
FAR_OVER = 5  # a plan this many times over the time target is measured once: its cost is plain
MEMORY_CAP = 8 << 30  # a planner that needs more than this is stopped, not allowed to take the machine
PLAN_METRICS = (
    "plan+render s",
    "plan+render CPU s",  # on a quiet machine about the wall time; a busy one shows the difference
    "plan s",
    "render s",
    "peak RSS MB",
    "peak RSS before MB",
    "rendered MB",
)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _plan_once(bench: Bench, job: str, nodes: int) -> dict[str, object]:
    return run_workload(bench, ["plan_scale.py", job, str(nodes)], bench.distrun_env())


def run_workload(bench: Bench, args: list[str], env: dict[str, str], cwd: Path | None = None) -> dict[str, object]:
    """A workload that prints its figures as a last JSON line, in a fresh process under a memory cap.

    Returns those figures, or {"failed": "exit N: <its last line of stderr>"}.
    """
    proc = subprocess.run(
        [bench.python, bench.workload(args[0]), *args[1:]],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_memory,
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return {"failed": f"exit {proc.returncode}: {tail[0]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _plan_case(bench: Bench, result: CaseResult, label: str, job: str, nodes: int, reps: int) -> None:
    samples: dict[str, list[float]] = {}
    for rep in range(reps):
        found = _plan_once(bench, job, nodes)
        if "skipped" in found or "failed" in found:
            why = found.get("skipped") or found.get("failed")
            note = f"{label}: not measured: {why}"
            bench.log(f"    {note}")
            result.notes.append(note)
            return
        bench.log(f"    {rep + 1}/{reps} {label}: " + ", ".join(f"{k} {found[k]:.3g}" for k in PLAN_METRICS))  # type: ignore[str-format]
        for metric in PLAN_METRICS:
            samples.setdefault(metric, []).append(float(found[metric]))  # type: ignore[arg-type]
        processes = found["processes"]
        if float(found["plan+render s"]) > FAR_OVER * MAX_PLAN_S:  # type: ignore[arg-type]
            note = f"{label}: one sample only, {FAR_OVER:g}x over the time target"
            bench.log(f"    {note}")
            result.notes.append(note)
            break
    result.reps[label] = len(samples["plan+render s"])
    for metric in PLAN_METRICS:
        result.rows.append(Row(f"{label} ({processes} processes)", DISTRUN, metric, samples[metric]))
    worst_s = max(samples["plan+render s"])
    worst_mb = max(samples["peak RSS MB"])
    result.targets.append(
        Target(
            "B5",
            f"{label}: plan and render in under {MAX_PLAN_S:g} s and {MAX_PLAN_MB:g} MB",
            f"{worst_s:.2f} s, peak RSS {worst_mb:.0f} MB ({worst_mb - max(samples['peak RSS before MB']):.0f} MB"
            " over the interpreter with distrun imported)",
            worst_s < MAX_PLAN_S and worst_mb < MAX_PLAN_MB,
        )
    )


def _cli_plan(bench: Bench, result: CaseResult, nodes: int, per_node: int, reps: int) -> None:
    job = bench.job_file(f"{bench.python} train.py", nodes=nodes, per_node=per_node)
    walls, rss = [], []
    for rep in range(reps):
        peak = bench.folder("b5-cli-rss") / "peak"
        argv = [*peak_rss_wrapper(bench, peak), *bench.distrun("plan", str(job), "--output", "json")]
        run, _ = bench.run("b5-cli-plan", [argv], bench.distrun_env())
        walls.append(run.wall)
        rss.append(float(peak.read_text()))
        bench.log(f"    {rep + 1}/{reps} distrun plan -o json: wall {run.wall:.3g} s, peak RSS {rss[-1]:.0f} MB")
    case = f"`distrun plan -o json`, {nodes} x {per_node} PyTorch"
    result.rows.append(Row(case, DISTRUN, "wall s", walls))
    result.rows.append(Row(case, DISTRUN, "peak RSS MB", rss))


def peak_rss_wrapper(bench: Bench, out: Path) -> list[str]:
    """Prefix for an argv that writes the command's own peak RSS (MB) to `out`."""
    return [bench.python, "-S", "-I", bench.workload("peak_rss.py"), str(out), "--"]


def _job_name(stream: bytes) -> str:
    for line in stream.splitlines():
        if line.startswith(b"RunId: "):
            return line.split()[1].decode()
    raise RuntimeError("no RunId in the stream")


def _agent_case(bench: Bench, result: CaseResult) -> None:
    ranks = bench.sizes.agent_ranks
    sleep = bench.sizes.agent_sleep
    job = bench.job_file(f"sleep {sleep:g}", per_node=ranks)
    db = bench.scratch / "distrun-home" / "jobs.db"
    running = "to all running s"

    def distrun() -> dict[str, float]:
        run, output = bench.run("b5-agent", [bench.distrun("run", str(job))], bench.distrun_env())
        with sqlite3.connect(db) as conn:
            (started_at,) = conn.execute(
                "SELECT started_at FROM jobs WHERE name = ?", (_job_name(output.read_bytes()),)
            ).fetchone()
        return {running: started_at - run.started, "wall s": run.wall}

    def loop() -> dict[str, float]:
        out = bench.folder("b5-loop")
        script = f'for i in $(seq {ranks}); do sleep {sleep:g} & done; date +%s.%N > "{out}/started"; wait'
        run, _ = bench.run("b5-loop", [["bash", "-c", script]], bench.base_env())
        return {running: float((out / "started").read_text()) - run.started, "wall s": run.wall}

    methods = [Method(DISTRUN, distrun), Method("bare loop", loop)]
    reps = bench.reps(2)
    case = f"local agent, {ranks} ranks of sleep {sleep:g}"
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        result.reps[f"{method.name} (agent)"] = reps
        for metric in (running, "wall s"):
            result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B5", TITLE)
    sizes = bench.sizes
    reps = bench.reps(3)
    nodes = sizes.plan_nodes
    pytorch = bench.job_file(f"{bench.python} train.py", nodes=nodes, per_node=sizes.plan_per_node)
    bench.log(f"  B5 plan {nodes} x {sizes.plan_per_node} PyTorch")
    _plan_case(bench, result, f"PyTorch {nodes} nodes x {sizes.plan_per_node}", str(pytorch), nodes, reps)
    tensorflow = bench.job_file(
        f"{bench.python} train.py", nodes=nodes, distribution={"type": "tensorflow", "worker_count": sizes.tf_workers}
    )
    if any(t.met is False for t in result.targets):
        bench.log("  B5 profiling distrun plan -o json (a target was missed)")
        profile = cprofile(bench, ["plan", str(pytorch), "--output", "json"], bench.distrun_env())
        result.profiles.append(("`distrun plan --output json` of the PyTorch job: cProfile, wall clock", profile))
    bench.log(f"  B5 plan TensorFlow, {sizes.tf_workers} workers on {nodes} nodes")
    missed = sum(t.met is False for t in result.targets)
    _plan_case(bench, result, f"TensorFlow {sizes.tf_workers} workers on {nodes} nodes", str(tensorflow), nodes, reps)
    if sum(t.met is False for t in result.targets) > missed:
        bench.log("  B5 profiling the TensorFlow plan (its target was missed)")
        args = [str(tensorflow), str(nodes)]
        profile = cprofile(bench, args, bench.distrun_env(), script=bench.workload("plan_scale.py"))
        result.profiles.append(("planning and rendering the TensorFlow job: cProfile, wall clock", profile))
    bench.log("  B5 distrun plan -o json (CLI, local compute)")
    _cli_plan(bench, result, nodes, sizes.plan_per_node, reps)
    bench.log(f"  B5 local agent, {sizes.agent_ranks} ranks")
    _agent_case(bench, result)
    result.notes.append(
        "plan cases run in a fresh process each (workloads/plan_scale.py); hosts are named node-0000, ... as a "
        "cluster backend would give them; the JSON is what `distrun plan --output json` prints"
    )
    return result
