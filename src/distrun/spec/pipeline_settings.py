"""A pipeline job's own keys (settings, compute, experiment), validated by its model; when they
are wrong, what is usable of them, so that the steps' problems are said in the same round."""

from __future__ import annotations

from typing import Any

from distrun.core.errors import Problem
from distrun.spec import pipeline_models
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.source_map import SourceMap


def pipeline_spec(data: dict[str, Any], smap: SourceMap, problems: list[Problem]) -> pipeline_models.PipelineJob:
    """The pipeline's model (its steps not read yet); what is wrong with it goes to `problems`."""
    try:
        return pipeline_models.PipelineJob.model_validate(data)
    except ModelError as exc:
        problems += translate(exc, data, smap, pipeline_models.PipelineJob)
    # Go on with what is usable, so that the steps' problems come in the same round.
    settings = data.get("settings")
    try:
        usable = pipeline_models.PipelineSettings.model_validate(settings if isinstance(settings, dict) else {})
    except ModelError:  # reported above
        usable = pipeline_models.PipelineSettings()
    compute = data.get("compute")
    experiment = data.get("experiment_name")
    return pipeline_models.PipelineJob.model_construct(
        jobs={},
        settings=usable,
        compute=compute if isinstance(compute, str) else None,
        experiment_name=experiment if isinstance(experiment, str) else None,
    )


def setting_notes(spec: pipeline_models.PipelineJob) -> list[str]:
    """A note for each setting Azure ML ignores (and so does distrun)."""
    notes = []
    for key in spec.settings.unknown_keys:
        import difflib

        close = difflib.get_close_matches(key, pipeline_models.KNOWN_SETTINGS, n=1, cutoff=0.6)
        mean = f" (did you mean {close[0]}?)" if close else ""
        notes.append(f"settings.{key} is not a pipeline setting{mean}: Azure ML ignores it, and so does distrun")
    return notes
