"""A Spark job as the loader gives it: the command job that runs it, and the Spark job itself.

A `LoadedJob` whose `spec` is the command job running `spark-submit` in local mode (what
`distrun plan` shows and local compute runs); `spark` is the job as written, from which a Spark
compute target builds its own command (`distrun.spec.spark_submit.command_job`); `notes` are
the settings distrun accepts but does not honour exactly, said once when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from distrun.core.job_kind import JobKind
from distrun.spec.loaded import LoadedJob
from distrun.spec.spark_models import SparkJobSpec

__all__ = ["LoadedSparkJob"]


@dataclass
class LoadedSparkJob(LoadedJob):
    kind: ClassVar[JobKind] = JobKind.SPARK
    spark: SparkJobSpec = field(kw_only=True)
    local_cores: int = field(kw_only=True, default=1)  # Spark's local mode: local[N]
    local_note: str | None = field(kw_only=True, default=None)  # N is less than conf asks for: said on local compute
    notes: tuple[str, ...] = field(kw_only=True, default=())
