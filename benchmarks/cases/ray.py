"""B9 Ray: from submission to all ranks running, on a real 2-node Ray cluster on this machine.

distrun (`distrun run --compute <ray target>`) against a hand-written Ray script that does the
same: one STRICT_SPREAD placement group of 2 bundles, one actor per bundle, each starting 2
ranks as processes and waiting for them. Every rank writes the time.time() at which it runs
(workloads/rank_started.py); the figure is the last of those minus the command's start. Both
commands run inside the cluster's network namespace (`tests/support/clusters/ray_cluster.py`, only
`lo`), against the same cluster, alternating. Without Ray, or without the test cluster's
tools, the case is skipped, saying why.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench import REPO, SRC, Bench, CaseError
from benchmarks.cases.first_collective import read_stamps
from benchmarks.cases.slurm import NODES, PER_NODE, RUNNING  # the same job and figure as B7
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "Ray: submit to all ranks running"
TARGET_NAME = "benchray"
CLUSTER_MODULE = REPO / "tests" / "support" / "clusters" / "ray_cluster.py"
BY_HAND = "Ray script by hand"
GOAL_RATIO = 1.2

# The hand-written peer: what a Ray user writes to start the same ranks on the same nodes.
HAND_SCRIPT = """\
import os, subprocess, sys
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

address, python, script, out = sys.argv[1:5]
nodes, per_node = int(sys.argv[5]), int(sys.argv[6])
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
group = placement_group([{"CPU": 1}] * nodes, strategy="STRICT_SPREAD")
ray.get(group.ready(), timeout=120)


@ray.remote(num_cpus=1)
class Node:
    def run(self, node):
        procs = []
        for local in range(per_node):
            env = dict(os.environ, RANK=str(node * per_node + local), BENCH_OUT=out)
            procs.append(subprocess.Popen([python, script], env=env))
        return [p.wait() for p in procs]


actors = [
    Node.options(scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)).remote()
    for i in range(nodes)
]
codes = ray.get([a.run.remote(i) for i, a in enumerate(actors)], timeout=300)
for actor in actors:
    ray.kill(actor)
remove_placement_group(group)
sys.exit(1 if any(c for node in codes for c in node) else 0)
"""


def _cluster_module() -> Any:
    """tests/support/clusters/ray_cluster.py; CaseError (the case is skipped) where Ray or its tools are missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise CaseError('Ray is not installed (pip install "distrun[ray]"; scripts/deps/45-ray.sh)') from None
    if not CLUSTER_MODULE.exists():
        raise CaseError(f"no Ray test cluster ({CLUSTER_MODULE.relative_to(REPO)} is missing)")
    spec = importlib.util.spec_from_file_location("ray_test_cluster", CLUSTER_MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    if module.missing_tools():
        needs = ", ".join(module.missing_tools())
        raise CaseError(f"the Ray test cluster needs {needs} (scripts/deps/45-ray.sh installs them)")
    return module


def run(bench: Bench) -> CaseResult:
    try:
        clusters = _cluster_module()
    except CaseError as exc:
        return CaseResult("B9", TITLE, skipped=str(exc))
    # Short paths: Ray's socket paths must stay below the AF_UNIX limit (not under scratch/...).
    root = Path(tempfile.mkdtemp(prefix="distrun-b8-"))
    cluster = clusters.RayCluster(root, node_count=NODES, cpus_per_node=2, extra_env={"PYTHONPATH": str(SRC)})
    result = CaseResult("B9", TITLE)
    try:
        cluster.start()
        _measure(bench, result, cluster)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    return result


def _wait_for_stamps(out: Path, count: int, what: str) -> dict[int, float]:
    stamps = read_stamps(out, "start")
    if len(stamps) != count:
        raise CaseError(f"{what}: {len(stamps)} of {count} ranks ran")
    return stamps


def _measure(bench: Bench, result: CaseResult, cluster: Any) -> None:
    ranks = NODES * PER_NODE
    script = bench.workload("rank_started.py")
    denv = {**bench.distrun_env(), "RAY_USAGE_STATS_ENABLED": "0"}
    create = bench.distrun(
        "compute", "create", "--name", TARGET_NAME, "--type", "ray", "--set", f"address={cluster.address}"
    )
    bench.run("b8-target", [create], denv)
    hand = bench.folder("b8-script") / "by_hand.py"
    hand.write_text(HAND_SCRIPT)

    def distrun() -> dict[str, float]:
        out = bench.folder("b8-out")
        job = bench.job_file(f"{bench.python} {script}", nodes=NODES, per_node=PER_NODE, env={"BENCH_OUT": str(out)})
        argv = cluster.command(bench.distrun("run", str(job), "--compute", TARGET_NAME))
        run, _ = bench.run("b8-distrun", [argv], denv, timeout=300)
        stamps = _wait_for_stamps(out, ranks, "distrun on Ray")
        return {RUNNING: max(stamps.values()) - run.started, "wall s": run.wall}

    def by_hand() -> dict[str, float]:
        out = bench.folder("b8-out")
        argv = cluster.command(
            [bench.python, str(hand), cluster.address, bench.python, script, str(out), str(NODES), str(PER_NODE)]
        )
        run, _ = bench.run("b8-by-hand", [argv], bench.base_env({"RAY_USAGE_STATS_ENABLED": "0"}), timeout=300)
        stamps = _wait_for_stamps(out, ranks, BY_HAND)
        return {RUNNING: max(stamps.values()) - run.started, "wall s": run.wall}

    # One unmeasured run of each: Ray starts its worker processes (and caches) on first use.
    distrun()
    by_hand()
    methods = [Method(DISTRUN, distrun), Method(BY_HAND, by_hand)]
    reps = bench.reps(5)
    case = f"{NODES} nodes x {PER_NODE} ranks"
    samples = alternate(methods, reps, bench.log)
    result.reps.update({m.name: reps for m in methods})
    result.rows += [Row(case, m.name, k, samples[m.name].values[k]) for m in methods for k in (RUNNING, "wall s")]
    ours = result.median(case, DISTRUN, RUNNING)
    theirs = result.median(case, BY_HAND, RUNNING)
    result.targets.append(
        Target(
            "B9",
            f"submit to all ranks running within {GOAL_RATIO}x of a hand-written Ray script",
            f"{ours:.2f} s vs {theirs:.2f} s ({ours / theirs:.2f}x)",
            ours <= GOAL_RATIO * theirs,
        )
    )
    result.notes.append(
        "both start a Ray driver (ray.init), one STRICT_SPREAD placement group of 2 bundles and one actor per "
        "bundle; distrun's actor starts its node agent, which starts the ranks; the script's actor starts them itself"
    )
