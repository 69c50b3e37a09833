"""What kind of job a record holds: a command job, or a parent whose children are jobs.

Stored in every record at submit (`distrun.store.index`), so that the faces dispatch on it
(`distrun.runner.job_kinds`) instead of guessing from which fields a record happens to hold.
A module of its own that imports nothing of distrun, as `distrun.core.job_status`, so that the
store and the layers above it can all name a kind.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class JobKind(str, Enum):
    """Azure ML's job types that distrun records. A `str`: it compares, stores and prints as its value.

    COMMAND, PARALLEL, AUTOML and SPARK run processes: a parallel job's gang pulls mini-batches
    from a queue instead of running one command, an AutoML job's search is one process whose
    trials are runs of that process (not jobs), a Spark job's driver is its process. PIPELINE and
    SWEEP are parents whose children (steps, trials) are jobs of their own.
    """

    COMMAND = "command"
    PIPELINE = "pipeline"
    SWEEP = "sweep"
    PARALLEL = "parallel"
    AUTOML = "automl"
    SPARK = "spark"

    def __str__(self) -> str:
        return self.value

    @property
    def children(self) -> str:
        """What its children are called ("steps", "trials"); "" for a job that runs processes itself."""
        return _CHILDREN.get(self, "")

    @property
    def has_children(self) -> bool:
        return bool(self.children)

    @property
    def noun(self) -> str:
        """How one is named: "job", "pipeline", "sweep", "AutoML job" ..."""
        return _NOUNS.get(self, self.value)

    @property
    def a_noun(self) -> str:
        """ "a pipeline", "an AutoML job": as a sentence names one."""
        return f"{'an' if self.noun[0].lower() in 'aeiou' else 'a'} {self.noun}"


# A parent's children are jobs of their own (a pipeline's steps, a sweep's trials). A parallel
# job's mini-batches are not (its own processes run them), nor are an AutoML job's trials (runs of
# its one process); a Spark job's executors are Spark's.
_CHILDREN = {
    JobKind.PIPELINE: "steps",
    JobKind.SWEEP: "trials",
}
_NOUNS = {
    JobKind.COMMAND: "job",
    JobKind.PARALLEL: "parallel job",
    JobKind.AUTOML: "AutoML job",
    JobKind.SPARK: "Spark job",
}


def inferred_kind(steps: Any, sweep: Any) -> JobKind:
    """The kind of a record written before distrun stored kinds, from what it holds: a sweep's
    record has its `sweep` (and its trials as `steps`), a pipeline's its `steps`."""
    if sweep is not None:
        return JobKind.SWEEP
    if steps is not None:
        return JobKind.PIPELINE
    return JobKind.COMMAND
