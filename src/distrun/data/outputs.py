"""A job's outputs beyond its own folder: a datastore `path`, and registration as a data asset.

An output with `name:` (and optionally `version:`) is registered as a data asset when the job
is prepared, pointing at `azureml://jobs/<job>/outputs/<output>`; the asset can be used once
the job has completed (before that, using it is an error that says so).
"""

from __future__ import annotations

from pathlib import Path

from distrun.core.file_modes import make_dirs
from distrun.data.locations import job_output_uri, output_location
from distrun.spec import models


def bind_output(out: models.OutputSpec | None, name: str, job: str, home: Path, materialize: bool) -> str | None:
    """The output's path when it is not the job's named-outputs folder (None when it is)."""
    if out is None:
        return None
    target = output_location(out.path, name, job, home)
    if materialize and out.name:
        from distrun.data.assets import DataAsset, create_asset

        create_asset(home, DataAsset(out.name, out.version or "", out.type, job_output_uri(job, name), job=job))
    if target is None:
        return None
    if materialize:
        make_dirs(target.parent if out.type == "uri_file" else target)
    return str(target)
