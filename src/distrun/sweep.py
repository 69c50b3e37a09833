"""`azure.ai.ml.sweep` for distrun: `from distrun.sweep import Choice, Uniform, BanditPolicy, ...`.

Search space expressions, sampling algorithms, early termination policies, the objective, the
limits, and `SweepJob`: what `command(...)(lr=Choice([...])).sweep(...)` returns, submitted with
`MLClient.jobs.create_or_update` and run as a sweep job file is (docs/sweeps.md).
"""

from __future__ import annotations

from distrun.sdk import sweep_space
from distrun.sdk.sweep_job import Sweep, SweepJob
from distrun.sdk.sweep_space import *  # noqa: F403  (the expressions, policies, algorithms, objective, limits)

__all__ = [*sweep_space.__all__, "Sweep", "SweepJob"]
