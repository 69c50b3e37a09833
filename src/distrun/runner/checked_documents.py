"""Load a job, pipeline or sweep file with its compute target checked in the same round.

The loader knows nothing of DISTRUN_HOME's compute targets, so an unknown target used to be
reported only once the file had no other problem: a user fixed a missing input path, ran
again, and only then heard that the compute was misspelt. When the file has problems, the
target it names (or `--compute`) is checked too and reported with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.core.errors import DistrunError, Position, Problem, ValidationError
from distrun.loading.documents import load_document_file
from distrun.loading.raw_checks import in_file_order
from distrun.prepare.compute import resolve_target
from distrun.spec.loaded import LoadedJob
from distrun.spec.loaded_pipeline import LoadedPipeline
from distrun.spec.loaded_sweep import LoadedSweep
from distrun.spec.overrides import apply_overrides
from distrun.spec.yaml_source import read_yaml_file
from distrun.store.layout import Layout


def load_checked_document(
    file: str | Path, overrides: tuple[str, ...] | list[str], layout: Layout, compute: str | None = None
) -> LoadedJob | LoadedPipeline | LoadedSweep:
    """The document `file` holds; a ValidationError lists its problems and an unknown compute target."""
    try:
        return load_document_file(file, overrides)
    except ValidationError as exc:
        problem = compute_problem(file, overrides, layout, compute)
        if problem is None:
            raise
        raise ValidationError(in_file_order([*exc.problems, problem])) from None


def compute_problem(
    file: str | Path, overrides: tuple[str, ...] | list[str], layout: Layout, compute: str | None
) -> Problem | None:
    """A problem when the target `compute` (else the file's top-level `compute:`) is not defined."""
    if compute:
        reference: Any = compute
        where = Position(f"--compute {compute}")
    else:
        try:
            data, smap = read_yaml_file(Path(file))
            data = apply_overrides(data, smap, list(overrides))
        except (DistrunError, OSError):
            return None  # already among the file's problems
        reference = data.get("compute") if isinstance(data, dict) else None
        where = smap.find(("compute",))
    if not isinstance(reference, str):
        return None  # the seed form's mapping is checked once the job loads
    try:
        resolve_target(reference, layout.config_path)
    except DistrunError as exc:
        return Problem(exc.message, "compute", where, exc.hint)
    return None
