"""B7 Slurm: from submission to all ranks running, on a real 2-node cluster on this machine.

distrun (`distrun run --compute <slurm target>`) against a hand-written batch script that does
the same: `sbatch` of `srun` starting 2 x 2 ranks. Every rank writes the time.time() at which
it runs (workloads/rank_started.py); the figure is the last of those minus the command's start.
`sbatch` (a stand-in first on PATH) and the batch script note when they start too, which splits
that figure into the submitting command, Slurm's scheduling and batch launch, and the launch
inside the allocation. The first and last parts are what the launcher itself adds; the targets
compare those, as Slurm's part is the same work for both methods.
Slurm starts a submitted batch job at its scheduler's next pass, once a second here (the
cluster sets `batch_sched_delay=0`; Slurm's default lets a pass wait up to 3 s). Samples that
follow each other at a steady pace would meet that pass at the same phase every time, which
favoured one method by a fixed amount: each sample starts after a random pause of up to one
pass, so both methods meet the pass at every phase alike.
Needs distrun's Slurm backend and the test suite's cluster (`tests/support/clusters/slurm_cluster.py`,
which starts munged, slurmctld and two slurmd); without either the case is skipped, saying why.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench import REPO, Bench, CaseError
from benchmarks.cases.first_collective import read_stamps
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "Slurm: submit to all ranks running"
NODES = 2
PER_NODE = 2
TARGET_NAME = "benchslurm"
RUNNING = "submit to all ranks running s"
# RUNNING in three parts, split where `sbatch` is called (a stand-in on PATH notes it, then runs
# the real one) and where the batch script starts on the first node (its first line notes it:
# distrun's from the target's setup). Before sbatch: the submitting command (distrun's CLI; for
# the hand-written method, nothing). From sbatch to the batch script: Slurm's scheduling pass and
# batch launch, the same work for both methods. From the batch script on: the launch inside the
# allocation (distrun: its ports step, srun of the node agents, the agents; by hand: srun).
BEFORE_SBATCH = "command to sbatch s"
TO_BATCH = "sbatch to batch script s"
IN_ALLOCATION = "batch script to all ranks running s"
# What the launcher itself adds: RUNNING without Slurm's part, which depends on the moment a
# sample meets the scheduler's pass and not on the launcher.
OWN = "launcher's own time s"
SCHEDULER_PASS_S = 1.0
TARGET_GAP_S = 0.3  # the target: within 0.3 s of a hand-written sbatch + srun
BATCH_STAMP = 'date +%s.%N > "$BENCH_OUT/batch_0"'
SBATCH_STAMP = 'date +%s.%N > "$BENCH_OUT/sbatch_0"'
CLUSTER_MODULE = REPO / "tests" / "support" / "clusters" / "slurm_cluster.py"


def _slurm_backend_missing(bench: Bench) -> str | None:
    probe = subprocess.run(
        [bench.python, "-c", "from distrun.backends import backend_for; backend_for('slurm')"],
        env=bench.distrun_env(),
        capture_output=True,
        text=True,
    )
    if probe.returncode == 0:
        return None
    last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
    return f"distrun has no Slurm backend in this build ({last})"


def _start_cluster(bench: Bench) -> Any:
    if not CLUSTER_MODULE.exists():
        raise CaseError(f"no Slurm test cluster ({CLUSTER_MODULE.relative_to(REPO)} is missing)")
    sys.path.insert(0, str(CLUSTER_MODULE.parent.parent))
    try:
        from clusters.slurm_cluster import SlurmCluster, missing_tools  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    missing = missing_tools()
    if missing:
        raise CaseError(f"Slurm is not installed (missing {', '.join(missing)}; scripts/deps installs it)")
    cluster = SlurmCluster(bench.folder("b7-cluster"), node_count=NODES)
    cluster.start()
    return cluster


def _wait_for_stamps(out: Path, count: int, started: float, timeout: float) -> float:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        stamps = read_stamps(out, "start")
        if len(stamps) == count:
            return max(stamps.values()) - started
        time.sleep(0.01)
    raise CaseError(f"only {len(read_stamps(out, 'start'))} of {count} ranks ran within {timeout:g} s")


def _phases(out: Path, started: float, last_rank: float) -> dict[str, float]:
    sbatch, batch = read_stamps(out, "sbatch").get(0), read_stamps(out, "batch").get(0)
    if sbatch is None or batch is None:
        raise CaseError("sbatch or the batch script did not note its start")
    return {
        RUNNING: last_rank - started,
        BEFORE_SBATCH: sbatch - started,
        TO_BATCH: batch - sbatch,
        IN_ALLOCATION: last_rank - batch,
        OWN: (sbatch - started) + (last_rank - batch),
    }


def _queue_empty(env: dict[str, str]) -> bool:
    listing = subprocess.run(["squeue", "--noheader"], env=env, capture_output=True, text=True, timeout=30)
    return listing.returncode == 0 and not listing.stdout.strip()


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B7", TITLE)
    missing = _slurm_backend_missing(bench)
    if missing:
        result.skipped = missing
        return result
    try:
        cluster = _start_cluster(bench)
    except CaseError as exc:
        result.skipped = str(exc)
        return result
    try:
        _measure(bench, result, cluster.env(bench.base_env()), str(cluster.conf_path))
    finally:
        cluster.stop()
    return result


def _stamping_sbatch(bench: Bench, env: dict[str, str]) -> dict[str, str]:
    """`env` with an `sbatch` first on PATH that notes when it is called, then runs the real one."""
    real = shutil.which("sbatch", path=env.get("PATH"))
    if real is None:
        raise CaseError("no sbatch on PATH")
    tools = bench.folder("b7-tools")
    wrapper = tools / "sbatch"
    wrapper.write_text(f'#!/bin/bash\n{SBATCH_STAMP}\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    return {**env, "PATH": f"{tools}{os.pathsep}{env.get('PATH', '')}"}


def _measure(bench: Bench, result: CaseResult, slurm_env: dict[str, str], conf: str) -> None:
    slurm_env = _stamping_sbatch(bench, slurm_env)
    slurm_vars = {k: v for k, v in slurm_env.items() if k.startswith(("SLURM", "MUNGE")) or k == "PATH"}
    denv = {**bench.distrun_env(), **slurm_vars}
    ranks = NODES * PER_NODE
    script = bench.workload("rank_started.py")
    made = subprocess.run(
        bench.distrun(
            "compute",
            "create",
            "--name",
            TARGET_NAME,
            "--type",
            "slurm",
            "--set",
            f"slurm_conf={conf}",
            "--set",
            f"setup={BATCH_STAMP}",
        ),
        env=denv,
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        raise CaseError(f"could not define the Slurm compute target: {made.stdout}{made.stderr}")

    def distrun() -> dict[str, float]:
        out = bench.folder("b7-out")
        time.sleep(random.uniform(0, SCHEDULER_PASS_S))
        job = bench.job_file(f"{bench.python} {script}", nodes=NODES, per_node=PER_NODE, env={"BENCH_OUT": str(out)})
        argv = bench.distrun("run", str(job), "--compute", TARGET_NAME)
        run, _ = bench.run("b7-distrun", [argv], {**denv, "BENCH_OUT": str(out)}, timeout=120)
        stamps = read_stamps(out, "start")
        if len(stamps) != ranks:
            raise CaseError(f"distrun on Slurm: {len(stamps)} of {ranks} ranks ran")
        return {**_phases(out, run.started, max(stamps.values())), "wall s": run.wall}

    def by_hand() -> dict[str, float]:
        out = bench.folder("b7-out")
        batch = out.parent / f"{out.name}.sh"
        batch.write_text(
            "#!/bin/bash\n"
            f"#SBATCH --nodes={NODES}\n#SBATCH --ntasks-per-node={PER_NODE}\n"
            f"#SBATCH --output={out.parent}/{out.name}-slurm-%j.out\n"
            f"export BENCH_OUT={out}\n"
            f"{BATCH_STAMP}\n"
            f"srun --kill-on-bad-exit=1 bash -c 'RANK=$SLURM_PROCID exec {bench.python} {script}'\n"
        )
        time.sleep(random.uniform(0, SCHEDULER_PASS_S))
        started = time.time()
        t0 = time.perf_counter()
        submitted = subprocess.run(
            ["sbatch", "--parsable", str(batch)],
            env={**slurm_env, "BENCH_OUT": str(out)},
            capture_output=True,
            text=True,
        )
        if submitted.returncode != 0:
            raise CaseError(f"sbatch failed: {submitted.stderr.strip()}")
        _wait_for_stamps(out, ranks, started, 120)
        phases = _phases(out, started, max(read_stamps(out, "start").values()))
        give_up = time.monotonic() + 120
        while not _queue_empty(slurm_env) and time.monotonic() < give_up:
            time.sleep(0.05)
        return {**phases, "wall s": time.perf_counter() - t0}

    methods = [Method(DISTRUN, distrun), Method("sbatch + srun", by_hand)]
    reps = bench.reps(9)  # the random pauses need more samples for steady medians
    case = f"{NODES} nodes x {PER_NODE} ranks"
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        result.reps[method.name] = reps
        for metric in (RUNNING, BEFORE_SBATCH, TO_BATCH, IN_ALLOCATION, OWN, "wall s"):
            result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
    result.notes.append(
        "sbatch + srun's wall time runs until squeue is empty (polled every 50 ms); distrun's until it returns"
    )
    _targets(result, case, "sbatch + srun")


def _targets(result: CaseResult, case: str, peer: str) -> None:
    """The node agents' start, and all the launcher adds on the path to the ranks, each within 0.3 s."""
    for metric, goal in (
        (IN_ALLOCATION, "node agents' start (batch script to all ranks running)"),
        (OWN, "launcher's own time (command to sbatch, and batch script to all ranks running)"),
    ):
        mine, theirs = result.row(case, DISTRUN, metric), result.row(case, peer, metric)
        if mine is None or theirs is None:
            continue
        gap = mine.median - theirs.median
        result.targets.append(
            Target(
                "B7",
                f"{goal} within {TARGET_GAP_S:g} s of {peer}",
                f"{mine.median:.3f} s vs {theirs.median:.3f} s (+{gap:.3f} s, medians)",
                gap <= TARGET_GAP_S,
            )
        )
