"""B8 growth curves: how distrun's costs grow from 8 to 512 ranks on local compute.

At every size (`Sizes.curve_ranks`, cut with `--max-ranks`), one simulated node:

- launch: N ranks of `/bin/true`, command start to return, distrun and a bare shell loop;
- all running: N ranks of `sleep`, command start until the last rank is started (distrun: the
  job record's started_at, taken once the last process is started; the loop: a clock read
  right after its last `&`);
- while those N ranks sleep: the supervisor's CPU over `curve_window` seconds (% of a core),
  its PSS (in all and per rank, from /proc/PID/smaps_rollup) and its open file descriptors.
  The supervisor is every process of the command that is not a rank (LOCAL_RANK unset);
- failure fan-out: N bash ranks (workloads/rank_sleeper.sh); once all have started, one exits
  1; every other one stamps the moment SIGTERM reaches it. Fan-out: the failing exit to the
  last of those stamps (with the first: how soon distrun reacts; the rest is N processes
  being woken and scheduled, which on few cores is most of it);
- logs at `curve_log_ranks` writers sharing `curve_log_bytes` of numbered lines: distrun
  against the shell writing the same bytes to one file per rank, alternating; every line
  checked in distrun's per-rank files and live stream;
- plan + render 1024 nodes x 8 for every backend (local, Slurm, Ray, Kubernetes) in a fresh
  process each (workloads/render_backend.py): seconds and peak RSS.

The raw samples go to `<raw>/b8.json` (`--raw` or DISTRUN_BENCH_RAW); `python -m
benchmarks.curves_report <raw>` turns them into RESULTS.md's curves section and PNG plots.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.bench import REPO, Bench, CaseError
from benchmarks.cases import logs
from benchmarks.cases.first_collective import read_stamps
from benchmarks.cases.footprint import watch_idle
from benchmarks.cases.plan_scale import _job_name, run_workload
from benchmarks.curves_report import RAW_NAME, Curve
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "growth curves, 8 to 512 ranks"
LOOP = "bare loop"
SHELL_FILES = "shell to files"
LAUNCH = "launch: start to return, N x /bin/true (s)"
RUNNING = "start until all N ranks run (s)"
CPU = "supervisor CPU while N ranks idle (% of a core)"
PSS = "supervisor PSS (MB)"
PSS_PER_RANK = "supervisor PSS per rank (KB)"
FDS = "supervisor open file descriptors"
FANOUT = "failure fan-out: failing exit to SIGTERM at every other rank (ms)"
FIRST_TERM = "failing exit to the first SIGTERM received (ms)"
LOG_RATE = "log throughput, writers at once (MB/s)"
LOG_BAD = "lost+split+fused lines (files and stream)"
PLAN_S = "plan + render 1024 x 8 (s)"
PLAN_MB = "plan + render 1024 x 8, peak RSS (MB)"
PLAN_CPU = "plan + render 1024 x 8, CPU (s)"  # beside the wall time: what a busy machine adds
PLAN_OUT = "plan + render 1024 x 8, JSON shown by distrun plan (MB)"
MAX_RUNNING_RATIO = 2.0  # the issue: within 2x of the bare loop at 128 and 512 ranks
MAX_FANOUT_MS = 50.0  # at 512 ranks
MIN_LOG_SHARE = 0.5  # of what the shell writes to files
MAX_PLAN_S = 1.0
MAX_PLAN_MB = 200.0
PLAN_PER_NODE = 8
BACKENDS = {  # compute target name -> (type, settings) in the scratch config.yaml
    "local": None,
    "slurm": ("slurm", {"partition": "debug"}),
    "ray": ("ray", {"address": "127.0.0.1:6379"}),
    "kubernetes": ("kubernetes", {"context": "bench", "namespace": "ml"}),
}
IMAGE = "registry.example/train:1"  # Kubernetes runs every pod from an image; the others ignore it


# ---------------------------------------------------------------- launch and all running


def _launch_loop(bench: Bench, ranks: int) -> float:
    script = f"for i in $(seq {ranks}); do /bin/true & done; wait"
    run, _ = bench.run("b8-loop-true", [["bash", "-c", script]], bench.base_env())
    return run.wall


def _launch_distrun(bench: Bench, job: Path) -> float:
    run, _ = bench.run("b8-true", [bench.distrun("run", str(job))], bench.distrun_env())
    return run.wall


def _running_loop(bench: Bench, ranks: int, sleep: float) -> float:
    out = bench.folder("b8-loop")
    script = f'for i in $(seq {ranks}); do sleep {sleep:g} & done; date +%s.%N > "{out}/started"; wait'
    run, _ = bench.run("b8-loop-sleep", [["bash", "-c", script]], bench.base_env())
    return float((out / "started").read_text()) - run.started


def _idle_sample(bench: Bench, job: Path, ranks: int) -> dict[str, float]:
    """distrun run of N sleeping ranks: until all run, then the supervisor over the window; then cancelled."""
    started = time.time()
    argv = bench.distrun("run", str(job))
    idle = watch_idle(bench, "b8-idle", argv, bench.distrun_env(), None, ranks, bench.sizes.curve_window)
    db = bench.scratch / "distrun-home" / "jobs.db"
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT started_at FROM jobs WHERE name = ?", (_job_name(idle.output.read_bytes()),)
        ).fetchone()
    pss = sum(m[1] for m in idle.memory_mb)
    return {
        RUNNING: (row[0] - started) if row and row[0] else math.nan,
        CPU: idle.cpu_percent,
        PSS: pss,
        PSS_PER_RANK: 1024 * pss / ranks,
        FDS: float(idle.fds),
    }


# ---------------------------------------------------------------- failure fan-out


def _fanout_sample(bench: Bench, ranks: int) -> dict[str, float]:
    out = bench.folder("b8-fanout-out")
    fail_rank = ranks // 2
    env = {
        "BENCH_OUT": str(out),
        "BENCH_RANKS": str(ranks),
        "BENCH_FAIL_RANK": str(fail_rank),
        "BENCH_FAIL_AFTER": "0.5",
        "BENCH_SLEEP": "120",
    }
    job = bench.job_file(f"bash {bench.workload('rank_sleeper.sh')}", per_node=ranks, grace_period=10)
    argv = bench.distrun("run", str(job))
    bench.run("b8-fanout", [argv], bench.distrun_env(env), timeout=180, expect="fail")
    fail = read_stamps(out, "fail")
    if fail_rank not in fail:
        raise CaseError(f"b8 fan-out: rank {fail_rank} never reached its failure (stamps in {out})")
    term = read_stamps(out, "term")
    others = [r for r in range(ranks) if r != fail_rank]
    arrived = [term.get(r, math.inf) for r in others]
    return {FANOUT: 1000 * (max(arrived) - fail[fail_rank]), FIRST_TERM: 1000 * (min(arrived) - fail[fail_rank])}


# ---------------------------------------------------------------- logs


def _log_samples(bench: Bench, writers: int, reps: int, checks: list[str]) -> dict[str, list[float]]:
    lines_dir, expected = logs.prepare(bench, writers, bench.sizes.curve_log_bytes // writers)
    total_mb = sum(len(data) for data, _ in expected.values()) / 1e6
    env = logs.writers_env(bench, lines_dir)
    job = bench.job_file(f"{bench.python} {bench.workload('writer.py')}", per_node=writers)
    methods = [
        Method(DISTRUN, lambda: logs.sample_distrun(bench, job, env, expected, total_mb, checks)),
        Method(SHELL_FILES, lambda: logs.sample_shell(bench, env, writers, total_mb, "files")),
    ]
    samples = alternate(methods, reps, bench.log)
    mine = samples[DISTRUN].values
    return {
        DISTRUN: mine[logs.RATE],
        SHELL_FILES: samples[SHELL_FILES].values[logs.RATE],
        LOG_BAD: [a + b for a, b in zip(mine[logs.BAD_LOGS], mine[logs.BAD_STREAM], strict=True)],
    }


# ---------------------------------------------------------------- plan + render per backend


def _plan_home(bench: Bench) -> Path:
    home = bench.folder("b8-home")
    lines = ["compute:"]
    for name, target in BACKENDS.items():
        if target is None:
            continue
        kind, settings = target
        lines.append(f"  {name}:")
        lines.append(f"    type: {kind}")
        lines += [f"    {key}: {value}" for key, value in settings.items()]
    (home / "config.yaml").write_text("\n".join(lines) + "\n")
    return home


def _plan_sample(bench: Bench, job: Path, home: Path, compute: str) -> dict[str, float] | str:
    env = {**bench.distrun_env(), "DISTRUN_HOME": str(home)}
    found = run_workload(bench, ["render_backend.py", str(job), compute], env, cwd=job.parent)
    if "skipped" in found or "failed" in found:
        return str(found.get("skipped") or found.get("failed"))
    keys = {PLAN_S: "plan+render s", PLAN_MB: "peak RSS MB", PLAN_CPU: "plan+render CPU s", PLAN_OUT: "rendered MB"}
    return {metric: float(found[key]) for metric, key in keys.items()}  # type: ignore[arg-type]


# ---------------------------------------------------------------- the case


def _one_size(bench: Bench, ranks: int, reps: int) -> list[tuple[str, str, list[float]]]:
    """Every rank-count curve's samples at N ranks, as (curve, method, values)."""
    found = []
    true_job = bench.job_file("/bin/true", per_node=ranks)
    sleep_job = bench.job_file("sleep 600", per_node=ranks)  # the sample cancels it
    sleep_for = 2.0 + ranks / 100  # the loop's ranks outlive its launch
    methods = [
        Method(DISTRUN, lambda: {LAUNCH: _launch_distrun(bench, true_job)}),
        Method(LOOP, lambda: {LAUNCH: _launch_loop(bench, ranks)}),
    ]
    for method, samples in alternate(methods, reps, bench.log).items():
        found.append((LAUNCH, method, samples.values[LAUNCH]))
    methods = [
        Method(DISTRUN, lambda: _idle_sample(bench, sleep_job, ranks)),
        Method(LOOP, lambda: {RUNNING: _running_loop(bench, ranks, sleep_for)}),
    ]
    for method, samples in alternate(methods, reps, bench.log).items():
        found += [(metric, method, values) for metric, values in samples.values.items()]
    fanout = alternate([Method(DISTRUN, lambda: _fanout_sample(bench, ranks))], reps, bench.log)
    found += [(metric, DISTRUN, fanout[DISTRUN].values[metric]) for metric in (FANOUT, FIRST_TERM)]
    return found


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B8", TITLE)
    facts = dict(machine.describe(bench.peers, REPO))  # with the load average as the case starts
    sizes = bench.sizes
    reps = bench.reps(3)
    curves: dict[str, Curve] = {
        name: Curve(name, "ranks", {}) for name in (LAUNCH, RUNNING, FANOUT, FIRST_TERM, CPU, PSS, PSS_PER_RANK, FDS)
    }
    curves[LOG_RATE] = Curve(LOG_RATE, "writers", {})
    for name in (PLAN_S, PLAN_CPU, PLAN_MB, PLAN_OUT):
        curves[name] = Curve(name, "backend", {})

    def keep(curve: str, method: str, x: int | str, values: list[float]) -> None:
        curves[curve].points.setdefault(method, {})[str(x)] = values
        result.rows.append(Row(f"{curves[curve].x_label} = {x}", method, curve, values))

    for ranks in sizes.curve_ranks:
        bench.log(f"  B8 {ranks} ranks")
        for curve, method, values in _one_size(bench, ranks, reps):
            keep(curve, method, ranks, values)

    checks: list[str] = []
    for writers in sizes.curve_log_ranks:
        bench.log(f"  B8 logs, {writers} writers")
        found = _log_samples(bench, writers, reps, checks)
        keep(LOG_RATE, DISTRUN, writers, found[DISTRUN])
        keep(LOG_RATE, SHELL_FILES, writers, found[SHELL_FILES])
        result.rows.append(Row(f"writers = {writers}", DISTRUN, LOG_BAD, found[LOG_BAD]))

    home = _plan_home(bench)
    nodes = sizes.plan_nodes  # 1024 (tiny: 4)
    job = bench.job_file(f"{bench.python} train.py", nodes=nodes, per_node=PLAN_PER_NODE)
    data = json.loads(job.read_text())
    data["environment"] = {"image": IMAGE}
    job.write_text(json.dumps(data, indent=2))
    for compute in BACKENDS:
        bench.log(f"  B8 plan + render {nodes} x {PLAN_PER_NODE}, {compute}")
        samples: dict[str, list[float]] = {}
        for _ in range(reps):
            found = _plan_sample(bench, job, home, compute)
            if isinstance(found, str):
                result.notes.append(f"plan + render on {compute}: not measured: {found}")
                break
            for metric, value in found.items():
                samples.setdefault(metric, []).append(value)
            bench.log(
                f"    {compute}: {found[PLAN_S]:.3g} s, {found[PLAN_MB]:.0f} MB, {found[PLAN_OUT]:.0f} MB of JSON"
            )
        for metric, values in samples.items():
            keep(metric, DISTRUN, compute, values)

    _targets(result, curves, sizes.curve_ranks, nodes)
    result.notes += [
        f"{reps} samples per point, methods alternating; ranks on one simulated node",
        "checker, logs: " + (" | ".join(sorted(set(checks))) or "-"),
        f"logs: {sizes.curve_log_bytes / 1e6:g} MB of numbered lines in all, shared by the writers",
        "the curves, with plots: the 'Growth curves' section below",
    ]
    _write_raw(bench, facts, curves, result)
    return result


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _targets(result: CaseResult, curves: dict[str, Curve], ranks: tuple[int, ...], nodes: int) -> None:
    def median(curve: str, method: str, x: int | str) -> float:
        return _median(curves[curve].points.get(method, {}).get(str(x), []))

    for n in (r for r in ranks if r >= 128):
        mine, floor = median(RUNNING, DISTRUN, n), median(RUNNING, LOOP, n)
        result.targets.append(
            Target(
                "B8",
                f"all {n} ranks running within {MAX_RUNNING_RATIO:g}x of the bare loop",
                f"{mine:.3f} s against {floor:.3f} s ({mine / floor:.1f}x)",
                mine <= MAX_RUNNING_RATIO * floor,
            )
        )
    top = max(ranks)
    worst = max(curves[FANOUT].points.get(DISTRUN, {}).get(str(top), [math.nan]))
    result.targets.append(
        Target(
            "B8",
            f"failure fan-out at {top} ranks under {MAX_FANOUT_MS:g} ms",
            f"{worst:.1f} ms at worst",
            None if math.isnan(worst) else worst <= MAX_FANOUT_MS,
        )
    )
    cpu = max(median(CPU, DISTRUN, n) for n in ranks)
    result.targets.append(
        Target("B8", "supervisor CPU 0 % while the ranks idle", f"{cpu:.2f} % of a core at most (medians)", cpu < 0.1)
    )
    for writers in curves[LOG_RATE].points.get(DISTRUN, {}):
        mine, shell = median(LOG_RATE, DISTRUN, writers), median(LOG_RATE, SHELL_FILES, writers)
        result.targets.append(
            Target(
                "B8",
                f"logs of {writers} writers at least {MIN_LOG_SHARE:g}x of the shell writing files",
                f"{mine:.0f} MB/s against {shell:.0f} MB/s ({mine / shell:.2f}x)",
                mine >= MIN_LOG_SHARE * shell,
            )
        )
    bad = max((v for row in result.rows if row.metric == LOG_BAD for v in row.values), default=0)
    result.targets.append(Target("B8", "0 lost, split or fused log lines", f"{bad:.0f} at worst", bad == 0))
    for compute in BACKENDS:
        seconds = curves[PLAN_S].points.get(DISTRUN, {}).get(compute)
        peaks = curves[PLAN_MB].points.get(DISTRUN, {}).get(compute)
        goal = f"plan + render {nodes} x {PLAN_PER_NODE} on {compute} under {MAX_PLAN_S:g} s and {MAX_PLAN_MB:g} MB"
        if not seconds or not peaks:
            result.targets.append(Target("B8", goal, "not measured", None))
            continue
        result.targets.append(
            Target(
                "B8",
                goal,
                f"{max(seconds):.2f} s, {max(peaks):.0f} MB at worst",
                max(seconds) < MAX_PLAN_S and max(peaks) < MAX_PLAN_MB,
            )
        )


def _write_raw(bench: Bench, facts: dict[str, str], curves: dict[str, Curve], result: CaseResult) -> None:
    if bench.raw_dir is None:
        return
    bench.raw_dir.mkdir(parents=True, exist_ok=True)
    raw = {
        "case": "B8",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": facts,
        "load average at end": machine.load_average(),
        "curves": [curve.to_dict() for curve in curves.values()],
        "targets": [{"goal": t.goal, "measured": t.measured, "met": t.met} for t in result.targets],
        "notes": result.notes,
    }
    path = bench.raw_dir / RAW_NAME
    path.write_text(json.dumps(raw, indent=2))
    bench.log(f"  B8 raw figures: {path}")
    bench.log(f"  B8 report and plots: python -m benchmarks.curves_report {bench.raw_dir}")
