"""The job names distrun derives from a pipeline's or sweep's name, checked before anything runs.

A pipeline's step runs as the job PIPELINE.STEP (PIPELINE.OUTER.STEP inside a pipeline
component), a sweep's trial as SWEEP.trial_N, a pipeline's sweep step's trial as
PIPELINE.STEP.trial_N. Each is a job folder's name, so each is held to a job name's rule (at
most 255 characters: the file system's limit for one name). The loaders check them with the
file's `name` (or, when it has none, a name as long as the longest distrun generates), and
`run --name` with that name, so that `job validate`, `plan` and `run` refuse the same files and
nothing is recorded for a run that could not start its steps or trials.

Pure: from names and counts to problems.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from distrun.core.errors import Position, Problem
from distrun.spec import models
from distrun.spec.loaded_pipeline import LoadedPipeline, PipelineStep
from distrun.spec.loaded_sweep import LoadedSweep

MAX_JOB_NAME = 255  # models.JOB_NAME_PATTERN's length
# The longest name distrun generates for a job given none (`adjective_noun_` and 8 hex
# digits: distrun.prepare.submission.generate_name; a test holds the two together).
GENERATED_NAME_MAX = 22
TRIALS_BY_DEFAULT = 1000  # SweepLimits.max_total_trials's default
_SHORTER_STEP = "shorten the step names (and a sweep step's limits.max_total_trials)"


def sweep_trial_count(search_space: Any, sampling_algorithm: Any, limits: Any) -> int:
    """How many trials a sweep can start, from its raw keys: `limits.max_total_trials`, and for
    grid sampling at most every combination of its choices."""
    count = limits.get("max_total_trials") if isinstance(limits, dict) else None
    count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 1 else TRIALS_BY_DEFAULT
    kind = sampling_algorithm.get("type") if isinstance(sampling_algorithm, dict) else sampling_algorithm
    if kind == "grid" and isinstance(search_space, dict):
        sizes = [e.get("values") for e in search_space.values() if isinstance(e, dict)]
        if sizes and all(isinstance(values, list) for values in sizes):
            count = min(count, math.prod(len(values) for values in sizes))  # type: ignore[arg-type]
    return max(count, 1)


def last_trial_suffix(trials: int) -> str:
    """`.trial_N` of a sweep's last trial (N = trials - 1), without writing out a huge N."""
    if trials > 10**100:  # far past any name's limit: its length is what counts
        return ".trial_" + "9" * (int(trials.bit_length() * math.log10(2)) + 1)
    return f".trial_{trials - 1}"


def step_suffixes(steps: Mapping[str, PipelineStep]) -> dict[str, str]:
    """Each step's longest job name after the pipeline's name: `.STEP`, a sweep step's `.STEP.trial_N`."""
    found = {}
    for name, step in steps.items():
        suffix = f".{name}"
        if step.is_sweep:
            document = step.document
            trials = sweep_trial_count(
                document.get("search_space"), document.get("sampling_algorithm", "random"), document.get("limits")
            )
            suffix += last_trial_suffix(trials)
        found[name] = suffix
    return found


def name_problems(
    name: str | None, suffixes: Mapping[str, str], key: str, where: Position | None, what: str, shorter: str
) -> list[Problem]:
    """`name` (a pipeline's or sweep's; None: one distrun generates) with the longest of its
    derived names' `suffixes` (for each step or the last trial), past a job name's limit.
    `key`/`where`: where the name was given (or, generated, where the step was); `shorter`: the
    fix when no name is short enough."""
    if not suffixes:
        return []
    longest = max(suffixes, key=lambda part: len(suffixes[part]))
    suffix = suffixes[longest]
    length = (GENERATED_NAME_MAX if name is None else len(name)) + len(suffix)
    if length <= MAX_JOB_NAME:
        return []
    room = MAX_JOB_NAME - len(suffix)
    if name is None:
        message = (
            f"{what} {longest!r} runs as the job NAME{suffix}: with a name distrun generates "
            f"(up to {GENERATED_NAME_MAX} characters) that is {length} characters, more than a job name's "
            f"{MAX_JOB_NAME}"
        )
        hint = shorter if room < 1 else f"give it a `name:` of at most {room} characters, or {shorter}"
        return [Problem(message, key, where, hint)]
    shown = name if len(name) <= 40 else f"{name[:20]}...{name[-12:]}"
    message = (
        f"{what} {longest!r} runs as the job {shown}{suffix}, {length} characters: a job name has at most "
        f"{MAX_JOB_NAME}"
    )
    hint = f"shorten the name to at most {room} characters" if room >= 1 else shorter
    return [Problem(message, key, where, hint)]


def pipeline_name_problems(
    name: str | None, where: Position | None, steps: Mapping[str, PipelineStep], key: str = "name"
) -> list[Problem]:
    """The pipeline `name` (given at `where`, `key`; None: generated) and its steps' job names."""
    suffixes = step_suffixes(steps)
    if name is not None:
        return name_problems(name, suffixes, key, where, "step", _SHORTER_STEP)
    found: list[Problem] = []
    for step, suffix in suffixes.items():  # each said where its step is written
        at = steps[step]
        found += name_problems(None, {step: suffix}, at.key, at.source_map.find(()), "step", _SHORTER_STEP)
    return found


def sweep_name_problems(name: str | None, where: Position | None, trials: int, key: str = "name") -> list[Problem]:
    """The sweep `name` (given at `where`; None: generated) and its last trial's job name."""
    suffix = {f"trial_{trials - 1}": last_trial_suffix(trials)}
    return name_problems(name, suffix, key, where, "trial", "lower limits.max_total_trials")


def run_name_problems(loaded: LoadedPipeline | LoadedSweep, name: str) -> list[Problem]:
    """`run --name NAME` of a pipeline or sweep: the name itself, then the job names it derives."""
    where = Position("--name")
    if not re.fullmatch(models.JOB_NAME_PATTERN, name):
        return [
            Problem(
                f"job name {name[:80]!r} is not allowed: it names a folder, so it may hold only letters, digits, "
                "'_', '.' and '-', must start with a letter or digit, and be at most 255 characters",
                "",
                where,
                "e.g. --name mnist_ddp-2",
            )
        ]
    if isinstance(loaded, LoadedSweep):
        spec = loaded.spec
        trials = sweep_trial_count(spec.search_space, spec.sampling_algorithm, spec.limits.model_dump())
        return sweep_name_problems(name, where, trials, "")
    return pipeline_name_problems(name, where, loaded.steps, "")
