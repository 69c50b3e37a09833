"""B14 parallel steps: 2,000 mini-batches of one small file each, 2 nodes x 2 processes on local
compute, a `run()` that does almost nothing.

`distrun run pipeline.yml` (one `type: parallel` step: 4 workers pulling from process 0's queue,
each running the entry script in a process of its own, appending one row per file) against one
Python process running `multiprocessing.Pool(4).imap_unordered` of the same `run` over the same
files, one file a call (the floor: no job, no queue, no output file). The figure that matters is
distrun's time per mini-batch over the pool's: (distrun's wall - the pool's wall) / mini-batches.
Each sample has a `DISTRUN_HOME` of its own and a folder of its own, so no step is reused.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench import Bench, CaseError
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "parallel steps: mini-batches over a gang of workers"
FULL_BATCHES = 2000
TINY_BATCHES = 100
TARGET_PER_BATCH = 0.002  # seconds per mini-batch over the pool
POOL = "Pool(4).imap_unordered"
WALL = "wall s"
PER_BATCH = "per mini-batch over the pool ms"

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


def _inputs(bench: Bench, batches: int) -> Path:
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
        "resources": {"instance_count": 2},
        "max_concurrency_per_instance": 2,
        "task": {
            "type": "run_function",
            "code": str(folder / "src"),
            "entry_script": "score.py",
            "append_row_to": "${{outputs.rows}}",
        },
    }
    (folder / "pipeline.yml").write_text(json.dumps({"type": "pipeline", "jobs": {"score": step}}, indent=2))
    return folder


def _distrun(bench: Bench, folder: Path, batches: int) -> dict[str, float]:
    home = bench.folder("b14-home")
    env = {**bench.distrun_env(), "DISTRUN_HOME": str(home)}
    run, _ = bench.run("b14 distrun", [bench.distrun("run", str(folder / "pipeline.yml"))], env, timeout=900)
    rows = next((home / "jobs").glob("*.score")) / "named-outputs" / "rows" / "rows"
    if len(rows.read_text().splitlines()) != batches:
        raise CaseError(f"b14: the step appended {len(rows.read_text().splitlines())} rows, not {batches}")
    return {WALL: run.wall}


def _pool(bench: Bench, folder: Path) -> dict[str, float]:
    argv = [bench.python, str(folder / "pool.py"), str(folder / "src"), str(folder / "files")]
    run, _ = bench.run("b14 pool", [argv], bench.base_env(), timeout=900)
    return {WALL: run.wall}


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B14", TITLE)
    batches = TINY_BATCHES if bench.sizes.hang_ranks[-1] < 8 else FULL_BATCHES  # --tiny, as B12 tells it
    reps = bench.reps(3)
    collected = alternate(
        [
            Method("distrun", lambda: _distrun(bench, _inputs(bench, batches), batches)),
            Method(POOL, lambda: _pool(bench, _inputs(bench, batches))),
        ],
        reps,
        bench.log,
    )
    case = f"{batches} mini-batches of 1 file, 2 nodes x 2 processes"
    walls, floor = collected["distrun"].values[WALL], collected[POOL].values[WALL]
    result.rows.append(Row(case, DISTRUN, WALL, walls))
    result.rows.append(Row(case, POOL, WALL, floor))
    base = sorted(floor)[len(floor) // 2]
    result.rows.append(Row(case, DISTRUN, PER_BATCH, [(wall - base) / batches * 1000 for wall in walls]))
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
    result.reps[DISTRUN] = reps
    result.notes.append(
        "distrun's wall is `distrun run` of the pipeline from start to exit (its records, the 4 workers and "
        "their entry-script processes, the appended output file); the pool's is one Python process from start "
        "to exit. Scale-out on Slurm is not measured here"
    )
    return result
