"""B2 time to first collective: 4 ranks, gloo, init_process_group + one all_reduce.

Measured from the command's start to the last rank past its all_reduce (each rank writes the
time.time() of that moment), also to the first rank's interpreter running the script, and
the whole command. distrun against `torchrun --standalone`.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench import Bench
from benchmarks.harness import Method, Run, alternate
from benchmarks.results import DISTRUN, CaseResult, Row

TITLE = "time to first collective"
METRICS = ("to first rank running s", "to last rank past all_reduce s", "wall s")


def read_stamps(folder: Path, what: str) -> dict[int, float]:
    found = {}
    for path in folder.glob(f"{what}_*"):
        found[int(path.name.rsplit("_", 1)[1])] = float(path.read_text())
    return found


def _metrics(run: Run, out: Path, ranks: int) -> dict[str, float]:
    started = read_stamps(out, "start")
    done = read_stamps(out, "done")
    if len(done) != ranks:
        raise RuntimeError(f"only ranks {sorted(done)} got past the all_reduce")
    return {
        METRICS[0]: min(started.values()) - run.started,
        METRICS[1]: max(done.values()) - run.started,
        METRICS[2]: run.wall,
    }


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B2", TITLE)
    ranks = bench.sizes.collective_ranks
    script = bench.workload("collective.py")
    job = bench.job_file(f"{bench.python} {script}", per_node=ranks)

    def distrun() -> dict[str, float]:
        out = bench.folder("b2-out")
        sample, _ = bench.run(
            "b2-distrun", [bench.distrun("run", str(job))], bench.distrun_env({"BENCH_OUT": str(out)})
        )
        return _metrics(sample, out, ranks)

    def torchrun() -> dict[str, float]:
        out = bench.folder("b2-out")
        argv = [*bench.peers.torchrun, "--standalone", "--nproc-per-node", str(ranks), script]
        sample, _ = bench.run("b2-torchrun", [argv], bench.base_env({"BENCH_OUT": str(out)}))
        return _metrics(sample, out, ranks)

    methods = [Method(DISTRUN, distrun)]
    if bench.wants("torchrun"):
        methods.append(Method("torchrun", torchrun))
    reps = bench.reps(5)
    case = f"{ranks} ranks, gloo"
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        result.reps[method.name] = reps
        for metric in METRICS:
            result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
    result.notes.append("command start = the moment before the harness creates the command's process")
    return result
