"""B4 logs: 4 ranks each write 50 MB of numbered lines; what does carrying them cost?

distrun keeps every rank's output whole in its log file and passes it, labelled, to the live
stream (here the command's stdout, a file). Against the same processes writing to /dev/null
(the floor) and to one file each (a shell redirect: logs, no stream), and torchrun with
`--tee 3 --log-dir` (per-rank files, streamed by polling them). Each rank's lines are made
before the clock starts (workloads/writer.py). After every sample the checker
(line_check.py) compares every per-rank file and the live stream with what the ranks wrote.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from benchmarks.bench import Bench
from benchmarks.harness import Method, alternate
from benchmarks.line_check import LineCheck, check_rank, check_stream
from benchmarks.profiling import cprofile
from benchmarks.results import DISTRUN, CaseResult, Row, Target
from benchmarks.workloads.numbered_lines import lines_for

TITLE = "logs"
WALL = "wall s"
RATE = "MB/s"
OWN_CPU = "distrun's own CPU s"  # the CLI process that carries the logs (not the writers)
BAD_LOGS = "lost+split+fused lines, per-rank files"
BAD_STREAM = "lost+split+fused lines, live stream"
MIN_RATE = 150.0  # the target, MB/s
RUN_ID = re.compile(rb"^RunId: (\S+)$", re.M)


Expected = dict[int, tuple[bytes, int]]


def prepare(bench: Bench, ranks: int, bytes_per_rank: int) -> tuple[Path, Expected]:
    """Every rank's numbered lines, written before the clock starts; what each rank must deliver."""
    folder = bench.folder("b4-lines")
    expected = {}
    for rank in range(ranks):
        data, count = lines_for(rank, bytes_per_rank)
        (folder / f"lines_{rank}.bin").write_bytes(data)
        expected[rank] = (data, count)
    return folder, expected


def sample_distrun(
    bench: Bench, job: Path, env: dict[str, str], expected: Expected, total_mb: float, checks: list[str]
) -> dict[str, float]:
    """`distrun run` of the writers once; every per-rank file and the live stream checked line by line."""
    run, output = bench.run("b4-distrun", [bench.distrun("run", str(job))], bench.distrun_env(env))
    stream = output.read_bytes()
    found = RUN_ID.search(stream)
    if found is None:
        raise RuntimeError("the stream has no RunId line")
    logs = bench.scratch / "distrun-home" / "jobs" / found[1].decode() / "user_logs"
    in_logs = LineCheck()
    for rank, (data, count) in expected.items():
        in_logs += check_rank((logs / f"std_log_process_{rank:02d}.txt").read_bytes(), rank, data, count)
    labels = {f"[0/{rank}] ".encode(): rank for rank in expected}
    in_stream, _ = check_stream(stream, labels, expected)
    checks.append(f"files: {in_logs.summary()}; stream: {in_stream.summary()}")
    return {
        WALL: run.wall,
        RATE: total_mb / run.wall,
        OWN_CPU: run.own_cpu,
        BAD_LOGS: float(in_logs.damaged),
        BAD_STREAM: float(in_stream.damaged),
    }


def sample_shell(bench: Bench, env: dict[str, str], ranks: int, total_mb: float, target: str) -> dict[str, float]:
    """The same writers started by a shell loop, to /dev/null (target "null") or to a file each."""
    out = bench.folder("b4-files")
    redirect = "/dev/null" if target == "null" else f'"{out}/rank_$r.txt"'
    script = f'for r in $(seq 0 {ranks - 1}); do RANK=$r "$PY" "$WRITER" > {redirect} & done; wait'
    run, _ = bench.run("b4-loop", [["bash", "-c", script]], bench.base_env(env))
    return {WALL: run.wall, RATE: total_mb / run.wall}


def writers_env(bench: Bench, lines_dir: Path) -> dict[str, str]:
    return {"BENCH_LINES_DIR": str(lines_dir), "PY": bench.python, "WRITER": bench.workload("writer.py")}


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B4", TITLE)
    ranks = bench.sizes.log_ranks
    lines_dir, expected = prepare(bench, ranks, bench.sizes.log_bytes_per_rank)
    total_mb = sum(len(data) for data, _ in expected.values()) / 1e6
    writer = bench.workload("writer.py")
    env = writers_env(bench, lines_dir)
    job = bench.job_file(f"{bench.python} {writer}", per_node=ranks)
    checks: dict[str, list[str]] = {}

    def distrun() -> dict[str, float]:
        return sample_distrun(bench, job, env, expected, total_mb, checks.setdefault(DISTRUN, []))

    def loop(target: str) -> dict[str, float]:
        return sample_shell(bench, env, ranks, total_mb, target)

    def torchrun() -> dict[str, float]:
        logs = bench.folder("b4-torchrun-logs")
        argv = [*bench.peers.torchrun, "--standalone", "--nproc-per-node", str(ranks)]
        argv += ["--tee", "3", "--log-dir", str(logs), writer]
        run, output = bench.run("b4-torchrun", [argv], bench.base_env(env), timeout=120)
        labels = {f"[default{rank}]:".encode(): rank for rank in expected}
        in_stream, _ = check_stream(output.read_bytes(), labels, expected)
        checks.setdefault("torchrun --tee", []).append(f"stream: {in_stream.summary()}")
        return {WALL: run.wall, RATE: total_mb / run.wall, BAD_STREAM: float(in_stream.damaged)}

    methods = [
        Method(DISTRUN, distrun),
        Method("to /dev/null", lambda: loop("null")),
        Method("to files (shell)", lambda: loop("files")),
    ]
    if bench.wants("torchrun"):
        methods.append(Method("torchrun --tee", torchrun, reps=1))
    reps = bench.reps(3)
    case = f"{ranks} ranks x {bench.sizes.log_bytes_per_rank / 1e6:g} MB"
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        values = samples[method.name].values
        result.reps[method.name] = len(values.get(WALL, []))
        for metric in (WALL, RATE, OWN_CPU, BAD_LOGS, BAD_STREAM):
            if metric in values:
                result.rows.append(Row(case, method.name, metric, values[metric]))
    for name, lines in checks.items():
        result.notes.append(f"checker, {name}: " + " | ".join(sorted(set(lines))))
    result.notes.append(
        f"{total_mb:.0f} MB in all, lines of 21 to 140 bytes written in 64 KiB chunks that cut lines anywhere; "
        "MB/s = all bytes over the command's wall time (start-up included)"
    )
    _targets(result, case)
    if any(t.met is False for t in result.targets):
        bench.log("  B4 profiling distrun run (a target was missed)")
        profile = cprofile(bench, ["run", str(job)], bench.distrun_env(env))
        result.profiles.append(("`distrun run` of the 4 writers: cProfile, wall clock", profile))
    return result


def _targets(result: CaseResult, case: str) -> None:
    bad = [result.row(case, DISTRUN, m) for m in (BAD_LOGS, BAD_STREAM)]
    rate = result.row(case, DISTRUN, RATE)
    if any(row is None for row in bad) or rate is None:
        return
    worst = max(max(row.values) for row in bad if row is not None)
    result.targets.append(
        Target(
            "B4", "0 lost, split or fused lines (per-rank files and live stream)", f"{worst:.0f} at worst", worst == 0
        )
    )
    result.targets.append(
        Target(
            "B4",
            f"at least {MIN_RATE:.0f} MB/s",
            f"median {rate.median:.0f} MB/s (min {rate.low:.0f})",
            None if math.isnan(rate.median) else rate.median >= MIN_RATE,
        )
    )
