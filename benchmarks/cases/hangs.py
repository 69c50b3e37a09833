"""B12 hung jobs: from the start of a hang to the job's end with every stack written, and `job stacks`.

Tiny non-torch Python ranks (workloads/hang_rank.py) say they are up, stamp the moment of their
last word, and sleep; the last rank sleeps in another function. With limits.hang_timeout T the
job must end Failed (hung), hang/stacks.json holding every rank and the root cause naming the
last rank: measured is the time from the last rank's last word (the start of the hang) to the
command's return, minus T. Then the same ranks run detached and `distrun job stacks -o json`
is timed (the request through the job folder, the agents' py-spy reads, the answer): per rank.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from benchmarks.bench import WORKLOADS, Bench
from benchmarks.cases.first_collective import read_stamps
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "hung jobs: hang to job end with stacks, and job stacks"
HANG_TIMEOUTS = (3.0, 10.0)  # a short one (the read gets half of it as head start) and a longer one
PER_NODE = 8
AFTER = "hang start to job end, past hang_timeout s"
STACKS = "job stacks wall s"
PER_RANK = "job stacks per rank ms"
TARGET_AFTER = 2.0  # the job ends within 2 s after hang_timeout at 64 ranks


def _job(bench: Bench, ranks: int, hang_timeout: float | None) -> Path:
    path = bench.job_file(
        f"python {WORKLOADS / 'hang_rank.py'}",
        nodes=max(1, ranks // PER_NODE),
        per_node=min(ranks, PER_NODE),
        grace_period=1,
    )
    data = json.loads(path.read_text())
    if hang_timeout is not None:
        data["limits"]["hang_timeout"] = hang_timeout
    data["environment_variables"] = {"BENCH_WORLD": str(ranks)}
    path.write_text(json.dumps(data))
    return path


def _hang_sample(bench: Bench, ranks: int, timeout: float) -> dict[str, float]:
    out = bench.folder("b11-out")
    env = bench.distrun_env({"BENCH_OUT": str(out)})
    name = f"b11-hang-{out.name}"
    run, output = bench.run(
        f"hang {ranks}",
        [bench.distrun("run", str(_job(bench, ranks, timeout)), "--name", name)],
        env,
        timeout=120,
        expect="fail",
    )
    silent = read_stamps(out, "silent")
    if len(silent) != ranks:
        raise RuntimeError(f"only ranks {sorted(silent)} started (output: {output})")
    folder = Path(env["DISTRUN_HOME"]) / "jobs" / name
    stacks = json.loads((folder / "hang" / "stacks.json").read_text())
    record = json.loads(
        subprocess.run(
            bench.distrun("job", "show", name, "-o", "json"), env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    if len(stacks["processes"]) != ranks or record["root_cause"]["rank"] != ranks - 1:
        raise RuntimeError(
            f"{name}: {len(stacks['processes'])} stacks, root cause {record['root_cause'].get('reason')}"
        )
    return {AFTER: run.ended - max(silent.values()) - timeout}


def _stacks_sample(bench: Bench, ranks: int) -> dict[str, float]:
    out = bench.folder("b11-out")
    env = bench.distrun_env({"BENCH_OUT": str(out)})
    name = f"b11-stacks-{out.name}"
    subprocess.run(
        bench.distrun("job", "create", "-f", str(_job(bench, ranks, None)), "-n", name),
        env=env,
        check=True,
        capture_output=True,
    )
    try:
        give_up = time.monotonic() + 120
        while len(read_stamps(out, "silent")) < ranks:
            if time.monotonic() > give_up:
                raise RuntimeError(f"{name}: only {len(read_stamps(out, 'silent'))} of {ranks} ranks started")
            time.sleep(0.1)
        started = time.monotonic()
        done = subprocess.run(
            bench.distrun("job", "stacks", name, "-o", "json"), env=env, capture_output=True, text=True
        )
        wall = time.monotonic() - started
        answered = json.loads(done.stdout)["processes"] if done.returncode == 0 else []
        if len([p for p in answered if p["threads"]]) != ranks:
            raise RuntimeError(
                f"{name}: job stacks answered for {len(answered)} of {ranks} ranks: {done.stderr[-2000:]}"
            )
    finally:
        subprocess.run(bench.distrun("job", "cancel", name), env=env, capture_output=True)
    return {STACKS: wall, PER_RANK: wall / ranks * 1000}


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B12", TITLE)
    reps = bench.reps(3)
    timeouts = HANG_TIMEOUTS[:1] if bench.sizes.hang_ranks[-1] < 8 else HANG_TIMEOUTS
    for ranks in bench.sizes.hang_ranks:
        methods = [
            Method(f"hang {t:g}", lambda r=ranks, t=t: _hang_sample(bench, r, t))
            for t in timeouts  # type: ignore[misc]
        ]
        methods.append(Method("job stacks", lambda r=ranks: _stacks_sample(bench, r)))
        collected = alternate(methods, reps, bench.log)
        for timeout in timeouts:
            case = f"{ranks} ranks, hang, hang_timeout {timeout:g} s"
            result.rows.append(Row(case, DISTRUN, AFTER, collected[f"hang {timeout:g}"].values[AFTER]))
            after = result.row(case, DISTRUN, AFTER)
            if ranks == 64 and after is not None:
                result.targets.append(
                    Target(
                        "B12",
                        f"the job ends within {TARGET_AFTER:g} s after hang_timeout ({timeout:g} s) at 64 ranks, "
                        "stacks written",
                        f"max {after.high:.2f} s, median {after.median:.2f} s past hang_timeout",
                        after.high <= TARGET_AFTER,
                    )
                )
        for metric in (STACKS, PER_RANK):
            result.rows.append(
                Row(f"{ranks} ranks, job stacks", DISTRUN, metric, collected["job stacks"].values[metric])
            )
        result.reps[DISTRUN] = reps
    result.notes.append(
        "the hang starts at the last rank's last word; every sample checks that the record blames the last rank "
        "(the odd one out) and that hang/stacks.json holds every rank. `job stacks` wall is the whole command "
        "(its start, the agent's next look at the request folder, up to 0.5 s, and the reads)"
    )
    return result
