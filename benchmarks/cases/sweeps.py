"""B11 sweep trials: a grid sweep of N no-op trials, 4 at once, on local compute.

`distrun run sweep.yml` (attached; every trial a distrun job of its own with its record, folder
and logs, its metric looked for in its MLflow run) against a shell loop that runs the same
commands 4 at a time (`xargs -P 4`). The figure that matters is distrun's time per trial over
the trials' own process time: (distrun's wall - the loop's wall) / N.

Each trial runs `/bin/true <i>` with its own grid value i. Every distrun sample has a
DISTRUN_HOME of its own. On local compute distrun runs at most as many 1-process trials at once
as the machine has cores (docs/sweeps.md): on 2 cores, 2 at once where the loop runs 4.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchmarks.bench import Bench, CaseError
from benchmarks.harness import Method, alternate
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "sweep trials"
MAX_OVERHEAD_PER_TRIAL = 0.3  # seconds per trial, over the shell loop's wall
CONCURRENT = 4
LOOP = "shell loop"
WALL = "wall s"
OWN_CPU = "own CPU s"
PER_TRIAL = "per trial over the loop s"
TRUE = "/bin/true"


def sweep(trials: int) -> dict[str, Any]:
    """The sweep document: a grid of `trials` values, each trial `/bin/true <value>`."""
    return {
        "type": "sweep",
        "trial": {"command": TRUE + " ${{search_space.i}}"},
        "search_space": {"i": {"type": "choice", "values": list(range(trials))}},
        "sampling_algorithm": "grid",
        "objective": {"goal": "minimize", "primary_metric": "loss"},
        "limits": {"max_total_trials": trials, "max_concurrent_trials": CONCURRENT},
    }


def sweep_files(bench: Bench, trials: int) -> tuple[Path, Path]:
    folder = bench.folder("b11-sweep")
    yml = folder / "sweep.yml"
    yml.write_text(json.dumps(sweep(trials), indent=1))  # JSON is YAML
    sh = folder / "trials.sh"
    sh.write_text(f"seq 0 {trials - 1} | xargs -P {CONCURRENT} -n 1 {TRUE}\n")
    return yml, sh


def every_trial_ran(output: Path, trials: int) -> None:
    text = output.read_text(errors="replace")
    completed = text.count("] Completed in ")
    if completed != trials:
        raise CaseError(f"expected {trials} trials completed, found {completed}; output ends:\n{text[-2000:]}")


def unranked(output: Path) -> None:
    text = output.read_text(errors="replace")
    if "Reason: no trial could be ranked" not in text:
        raise CaseError(f"expected the sweep to end as no trial could be ranked; output ends:\n{text[-2000:]}")


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B11", TITLE)
    reps = bench.reps(3)
    trials = bench.sizes.sweep_trials
    yml, sh = sweep_files(bench, trials)
    case = f"{trials} no-op trials, {CONCURRENT} at once"

    def distrun() -> dict[str, float]:
        env = bench.distrun_env()
        env["DISTRUN_HOME"] = str(bench.folder("b11-home"))
        # The trials log no metric (tracking is off), so the sweep ends Failed, "no trial could be
        # ranked", once every trial completed: that end, and no other, is this sample's.
        run, output = bench.run("b11-distrun", [bench.distrun("run", str(yml))], env, timeout=900, expect="any")
        every_trial_ran(output, trials)
        unranked(output)
        return {WALL: run.wall, OWN_CPU: run.own_cpu}

    def loop() -> dict[str, float]:
        run, _ = bench.run("b11-loop", [["bash", str(sh)]], bench.base_env())
        return {WALL: run.wall, OWN_CPU: run.own_cpu}

    methods = [Method(DISTRUN, distrun), Method(LOOP, loop)]
    bench.log(f"  B11 {case}")
    samples = alternate(methods, reps, bench.log)
    for method in methods:
        for metric in (WALL, OWN_CPU):
            result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
        result.reps[method.name] = reps
    walls = zip(samples[DISTRUN].values[WALL], samples[LOOP].values[WALL], strict=True)
    result.rows.append(Row(case, DISTRUN, PER_TRIAL, [(mine - floor) / trials for mine, floor in walls]))
    per_trial = result.median(case, DISTRUN, PER_TRIAL)
    result.targets.append(
        Target(
            "B11",
            f"at most {MAX_OVERHEAD_PER_TRIAL} s per trial over the shell loop",
            f"{per_trial:.3f} s per trial (median)",
            None if math.isnan(per_trial) else per_trial <= MAX_OVERHEAD_PER_TRIAL,
        )
    )
    result.notes += [
        f"every trial runs `{TRUE} <i>` under bash, as distrun runs a job's command; the loop runs the same"
        f" commands {CONCURRENT} at a time (`xargs -P {CONCURRENT}`)",
        "every distrun sample has a DISTRUN_HOME of its own; on local compute distrun runs at most as many"
        " 1-process trials at once as the machine has cores",
        f"{PER_TRIAL}: (distrun's wall - the loop's wall) / trials, of the samples taken side by side",
        "own CPU: the command's own process (distrun's sweep supervisor, not the trials' supervisors)",
    ]
    return result
