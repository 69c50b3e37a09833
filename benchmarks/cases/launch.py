"""B1 launch and teardown: N ranks of `python -c pass`, and one `true`, from command start to
command return.

distrun (`distrun run`, which also records the job and keeps every rank's log) against a bare
shell loop that starts the same processes and waits for them (the floor), `torchrun
--standalone`, and TorchX's `local_cwd` scheduler (`dist.ddp`, which runs torchrun inside;
it takes a script, so its ranks run an empty file). Also each CLI's start-up: `--help`.

Beside them, the floor of any launcher built on distrun's libraries (`workloads/library_floor.py`:
a fresh Python process that imports pydantic, ruamel.yaml and click and starts the same
processes, nothing more). The targets are judged as the issue states them; each also shows what
that floor alone takes, so a target no launcher on these libraries can meet is told apart from one
that distrun's own work misses.
"""

from __future__ import annotations

import math
import shutil

from benchmarks.bench import WORKLOADS, Bench
from benchmarks.harness import Method, alternate
from benchmarks.profiling import cprofile, import_profile
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "launch and teardown"
# The targets.
MAX_OVER_LOOP = {8: 0.1, 32: 0.3}
MAX_ONE_TRUE = 0.12  # `distrun run` of one `true`, seconds
MIN_SPEEDUP_OVER_PEER = {8: 8.0}  # over torchrun and over TorchX
OWN_CPU = "own CPU s"  # the command's own process, not its ranks: less sensitive to a busy machine
FLOOR = "libraries' floor"
ONE_TRUE = "1 rank of true"


def _wall(bench: Bench, what: str, argv: list[str], env: dict[str, str], cwd: object = None) -> dict[str, float]:
    run, _ = bench.run(what, [argv], env, cwd=cwd)  # type: ignore[arg-type]
    return {"wall s": run.wall, OWN_CPU: run.own_cpu}


def _methods(bench: Bench, ranks: int) -> list[Method]:
    py = bench.python
    job = bench.job_file(f"{py} -c pass", per_node=ranks)
    denv = bench.distrun_env()
    penv = bench.base_env({"PY": py})
    loop = f'for i in $(seq {ranks}); do "$PY" -c pass & done; wait'
    peers = bench.peers
    floor = [py, bench.workload("library_floor.py"), str(ranks), py, "-c", "pass"]
    methods = [
        Method(DISTRUN, lambda: _wall(bench, "b1-distrun", bench.distrun("run", str(job)), denv)),
        Method("bare loop", lambda: _wall(bench, "b1-loop", ["bash", "-c", loop], penv)),
        Method(FLOOR, lambda: _wall(bench, "b1-floor", floor, penv)),
    ]
    if bench.wants("torchrun"):
        torchrun = [*peers.torchrun, "--standalone", "--nproc-per-node", str(ranks), "--no-python", py, "-c", "pass"]
        methods.append(Method("torchrun", lambda: _wall(bench, "b1-torchrun", torchrun, penv)))
    if bench.wants("torchx") and peers.torchx:
        torchx = [*peers.torchx, "run", "-s", "local_cwd", "dist.ddp", "-j", f"1x{ranks}", "--script", "noop.py"]
        methods.append(Method("torchx", lambda: _wall(bench, "b1-torchx", torchx, penv, WORKLOADS)))
    return methods


def _one_true_methods(bench: Bench) -> list[Method]:
    """The issue's `distrun run` of one `true`: the whole fixed cost, next to nothing else."""
    true = shutil.which("true") or "/bin/true"
    job = bench.job_file(true)
    denv = bench.distrun_env()
    penv = bench.base_env()
    floor = [bench.python, bench.workload("library_floor.py"), "1", true]
    return [
        Method(DISTRUN, lambda: _wall(bench, "b1-true-distrun", bench.distrun("run", str(job)), denv)),
        Method("bare loop", lambda: _wall(bench, "b1-true-loop", ["bash", "-c", f"{true} & wait"], penv)),
        Method(FLOOR, lambda: _wall(bench, "b1-true-floor", floor, penv)),
    ]


def _help_methods(bench: Bench) -> list[Method]:
    denv = bench.distrun_env()
    penv = bench.base_env()
    methods = [Method(DISTRUN, lambda: _wall(bench, "b1-help", bench.distrun("--help"), denv))]
    if bench.wants("torchrun"):
        methods.append(Method("torchrun", lambda: _wall(bench, "b1-help", [*bench.peers.torchrun, "--help"], penv)))
    if bench.wants("torchx") and bench.peers.torchx:
        torchx = bench.peers.torchx
        methods.append(Method("torchx", lambda: _wall(bench, "b1-help", [*torchx, "--help"], penv)))
    return methods


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B1", TITLE)
    reps = bench.reps(5)
    for ranks in bench.sizes.launch_ranks:
        case = f"{ranks} rank{'s' if ranks > 1 else ''} of python -c pass"
        bench.log(f"  B1 {case}")
        methods = _methods(bench, ranks)
        samples = alternate(methods, reps, bench.log)
        for method in methods:
            for metric in ("wall s", OWN_CPU):
                result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
            result.reps[method.name] = reps
        _targets(result, case, ranks)
        if any(t.met is False for t in result.targets) and not result.profiles:
            _profile(bench, result, ranks)
    bench.log(f"  B1 {ONE_TRUE}")
    methods = _one_true_methods(bench)
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        for metric in ("wall s", OWN_CPU):
            result.rows.append(Row(ONE_TRUE, method.name, metric, samples[method.name].values[metric]))
        result.reps[method.name] = reps
    _one_true_target(result)
    bench.log("  B1 CLI start-up (--help)")
    methods = _help_methods(bench)
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        for metric in ("wall s", OWN_CPU):
            result.rows.append(Row("CLI start-up (--help)", method.name, metric, samples[method.name].values[metric]))
    result.notes += [
        "every rank runs the same interpreter by absolute path; TorchX runs torchrun inside, with an empty script",
        "own CPU: user + system time of the command's own process, not of the processes it starts (10 ms ticks);"
        " for the bare loop that is bash, for TorchX its CLI without the torchrun it runs",
        f"{FLOOR}: a fresh Python process that imports pydantic, ruamel.yaml and click and starts the same"
        " processes (benchmarks/workloads/library_floor.py); no launcher on these libraries starts faster",
    ]
    return result


def _profile(bench: Bench, result: CaseResult, ranks: int) -> None:
    bench.log(f"  B1 profiling distrun run, {ranks} ranks (a target was missed)")
    job = bench.job_file(f"{bench.python} -c pass", per_node=ranks)
    args = ["run", str(job)]
    env = bench.distrun_env()
    result.profiles.append((f"`distrun run` ({ranks} ranks): imports", import_profile(bench, args, env)))
    result.profiles.append((f"`distrun run` ({ranks} ranks): cProfile, wall clock", cprofile(bench, args, env)))


def _one_true_target(result: CaseResult) -> None:
    mine = result.median(ONE_TRUE, DISTRUN, "wall s")
    floor = result.median(ONE_TRUE, FLOOR, "wall s")
    result.targets.append(
        Target(
            "B1",
            f"distrun run of one true at most {MAX_ONE_TRUE} s",
            f"{mine:.3f} s (median); {FLOOR} {floor:.3f} s",
            None if math.isnan(mine) else mine <= MAX_ONE_TRUE,
        )
    )


def _targets(result: CaseResult, case: str, ranks: int) -> None:
    mine = result.median(case, DISTRUN, "wall s")
    loop = result.median(case, "bare loop", "wall s")
    if ranks in MAX_OVER_LOOP:
        limit = MAX_OVER_LOOP[ranks]
        over = mine - loop
        floor_over = result.median(case, FLOOR, "wall s") - loop
        result.targets.append(
            Target(
                "B1",
                f"distrun minus bare loop at most {limit} s at {ranks} ranks",
                f"{over:+.3f} s (medians); {FLOOR} {floor_over:+.3f} s",
                None if math.isnan(over) else over <= limit,
            )
        )
    for peer in ("torchrun", "torchx"):
        if ranks not in MIN_SPEEDUP_OVER_PEER or result.row(case, peer, "wall s") is None:
            continue
        need = MIN_SPEEDUP_OVER_PEER[ranks]
        speedup = result.median(case, peer, "wall s") / mine
        floor_speedup = result.median(case, peer, "wall s") / result.median(case, FLOOR, "wall s")
        result.targets.append(
            Target(
                "B1",
                f"distrun at least {need:g}x faster than {peer} at {ranks} ranks",
                f"{speedup:.1f}x (medians); {FLOOR} {floor_speedup:.1f}x",
                None if math.isnan(speedup) else speedup >= need,
            )
        )
