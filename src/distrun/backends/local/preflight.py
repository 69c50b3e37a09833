"""Checks made before a local job is recorded: what would make it fail before any process runs."""

from __future__ import annotations

import os

from distrun.core.errors import DistrunError
from distrun.spec import models


class CannotStartError(DistrunError):
    """This machine cannot start the job (a launcher is missing); nothing was recorded."""

    exit_code = 1


def preflight(spec: models.JobSpec) -> None:
    """An MPI job whose launcher is not on PATH stops here: no record, no "Streaming ..."."""
    if not isinstance(spec.distribution, models.MpiDistribution):
        return
    from distrun.agent.mpi_output import missing_program
    from distrun.plan.mpi import user_launcher

    program = user_launcher(spec.command) or "mpirun"
    path = spec.environment_variables.get("PATH", os.environ.get("PATH", os.defpath))
    problem = missing_program(program, path)
    if problem is not None:
        message, _, hint = problem.partition(": ")
        raise CannotStartError(f"{message}; nothing was started or recorded", hint)
