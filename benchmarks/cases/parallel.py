"""B14 parallel steps: 2,000 mini-batches of one small file each, 2 nodes x 2 processes on local
compute, and 1 node x 2 and 2 nodes x 2 processes on the real Slurm cluster, a `run()` that does
almost nothing.

`distrun run pipeline.yml` (one `type: parallel` step: 4 workers pulling from process 0's queue,
each running the entry script in a process of its own, appending one row per file) against one
Python process running `multiprocessing.Pool(4).imap_unordered` of the same `run` over the same
files, one file a call (the floor: no job, no queue, no output file). The figure that matters is
distrun's time per mini-batch over the pool's: (distrun's wall - the pool's wall) / mini-batches.
Each sample has a `DISTRUN_HOME` of its own and a folder of its own, so no step is reused.
Scale-out on Slurm is measured the same way, in the same run, over the same pool: the test suite's
2-node cluster (`tests/support/clusters/slurm_cluster.py`, started as B7 starts it), its wall
including Slurm's scheduling of the step's batch job (a pass a second). Not with --tiny (the
cluster's start and a Slurm job per sample would make the tiny run of every case much longer);
without Slurm the Slurm rows are left out, saying why.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench import Bench, CaseError
from benchmarks.cases.slurm import _slurm_backend_missing, _start_cluster
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "parallel steps: mini-batches over a gang of workers"
FULL_BATCHES = 2000
TINY_BATCHES = 100
TARGET_PER_BATCH = 0.002  # seconds per mini-batch over the pool
POOL = "Pool(4).imap_unordered"
WALL = "wall s"
PER_BATCH = "per mini-batch over the pool ms"
SLURM_TARGET = "b14slurm"
SLURM_SHAPES = ((1, 2), (2, 2))  # (nodes, processes per node) on Slurm

ENTRY = "def init():\n    pass\n\n\ndef run(mini_batch):\n    return [len(path) for path in mini_batch]\n"
POOL_SCRIPT = """\
import multiprocessing, os, sys
sys.path.insert(0, sys.argv[1])
import score
files = sorted(os.path.join(sys.argv[2], name) for name in os.listdir(sys.argv[2]))
with multiprocessing.Pool(4, initializer=score.init) as pool:
    rows = [row for rows in pool.imap_unordered(score.run, [[f] for f in files]) for row in rows]
assert len(rows) == len(files), len(rows)
"""


def _inputs(bench: Bench, batches: int, nodes: int = 2, compute: str = "local") -> Path:
    folder = bench.folder("b14")
    (folder / "src").mkdir()
    (folder / "src" / "score.py").write_text(ENTRY)
    (folder / "pool.py").write_text(POOL_SCRIPT)
    files = folder / "files"
    files.mkdir()
    for index in range(batches):
        (files / f"{index:05d}.txt").write_text(f"{index}\n")
    step = {
        "type": "parallel",
        "inputs": {"files": {"type": "uri_folder", "path": str(files)}},
        "outputs": {"rows": {"type": "uri_file"}},
        "input_data": "${{inputs.files}}",
        "mini_batch_size": "1",
        "resources": {"instance_count": nodes},
        "max_concurrency_per_instance": 2,
        "task": {
            "type": "run_function",
            "code": str(folder / "src"),
            "entry_script": "score.py",
            "append_row_to": "${{outputs.rows}}",
        },
    }
    pipeline = {"type": "pipeline", "settings": {"default_compute": compute}, "jobs": {"score": step}}
    (folder / "pipeline.yml").write_text(json.dumps(pipeline, indent=2))
    return folder


def _distrun(bench: Bench, folder: Path, batches: int, slurm: dict[str, str] | None = None) -> dict[str, float]:
    """One `distrun run` of the step (on Slurm: `slurm` holds the cluster's variables and its
    slurm.conf, and the sample's DISTRUN_HOME gets the target first, outside the time)."""
    home = bench.folder("b14-home")
    env = {**bench.distrun_env(), "DISTRUN_HOME": str(home)}
    if slurm is not None:
        env.update({k: v for k, v in slurm.items() if k != "conf"})
        argv = bench.distrun(
            "compute", "create", "--name", SLURM_TARGET, "--type", "slurm", "--set", f"slurm_conf={slurm['conf']}"
        )
        made = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if made.returncode != 0:
            raise CaseError(f"b14: could not define the Slurm target: {made.stdout}{made.stderr}")
    run, _ = bench.run("b14 distrun", [bench.distrun("run", str(folder / "pipeline.yml"))], env, timeout=900)
    rows = next((home / "jobs").glob("*.score")) / "named-outputs" / "rows" / "rows"
    if len(rows.read_text().splitlines()) != batches:
        raise CaseError(f"b14: the step appended {len(rows.read_text().splitlines())} rows, not {batches}")
    return {WALL: run.wall}


def _pool(bench: Bench, folder: Path) -> dict[str, float]:
    argv = [bench.python, str(folder / "pool.py"), str(folder / "src"), str(folder / "files")]
    run, _ = bench.run("b14 pool", [argv], bench.base_env(), timeout=900)
    return {WALL: run.wall}


def _on_slurm(bench: Bench, batches: int, slurm: dict[str, str], nodes: int) -> Callable[[], dict[str, float]]:
    return lambda: _distrun(bench, _inputs(bench, batches, nodes, SLURM_TARGET), batches, slurm)


def _slurm_name(nodes: int, per_node: int) -> str:
    return f"on Slurm, {nodes} node{'s' if nodes > 1 else ''} x {per_node} processes"


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B14", TITLE)
    tiny = bench.sizes.hang_ranks[-1] < 8  # --tiny, as B12 tells it
    batches = TINY_BATCHES if tiny else FULL_BATCHES
    reps = bench.reps(3)
    methods = [
        Method(DISTRUN, lambda: _distrun(bench, _inputs(bench, batches), batches)),
        Method(POOL, lambda: _pool(bench, _inputs(bench, batches))),
    ]
    cluster, why_not = None, "not with --tiny" if tiny else _slurm_backend_missing(bench)
    if why_not is None:
        try:
            cluster = _start_cluster(bench)
        except CaseError as exc:
            why_not = str(exc)
    try:
        if cluster is not None:
            slurm = {k: v for k, v in cluster.env(bench.base_env()).items() if k.startswith(("SLURM", "MUNGE"))}
            slurm["conf"] = str(cluster.conf_path)
            for nodes, per_node in SLURM_SHAPES:
                methods.append(Method(_slurm_name(nodes, per_node), _on_slurm(bench, batches, slurm, nodes)))
        collected = alternate(methods, reps, bench.log)
    finally:
        if cluster is not None:
            cluster.stop()
    floor = collected[POOL].values[WALL]
    base = sorted(floor)[len(floor) // 2]
    case = f"{batches} mini-batches of 1 file, 2 nodes x 2 processes"
    for method in methods:
        where = case if method.name in (DISTRUN, POOL) else f"{batches} mini-batches of 1 file, {method.name}"
        walls = collected[method.name].values[WALL]
        result.rows.append(Row(where, DISTRUN if method.name != POOL else POOL, WALL, walls))
        if method.name != POOL:
            result.rows.append(Row(where, DISTRUN, PER_BATCH, [(wall - base) / batches * 1000 for wall in walls]))
    over = result.row(case, DISTRUN, PER_BATCH)
    if over is not None:
        result.targets.append(
            Target(
                "B14",
                f"at most {TARGET_PER_BATCH * 1000:g} ms per mini-batch over {POOL}",
                f"median {over.median:.2f} ms, max {over.high:.2f} ms",
                over.median <= TARGET_PER_BATCH * 1000,
            )
        )
    for method in methods:
        result.reps[method.name] = reps
    result.notes.append(
        "distrun's wall is `distrun run` of the pipeline from start to exit (its records, the workers and "
        "their entry-script processes, the appended output file; on Slurm also the batch job's scheduling "
        "and its node agents' start); the pool's is one Python process from start to exit"
    )
    if why_not is not None:
        result.notes.append(f"Scale-out on Slurm not measured: {why_not}")
    return result
