"""A pipeline's sweep step (`type: sweep`, Azure ML's sweep node) as the sweep job it runs as.

`trial:` names a command component (a file, `azureml:NAME:VERSION`, or a mapping); the step's
`inputs` and `outputs` are bound as a command step's are (`${{parent.inputs.X}}`, another step's
output, the component's defaults); `search_space`, `sampling_algorithm`, `objective`,
`early_termination` and `limits` are a sweep job's. The step becomes a sweep job document, which
`distrun.loading.sweep_loader` loads with the component as its trial: a sweep step is held to the
rules of a sweep job file, and its problems are said at the step's keys in the pipeline file (or
in the component file). Its outputs are its best trial's, so a later step reads them as any
step's: `${{parent.jobs.STEP.outputs.NAME}}`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from distrun.spec.loaded_pipeline import LoadedComponent, PipelineStep
from distrun.spec.loaded_sweep import LoadedSweep
from distrun.spec.pipeline_steps import StepBuilder, copy_positions
from distrun.spec.source_map import SourceMap, format_key_path

__all__ = ["load_step_sweep", "sweep_step"]

# Keys of a sweep step that are the pipeline's, not its sweep job's.
NOT_OF_THE_SWEEP = ("inputs", "outputs", "trial", "force_rerun")


def _parameters_given_by_sweep(component: LoadedComponent, space: Mapping[str, Any]) -> LoadedComponent:
    """The component with its search space parameters optional: the sweep gives them, not the step."""
    inputs = {
        name: decl.model_copy(update={"optional": True}) if name in space else decl
        for name, decl in component.spec.inputs.items()
    }
    spec = component.spec.model_copy(update={"inputs": inputs})
    return LoadedComponent(spec, component.data, component.source_map, component.base_dir, component.source)


def sweep_step(builder: StepBuilder, trial: LoadedComponent) -> PipelineStep:
    """The sweep step `builder.raw` (under `jobs.NAME`) as a sweep job document, its inputs and
    outputs bound; the problems of its bindings go to `builder.problems` (the sweep's own are the
    sweep loader's: `load_step_sweep`)."""
    raw, name, smap = builder.raw, builder.name, builder.smap
    space = raw.get("search_space") if isinstance(raw.get("search_space"), dict) else {}
    builder.component = _parameters_given_by_sweep(trial, space)
    builder.compute()
    builder._inputs()
    builder._outputs()
    document = {key: copy.deepcopy(value) for key, value in raw.items() if key not in NOT_OF_THE_SWEEP}
    document["type"] = "sweep"
    # A label, as written (a mapping: its file): the loaded component is the trial.
    document["trial"] = raw["trial"] if isinstance(raw.get("trial"), str) else trial.source
    document.setdefault("display_name", name)
    if builder.pipeline.experiment_name and "experiment_name" not in document:
        document["experiment_name"] = builder.pipeline.experiment_name
    positions = SourceMap(smap.source)
    copy_positions(smap, ("jobs", name), positions, ())
    given = raw.get("inputs") if isinstance(raw.get("inputs"), dict) else {}
    inputs = builder.document.get("inputs")
    if isinstance(inputs, dict):
        # A parameter's default is not the step's input: each trial is given its sampled value.
        inputs = {key: value for key, value in inputs.items() if key not in space or key in given}
    for key in ("inputs", "outputs", "compute"):
        value = inputs if key == "inputs" else builder.document.get(key)
        if value is not None:
            document[key] = value
            copy_positions(builder.positions, (key,), positions, (key,))
    return PipelineStep(
        name=builder.prefix + name,
        document=document,
        source_map=positions,
        base_dir=builder.base_dir,
        component=trial.source if trial.source != smap.source else None,
        upstream=builder.upstream,
        values=builder.values,
        pipeline_outputs=builder.pipeline_outputs,
        # Reused as a command step is (`distrun.spec.pipeline_reuse.sweep_key_document`): the same
        # search over the same trial gives the same best trial; a trial that is not deterministic never.
        is_deterministic=trial.spec.is_deterministic,
        force_rerun=builder.force_rerun(),
        compute_key=builder.compute_key,
        key=format_key_path(("jobs", name)),
        trial=trial,
    )


def load_step_sweep(
    step: PipelineStep, document: dict[str, Any], source: str, unchecked: tuple[str, ...] = ()
) -> LoadedSweep:
    """The sweep a sweep step runs, from its `document` (its upstream inputs bound): loaded and
    checked as a sweep job file is, with the step's component as its trial. `unchecked`: inputs
    whose paths exist only once the steps they read from ran."""
    from distrun.loading.sweep_loader import load_sweep_data

    smap = copy.deepcopy(step.source_map)
    return load_sweep_data(document, step.base_dir, source, smap=smap, trial_component=step.trial, unchecked=unchecked)
