"""B10's pipelines for several distrun source trees side by side: how a change to a step's path
is judged (e.g. before and after it), samples alternating (tree A, tree B, ..., the shell script,
A, B, ...) so that load that comes and goes touches each alike:

    python -m benchmarks.pipeline_steps --src src --src ../before/src --shape chain --reps 3

Each sample is `distrun run` of the same pipeline (`benchmarks.cases.pipelines`) with a
DISTRUN_HOME of its own; each tree's bytecode is compiled first, as `pip install` does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench import Bench, Sizes
from benchmarks.cases.pipelines import SCRIPT, WALL, every_step_ran, fresh_home, pipeline_files
from benchmarks.harness import Method, alternate
from benchmarks.peers import find_peers


def _tree(bench: Bench, src: Path, yml: Path, steps: int) -> Method:
    def sample() -> dict[str, float]:
        env = {**fresh_home(bench), "PYTHONPATH": str(src.resolve())}
        run, output = bench.run("steps", [bench.distrun("run", str(yml))], env, timeout=600)
        every_step_ran(output, steps)
        return {WALL: run.wall}

    return Method(str(src), sample)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pipeline_steps", description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, action="append", required=True, help="a distrun source tree (repeat)")
    parser.add_argument("--shape", choices=("chain", "fan-out"), default="chain")
    parser.add_argument("--steps", type=int, default=Sizes().pipeline_steps)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    for src in args.src:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(prefix="pipeline-steps-") as scratch:
        bench = Bench(find_peers(setup=False, log=print), Sizes(), Path(scratch))
        yml, sh = pipeline_files(bench, args.steps, args.shape == "chain")

        def script() -> dict[str, float]:
            run, _ = bench.run("script", [["bash", str(sh)]], bench.base_env())
            return {WALL: run.wall}

        methods = [_tree(bench, src, yml, args.steps) for src in args.src] + [Method(SCRIPT, script)]
        samples = alternate(methods, args.reps, print)
    floor = statistics.median(samples[SCRIPT].values[WALL])
    print(f"{args.steps}-step {args.shape}, {args.reps} samples each, load average {os.getloadavg()}")
    for method in methods:
        walls = samples[method.name].values[WALL]
        per_step = (statistics.median(walls) - floor) / args.steps
        print(
            f"  {method.name}: wall median {statistics.median(walls):.3f} s (min {min(walls):.3f}, "
            f"max {max(walls):.3f}), {per_step:.3f} s per step over the script"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
