"""A sweep job as the loader gives it: the validated sweep, its search space, sampling algorithm
and early termination policy as models, and its trial as the command job document each trial
runs as.

Plain data. Each search space parameter is an input of the trial's document (the command's
`${{search_space.X}}` reads `${{inputs.X}}`); `trial_document(parameters)` gives those inputs a
trial's values, to be loaded and checked as a job file is (`distrun.loading.loader.load_job_data`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from distrun.core.job_kind import JobKind
from distrun.spec.source_map import SourceMap
from distrun.spec.sweep_models import Expression, Policy, SamplingAlgorithm, SweepJob

__all__ = ["LoadedSweep"]


@dataclass
class LoadedSweep:
    kind: ClassVar[JobKind] = JobKind.SWEEP  # what it runs as (`distrun.runner.job_kinds`)
    spec: SweepJob
    base_dir: Path  # the sweep file's folder
    source: str
    source_map: SourceMap
    search_space: dict[str, Expression]  # in file order
    algorithm: SamplingAlgorithm
    policy: Policy | None
    trial: dict[str, Any]  # the trial's command job document, its parameters' inputs not set
    trial_base_dir: Path  # where the trial's relative paths start (a component trial: its folder)
    trial_source_map: SourceMap
    notes: list[str] = field(default_factory=list)

    def trial_document(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """The trial's command job with each search space parameter's value as its input."""
        document = copy.deepcopy(self.trial)
        document.setdefault("inputs", {}).update(parameters)
        return document
