"""Load the document a file holds, as the file says: a command job, a pipeline job, a sweep job or
an AutoML job."""

from __future__ import annotations

from pathlib import Path

from distrun.loading.automl_loader import is_automl_document, load_automl_data
from distrun.loading.pipeline_loader import load_document_data
from distrun.loading.sweep_loader import load_sweep_data
from distrun.spec.job_kind import is_sweep_document
from distrun.spec.loaded import LoadedJob
from distrun.spec.loaded_pipeline import LoadedPipeline
from distrun.spec.loaded_sweep import LoadedSweep
from distrun.spec.yaml_source import read_yaml_file

__all__ = ["load_document_file"]


def load_document_file(
    path: str | Path, overrides: list[str] | tuple[str, ...] = ()
) -> LoadedJob | LoadedPipeline | LoadedSweep:
    """`type: sweep` or a sweepJob `$schema`: a sweep; else a pipeline or a command job
    (`distrun.loading.pipeline_loader.load_document_file`). The file is read once."""
    file = Path(path)
    data, smap = read_yaml_file(file)
    if is_automl_document(data):  # the command job that runs its search (docs/automl.md)
        return load_automl_data(data, file.resolve().parent, str(file), overrides, smap)
    if isinstance(data, dict) and is_sweep_document(data):
        return load_sweep_data(data, file.resolve().parent, str(file), overrides, smap)
    return load_document_data(data, file, overrides, smap)
