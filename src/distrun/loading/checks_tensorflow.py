"""Checks for `type: tensorflow` that the model's field types cannot express.

`tensorflow_problems(job)` returns one `Problem` per thing wrong (empty when the job is not a
TensorFlow job); the loader adds them to its semantic checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distrun.core.errors import Problem
from distrun.loading.checks import env_name_problems
from distrun.spec import models

if TYPE_CHECKING:
    from distrun.spec.loaded import LoadedJob

# A parameter server per worker is already generous; beyond this many per training task the
# count is almost surely a typo (and each one is a process that holds a port and memory).
MAX_PS_PER_TRAINER = 8


def tensorflow_problems(job: LoadedJob) -> list[Problem]:
    dist = job.spec.distribution
    if not isinstance(dist, models.TensorFlowDistribution):
        return []
    return [*_count_problems(job, dist), *_ps_settings_problems(job, dist)]


def _count_problems(job: LoadedJob, dist: models.TensorFlowDistribution) -> list[Problem]:
    problems = []
    nodes = job.spec.node_count
    workers = dist.worker_count if dist.worker_count is not None else nodes
    total = dist.chief_count + workers + dist.parameter_server_count
    if total < nodes:
        where = ("distribution", "worker_count") if dist.worker_count is not None else ("resources", "instance_count")
        problems.append(
            Problem(
                f"instance_count is {nodes} but the job has only {total} TensorFlow task(s): "
                f"{nodes - total} node(s) would run nothing",
                ".".join(where),
                job.position(*where),
                f"set resources.instance_count to {total}, or raise worker_count to at least "
                f"{nodes - dist.chief_count - dist.parameter_server_count}",
            )
        )
    trainers = dist.chief_count + workers
    if dist.parameter_server_count > MAX_PS_PER_TRAINER * trainers:
        problems.append(
            Problem(
                f"parameter_server_count {dist.parameter_server_count} is more than {MAX_PS_PER_TRAINER} per "
                f"training task ({trainers} chief/worker task(s))",
                "distribution.parameter_server_count",
                job.position("distribution", "parameter_server_count"),
                "parameter servers only hold variables for the workers; use fewer (often 1 or 2), or more workers",
            )
        )
    return problems


def _ps_settings_problems(job: LoadedJob, dist: models.TensorFlowDistribution) -> list[Problem]:
    settings = dist.parameter_server
    if settings is None:
        return []
    problems = []
    if dist.parameter_server_count == 0:
        problems.append(
            Problem(
                "parameter_server settings are given but parameter_server_count is 0, so no task would use them",
                "distribution.parameter_server",
                job.position("distribution", "parameter_server"),
                "set parameter_server_count (distributed.tensorflow.parameter_server.count in the draft form), "
                "or remove the settings",
            )
        )
    env_path = ("distribution", "parameter_server", "environment_variables")
    problems.extend(env_name_problems(settings.environment_variables, env_path, job.position))
    for key in settings.environment_variables:
        if key in models.RESERVED_ENV_VARS or key.startswith(models.RESERVED_ENV_PREFIXES):
            path = ("distribution", "parameter_server", "environment_variables", key)
            problems.append(
                Problem(
                    f"{key} is set by distrun for every process and cannot be set here",
                    ".".join(path),
                    job.position(*path),
                    "remove it; distrun gives each parameter server its own TF_CONFIG",
                )
            )
    return problems
