"""B10 pipeline steps: a chain of N no-op command steps and an N-wide fan-out on local compute.

`distrun run pipeline.yml` (attached, every step a distrun job of its own with its record, logs
and reuse key) against a shell script that runs the same commands: one after another for the
chain, all in the background then `wait` for the fan-out (the floor: no records, no logs).
The figure that matters is distrun's time per step over the steps' own process time:
(distrun's wall - the script's wall) / N.

Each step's command differs (`/bin/true <step>`), so that no step is reused from another of the
same run (their work would otherwise be the same), and every sample has a `DISTRUN_HOME` of its
own, so that none is reused from an earlier sample: every step runs, as in a pipeline's first run.
The chain's steps each read the output of the step before (that is what orders them). On local
compute distrun starts at most as many steps at once as the machine has cores (docs/pipelines.md);
the script starts all of them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchmarks.bench import Bench, CaseError
from benchmarks.harness import Method, alternate
from benchmarks.profiling import cprofile
from benchmarks.results import DISTRUN, CaseResult, Row, Target

TITLE = "pipeline steps"
MAX_OVERHEAD_PER_STEP = 0.3  # seconds per step in the chain, over the shell script's wall
SCRIPT = "shell script"
WALL = "wall s"
OWN_CPU = "own CPU s"
PER_STEP = "per step over the script s"
TRUE = "/bin/true"


def step_names(steps: int) -> list[str]:
    return [f"s{i:02d}" for i in range(steps)]


def pipeline(steps: int, chain: bool) -> dict[str, Any]:
    """The pipeline document: `steps` inline command steps, each reading the one before in a chain."""
    names = step_names(steps)
    jobs: dict[str, Any] = {}
    for i, name in enumerate(names):
        step: dict[str, Any] = {"type": "command", "command": f"{TRUE} {name}"}
        if chain:
            step["outputs"] = {"out": {"type": "uri_folder"}}
            if i:
                step["inputs"] = {"prev": "${{parent.jobs." + names[i - 1] + ".outputs.out}}"}
        jobs[name] = step
    return {"type": "pipeline", "settings": {"default_compute": "local"}, "jobs": jobs}


def script(steps: int, chain: bool) -> str:
    """The same commands as a shell script: in order, or all in the background then wait."""
    lines = [f"{TRUE} {name}" + ("" if chain else " &") for name in step_names(steps)]
    return "\n".join([*lines, *([] if chain else ["wait"])]) + "\n"


def pipeline_files(bench: Bench, steps: int, chain: bool) -> tuple[Path, Path]:
    folder = bench.folder("b10-chain" if chain else "b10-fan-out")
    yml = folder / "pipeline.yml"
    yml.write_text(json.dumps(pipeline(steps, chain), indent=1))  # JSON is YAML
    sh = folder / "steps.sh"
    sh.write_text(script(steps, chain))
    return yml, sh


def _methods(bench: Bench, steps: int, chain: bool) -> list[Method]:
    yml, sh = pipeline_files(bench, steps, chain)
    penv = bench.base_env()

    def distrun() -> dict[str, float]:
        run, output = bench.run("b10-distrun", [bench.distrun("run", str(yml))], fresh_home(bench), timeout=600)
        every_step_ran(output, steps)
        return {WALL: run.wall, OWN_CPU: run.own_cpu}

    def shell() -> dict[str, float]:
        run, _ = bench.run("b10-script", [["bash", str(sh)]], penv)
        return {WALL: run.wall, OWN_CPU: run.own_cpu}

    return [Method(DISTRUN, distrun), Method(SCRIPT, shell)]


def fresh_home(bench: Bench) -> dict[str, str]:
    """distrun's environment with a DISTRUN_HOME of its own: no earlier sample's step to reuse."""
    env = bench.distrun_env()
    env["DISTRUN_HOME"] = str(bench.folder("b10-home"))
    return env


def every_step_ran(output: Path, steps: int) -> None:
    """A sample counts only if each of its steps ran as a job and completed (none reused, none failed)."""
    text = output.read_text(errors="replace")
    completed = text.count("] Completed in ")
    if completed != steps or "Reused" in text:
        raise CaseError(f"expected {steps} steps run and completed, found {completed}; output ends:\n{text[-2000:]}")


def run(bench: Bench) -> CaseResult:
    result = CaseResult("B10", TITLE)
    reps = bench.reps(3)
    steps = bench.sizes.pipeline_steps
    for chain in (True, False):
        case = f"{steps}-step chain" if chain else f"{steps}-wide fan-out"
        bench.log(f"  B10 {case}")
        methods = _methods(bench, steps, chain)
        samples = alternate(methods, reps, bench.log)
        for method in methods:
            for metric in (WALL, OWN_CPU):
                result.rows.append(Row(case, method.name, metric, samples[method.name].values[metric]))
            result.reps[method.name] = reps
        # Per step, sample by sample (the samples alternate, so the i-th of each ran side by side).
        walls = zip(samples[DISTRUN].values[WALL], samples[SCRIPT].values[WALL], strict=True)
        result.rows.append(Row(case, DISTRUN, PER_STEP, [(mine - floor) / steps for mine, floor in walls]))
        if chain:
            _target(result, case)
            if result.targets[-1].met is False:
                _profile(bench, result, steps)
    result.notes += [
        f"every step runs `{TRUE} <step>` under bash, as distrun runs a job's command; the script runs"
        " the same commands (chain: one after another; fan-out: all in the background, then wait)",
        "every distrun sample has a DISTRUN_HOME of its own (no step is reused: every step runs);"
        " on local compute distrun starts at most as many steps at once as the machine has cores",
        f"{PER_STEP}: (distrun's wall - the script's wall) / steps, of the samples taken side by side",
        "own CPU: the command's own process (distrun's pipeline supervisor, not the steps' supervisors)",
    ]
    return result


def _target(result: CaseResult, case: str) -> None:
    per_step = result.median(case, DISTRUN, PER_STEP)
    result.targets.append(
        Target(
            "B10",
            f"at most {MAX_OVERHEAD_PER_STEP} s per step over the shell script in the chain",
            f"{per_step:.3f} s per step (median)",
            None if math.isnan(per_step) else per_step <= MAX_OVERHEAD_PER_STEP,
        )
    )


def _profile(bench: Bench, result: CaseResult, steps: int) -> None:
    bench.log(f"  B10 profiling distrun run of the {steps}-step chain (the target was missed)")
    yml, _ = pipeline_files(bench, steps, True)
    env = fresh_home(bench)
    what = f"`distrun run` of the {steps}-step chain, its own process (the steps' supervisors are others)"
    result.profiles.append((what, cprofile(bench, ["run", str(yml)], env)))
