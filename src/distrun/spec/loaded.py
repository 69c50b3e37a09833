"""A job as the loader gives it: the validated `JobSpec` and where its file and keys are.

Its own module, below the loader and its checks (`distrun.loading.loader` gives the same name),
so that a check can name it and what takes a loaded job need not import the loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from distrun.core.errors import Position
from distrun.core.job_kind import JobKind
from distrun.spec import models
from distrun.spec.source_map import SourceMap

__all__ = ["LoadedAutoMLJob", "LoadedJob", "loaded_job"]


@dataclass
class LoadedJob:
    kind: ClassVar[JobKind] = JobKind.COMMAND  # what it runs as (`distrun.runner.job_kinds`)
    spec: models.JobSpec
    base_dir: Path  # relative paths in the job resolve against this folder
    source: str  # the job file, or "<python>" for SDK-built jobs
    source_map: SourceMap

    def position(self, *path: str | int) -> Position:
        return self.source_map.find(tuple(path))


@dataclass
class LoadedAutoMLJob(LoadedJob):
    """An AutoML job: the command job that runs its search (`distrun.loading.automl_loader`),
    recorded as an AutoML job so that the faces name it and plan it as one."""

    kind: ClassVar[JobKind] = JobKind.AUTOML


def loaded_job(spec: models.JobSpec, base_dir: Path, source: str, source_map: SourceMap) -> LoadedJob:
    """The loaded job, of the class of what it runs as: the command job that runs an AutoML search
    (its settings variable and task tag, as `distrun.loading.automl_loader` writes them; a
    pipeline's AutoML step too) is an AutoML job."""
    from distrun.spec.automl_models import SETTINGS_VARIABLE, TASK_TAG

    automl = SETTINGS_VARIABLE in spec.environment_variables and TASK_TAG in spec.tags
    return (LoadedAutoMLJob if automl else LoadedJob)(spec, base_dir, source, source_map)
