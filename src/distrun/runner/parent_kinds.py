"""The kinds of parent job, one row each: the policy that runs it over the one parent-run loop
(`distrun.runner.parent_run`). A row's key is the kind a background supervisor's request names.

Adding a kind (a parallel job's mini-batch gangs, an AutoML job's trials) is one policy module,
a class with the members of `distrun.runner.parent_policy.ParentPolicy`, and one row here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distrun.core.errors import DistrunError
from distrun.runner.pipeline_policy import PipelinePolicy
from distrun.runner.sweep_policy import SweepPolicy

if TYPE_CHECKING:
    from distrun.runner.parent_policy import ParentPolicy

PARENT_KINDS: dict[str, type[ParentPolicy]] = {
    PipelinePolicy.kind: PipelinePolicy,
    SweepPolicy.kind: SweepPolicy,
}


def policy_for(loaded: Any) -> type[ParentPolicy]:
    """The policy that runs what the loader made of a file (a pipeline, a sweep)."""
    for policy in PARENT_KINDS.values():
        if policy.runs(loaded):
            return policy
    raise DistrunError(f"{type(loaded).__name__} is not a job with children", "run it as a job")
