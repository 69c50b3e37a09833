"""`load_job` of a pipeline or a sweep YAML file, as azure-ai-ml's `load_job` returns one.

The job keeps the file's document, checked by the loader first (a bad file fails at `load_job`
with file:line, as `distrun job validate` says it). `inputs`, `outputs`, `jobs` and a sweep's
`trial` are that document's parts as attribute dicts, so what a notebook does after loading
changes what runs:

    pipeline_job = load_job("pipeline.yml")
    pipeline_job.inputs.sample_ratio = 0.01
    pipeline_job.settings.default_compute = "cpu-cluster"
    pipeline_job.jobs.train.compute = "gpu-cluster"
    ml_client.jobs.create_or_update(pipeline_job, experiment_name="eval")

Submitting checks the changed document with the same loader again; its relative paths still start
at the file's folder and its problems point at the file's lines. An `Input(...)` set from Python
has its relative path read from where that Python runs, as for `command(...)`.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from distrun.core.user_paths import current_folder
from distrun.sdk.inputs_outputs import Input, Output
from distrun.sdk.pipeline_job import PipelineJob, PipelineJobSettings
from distrun.sdk.pipeline_nodes import StepNames, absolute, input_value
from distrun.sdk.plain import AttrDict, to_data
from distrun.sdk.sweep_job import SweepJob, SweepSource
from distrun.spec.source_map import SourceMap

__all__ = ["LoadedPipelineJob", "LoadedSweepJob", "attr_tree", "document_data", "load_document_job"]

_SETTINGS = ("default_compute", "default_datastore", "continue_on_step_failure", "force_rerun")
_NAMED_FIELDS = ("name", "display_name", "description", "experiment_name", "compute")
_NO_STEPS = StepNames({}, "load_job")  # a loaded document's values name no SDK step's output


def attr_tree(value: Any) -> Any:
    """Plain YAML data with every mapping an `AttrDict` (`job.jobs.train.inputs.lr`)."""
    if isinstance(value, dict):
        return AttrDict({k: attr_tree(v) for k, v in value.items()})
    if isinstance(value, list):
        return [attr_tree(v) for v in value]
    return value


def document_data(value: Any, here: Path) -> Any:
    """A document part back as plain data: SDK objects set from Python as their job data, their
    local relative paths made absolute against `here` (where that Python runs)."""
    if isinstance(value, (Input, os.PathLike)):
        return input_value(value, _NO_STEPS, here, "input")  # as a step's input given in Python
    if isinstance(value, Output):
        data = dict(to_data(value))
        if "path" in data:
            data["path"] = absolute(data["path"], here)
        return data
    if isinstance(value, dict):
        return {k: document_data(v, here) for k, v in value.items()}
    if isinstance(value, list):
        return [document_data(v, here) for v in value]
    if callable(getattr(value, "_to_data", None)):
        return to_data(value)
    return value


def _keep_file(job: Any, document: dict[str, Any], base_dir: Path, source: str, smap: SourceMap) -> None:
    """What a loaded job keeps of its file: the document, where its paths start, where its keys are
    (for problems), and where the Python that loaded it runs (for paths it sets)."""
    job._document = document
    job._base_dir = base_dir
    job._source = source
    job._file_positions = dict(smap.positions)
    job._here = current_folder()


def _file_data(job: Any) -> dict[str, Any]:
    """A copy of the file's document with the job's names and tags as they are now."""
    data = copy.deepcopy(job._document)
    for key in _NAMED_FIELDS:
        value = getattr(job, key, None)
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    for key in ("tags", "properties"):
        if getattr(job, key):
            data[key] = dict(getattr(job, key))
        else:
            data.pop(key, None)
    return data


def _set_part(data: dict[str, Any], key: str, value: Any, here: Path) -> None:
    """`inputs`, `outputs`: written when the job has some or the file had the key."""
    plain = document_data(value, here)
    if plain or key in data:
        data[key] = plain


class LoadedPipelineJob(PipelineJob):
    """A pipeline job loaded from its YAML file (`load_job("pipeline.yml")`)."""

    def __init__(self, document: dict[str, Any], base_dir: Path, source: str, smap: SourceMap) -> None:
        settings = document.get("settings") or {}
        super().__init__(
            settings=PipelineJobSettings(**{k: settings[k] for k in _SETTINGS if k in settings}),
            tags=document.get("tags"),
            properties=document.get("properties"),
            **{k: document.get(k) for k in _NAMED_FIELDS},
        )
        _keep_file(self, document, base_dir, source, smap)
        self.jobs = attr_tree(document.get("jobs") or {})
        self.inputs = attr_tree(document.get("inputs") or {})
        self.outputs.update(attr_tree(document.get("outputs") or {}))

    def _to_data(self) -> dict[str, Any]:
        data = _file_data(self)
        settings = {**(data.get("settings") or {}), **to_data(self.settings)}
        if settings:
            data["settings"] = settings
        _set_part(data, "inputs", self.inputs, self._here)
        _set_part(data, "outputs", dict(self.outputs), self._here)
        data["jobs"] = document_data(self.jobs, self._here)
        return data

    def _positions(self) -> dict[tuple[str | int, ...], Any]:
        return dict(self._file_positions)

    def _component_data(self) -> dict[str, Any]:
        raise TypeError(
            "a pipeline loaded from YAML is not a step of an @pipeline function: load it as a component "
            "(load_component) and call that"
        )

    def __repr__(self) -> str:
        shown = self.name or self.display_name or self._source
        return f"PipelineJob(name={shown!r}, status={self.status!r}, steps={list(self.jobs)})"


class LoadedSweepJob(SweepJob):
    """A sweep job loaded from its YAML file (`load_job("sweep.yml")`)."""

    def __init__(self, document: dict[str, Any], base_dir: Path, source: str, smap: SourceMap) -> None:
        super().__init__(
            trial=attr_tree(document.get("trial")),
            search_space=attr_tree(document.get("search_space") or {}),
            sampling_algorithm=document.get("sampling_algorithm") or "random",
            objective=document.get("objective"),
            early_termination=document.get("early_termination"),
            limits=document.get("limits"),
            inputs=attr_tree(document.get("inputs") or {}),
            outputs=attr_tree(document.get("outputs") or {}),
            tags=document.get("tags"),
            properties=document.get("properties"),
            **{k: document.get(k) for k in _NAMED_FIELDS},
        )
        _keep_file(self, document, base_dir, source, smap)

    def _to_data(self) -> dict[str, Any]:
        data = _file_data(self)
        data["trial"] = document_data(self.trial, self._here)
        _set_part(data, "inputs", self.inputs, self._here)
        _set_part(data, "outputs", self.outputs, self._here)
        data["search_space"] = document_data(self.search_space, self._here)
        settings = self._settings_data()
        settings.pop("search_space")
        for key in ("objective", "early_termination", "limits"):
            if key not in settings:
                data.pop(key, None)
        data.update(settings)
        return data

    def _job_source(self) -> SweepSource:
        return SweepSource(self._to_data(), self._base_dir, self._source, self._file_positions)

    def _step_keys(self) -> dict[str, Any]:
        raise TypeError(
            "a sweep loaded from YAML is not a step of an @pipeline function: build it with "
            "command(...).sweep(...), or write the step in the pipeline's YAML"
        )


def load_document_job(
    raw: dict[str, Any], smap: SourceMap, path: Path, overrides: list[str]
) -> LoadedPipelineJob | LoadedSweepJob:
    """The pipeline or sweep job of a file read into `raw`, checked now (with its overrides)."""
    from distrun.loading.pipeline_loader import load_pipeline_data
    from distrun.loading.sweep_loader import load_sweep_data
    from distrun.spec.job_kind import is_pipeline_document
    from distrun.spec.overrides import overridden_mapping

    base_dir = path.resolve().parent
    if is_pipeline_document(raw):
        document = overridden_mapping(raw, smap, overrides, "a pipeline job", "`type: pipeline`, `jobs:`")
        load_pipeline_data(copy.deepcopy(document), base_dir, str(path), (), smap)
        return LoadedPipelineJob(document, base_dir, str(path), smap)
    document = overridden_mapping(raw, smap, overrides, "a sweep job", "`type: sweep`, `trial:`")
    load_sweep_data(copy.deepcopy(document), base_dir, str(path), (), smap)
    return LoadedSweepJob(document, base_dir, str(path), smap)
