"""The sweep job of the SDK: `command(...)(lr=Choice(...)).sweep(...)`, `SweepJob(...)`.

A `SweepJob` holds what the user gave, as Azure ML's entity does, and becomes plain data only
when it is submitted or validated: the Azure ML sweep job YAML document (`_to_data`), loaded by
the sweep loader exactly as a `type: sweep` file is, so a problem reads as it would in YAML. The
same job as a pipeline's `type: sweep` step is `_to_step_data` (its trial a command component).

A trial made from a `command(...)` is inline: its inputs set to a search space expression are the
sweep's parameters (`${{inputs.lr}}` in its command reads `${{search_space.lr}}`), its other
inputs and outputs are the sweep's, given to every trial.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from distrun.core.user_paths import current_folder
from distrun.sdk.job_header import JobHeader
from distrun.sdk.notices import caller_position, note_ignored
from distrun.sdk.operations import IGNORED_PROPERTY, JobSource
from distrun.sdk.plain import AttrDict, path_text, to_data
from distrun.sdk.sweep_space import (
    ALGORITHMS,
    POLICIES,
    EarlyTerminationPolicy,
    Objective,
    SamplingAlgorithm,
    SweepDistribution,
    SweepJobLimits,
    from_data,
)

__all__ = ["Sweep", "SweepJob", "SweepSource"]

# A command job's keys an inline trial keeps; the rest are the sweep's (or, as `services`, unused).
_TRIAL_KEYS = ("command", "code", "environment", "environment_variables", "resources", "distribution", "limits")
_SWEEP_FIELDS = ("name", "display_name", "experiment_name", "description", "compute")
# A search space expression's component input type (a pipeline step's trial declares each).
_LITERAL_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


class SweepSource(JobSource):
    """A sweep as plain data, the folder its relative paths start from, and where it was built."""

    def load(self, overrides: list[str] | tuple[str, ...] = ()) -> Any:  # type: ignore[override]
        """The `LoadedSweep`, checked as a sweep file is (`distrun.loading.sweep_loader`)."""
        from distrun.loading.sweep_loader import load_sweep_data
        from distrun.spec.source_map import SourceMap

        smap = SourceMap(self.source, dict(self.positions))
        return load_sweep_data(copy.deepcopy(self.data), self.base_dir, self.source, overrides, smap)


def _search_ref(name: str) -> re.Pattern[str]:
    return re.compile(r"\$\{\{\s*inputs\." + re.escape(name) + r"\s*\}\}")


def _literal_type(value: Any) -> str:
    for kind, name in _LITERAL_TYPES:
        if isinstance(value, kind):
            return name
    return "string"


def _expression_type(expression: Any) -> str:
    """The input type a search space parameter has as a component input."""
    data = to_data(expression)
    if data.get("type") == "choice":
        types = {_literal_type(v) for v in data.get("values") or []}
        if types == {"integer", "number"}:
            return "number"
        return types.pop() if len(types) == 1 else "string"
    return "integer" if data.get("type") == "randint" else "number"


class SweepJob(JobHeader):
    """A sweep job (`azure.ai.ml.sweep.SweepJob`, and the `Sweep` node `job.sweep(...)` returns)."""

    type = "sweep"
    best_trial: dict[str, Any] | None = None  # distrun: trial, job, parameters, metric, outputs

    def __init__(
        self,
        *,
        trial: Any = None,
        search_space: dict[str, SweepDistribution | dict[str, Any]] | None = None,
        sampling_algorithm: str | SamplingAlgorithm | dict[str, Any] = "random",
        objective: Objective | dict[str, Any] | None = None,
        early_termination: EarlyTerminationPolicy | dict[str, Any] | None = None,
        limits: SweepJobLimits | dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        outputs: dict[str, Any] | None = None,
        compute: str | None = None,
        name: str | None = None,
        display_name: str | None = None,
        experiment_name: str | None = None,
        description: str | None = None,
        tags: dict[str, Any] | None = None,
        properties: dict[str, Any] | None = None,
        identity: Any = None,
        queue_settings: Any = None,
        **kwargs: Any,
    ) -> None:
        self._source_where = caller_position()
        self._base_dir = current_folder()
        self.trial = trial
        self.search_space = dict(search_space or {})
        self.sampling_algorithm = sampling_algorithm
        self.objective = objective
        self.early_termination = early_termination
        self.limits = limits
        self.inputs = AttrDict(inputs or {})
        self.outputs = AttrDict(outputs or {})
        self.compute = compute
        self._set_header(
            name=name,
            display_name=display_name,
            experiment_name=experiment_name,
            description=description,
            tags=tags,
            properties=properties,
        )
        self.identity = identity
        self.queue_settings = queue_settings
        self.steps: dict[str, Any] = {}  # distrun: each trial's state, job, parameters and metric
        self._accept(kwargs)

    # ------------------------------------------------------------ Azure ML's setters

    @property
    def sampling_algorithm(self) -> Any:
        return self._sampling_algorithm

    @sampling_algorithm.setter
    def sampling_algorithm(self, value: Any) -> None:
        # A name stays a name (the YAML's short form); a mapping becomes the object.
        self._sampling_algorithm = value if isinstance(value, str) else from_data(value, ALGORITHMS)

    @property
    def early_termination(self) -> Any:
        return self._early_termination

    @early_termination.setter
    def early_termination(self, value: Any) -> None:
        self._early_termination = from_data(value, POLICIES)

    @property
    def objective(self) -> Objective | None:
        return self._objective

    @objective.setter
    def objective(self, value: Any) -> None:
        self._objective = Objective(**value) if isinstance(value, dict) else value

    @property
    def limits(self) -> SweepJobLimits:
        return self._limits

    @limits.setter
    def limits(self, value: Any) -> None:
        if value is None:
            value = SweepJobLimits()
        elif isinstance(value, dict):
            value = SweepJobLimits(**value)
        self._limits = value

    def set_limits(
        self,
        *,
        max_concurrent_trials: int | None = None,
        max_total_trials: int | None = None,
        timeout: int | None = None,
        trial_timeout: int | None = None,
    ) -> None:
        """Change the limits that are given; the others stay."""
        given = {
            "max_concurrent_trials": max_concurrent_trials,
            "max_total_trials": max_total_trials,
            "timeout": timeout,
            "trial_timeout": trial_timeout,
        }
        for key, value in given.items():
            if value is not None:
                setattr(self.limits, key, value)

    def set_objective(self, *, goal: str | None = None, primary_metric: str | None = None) -> None:
        objective = self.objective or Objective()
        if goal is not None:
            objective.goal = goal
        if primary_metric is not None:
            objective.primary_metric = primary_metric
        self.objective = objective

    def set_resources(self, **kwargs: Any) -> None:
        """The trial's resources (instance_count, ...), as azure-ai-ml's Sweep sets them."""
        setter = getattr(self.trial, "set_resources", None)
        if setter is None:
            raise TypeError(f"this sweep's trial ({type(self.trial).__name__}) has no resources to set")
        setter(**kwargs)

    # ------------------------------------------------------------ the trial's parts

    def _space(self) -> dict[str, Any]:
        """Every parameter: the trial's inputs set to an expression, then `search_space`'s."""
        inputs = getattr(self.trial, "inputs", None) or {}
        found = {k: v for k, v in inputs.items() if isinstance(v, SweepDistribution)}
        return {**found, **self.search_space}

    def _given_inputs(self) -> dict[str, Any]:
        """The trial's inputs that are values (not parameters), then the sweep's own, as job data."""
        return {k: to_data(v) for k, v in self._step_inputs().items()}

    def _given_outputs(self) -> dict[str, Any]:
        outputs = {**(getattr(self.trial, "outputs", None) or {}), **self.outputs}
        return {k: None if v is None else to_data(v) for k, v in outputs.items()}

    def _trial_command_data(self) -> dict[str, Any]:
        """A command trial's own keys, paths made absolute (its folder may not be the sweep's)."""
        from distrun.sdk.pipeline_job import command_step_keys

        trial = copy.copy(self.trial)
        trial.inputs = AttrDict()  # the search space is not job data; the inputs are the sweep's
        trial.outputs = AttrDict()
        return command_step_keys(trial)

    def _trial_component_reference(self) -> str | None:
        """What `trial:` names for a component (a loaded file or a registered component): a
        component step (`component(...)`) has its `component`, a component its `_step_component`."""
        component = getattr(self.trial, "component", self.trial)
        reference = getattr(component, "_step_component", None)
        return reference() if callable(reference) else None

    def _space_data(self) -> dict[str, Any]:
        return {k: to_data(v) for k, v in self._space().items()}

    def _settings_data(self) -> dict[str, Any]:
        """The sweep's own settings: search space, sampling, objective, early termination, limits."""
        data: dict[str, Any] = {"search_space": self._space_data()}
        algorithm = self.sampling_algorithm
        data["sampling_algorithm"] = algorithm.lower() if isinstance(algorithm, str) else to_data(algorithm)
        if self.objective is not None:
            data["objective"] = to_data(self.objective)
        if self.early_termination is not None:
            data["early_termination"] = to_data(self.early_termination)
        limits = to_data(self.limits)
        if limits:
            data["limits"] = limits
        return data

    # ------------------------------------------------------------ to the sweep YAML

    def _to_data(self) -> dict[str, Any]:
        """The Azure ML sweep job YAML document (`type: sweep`) of this sweep."""
        from distrun.sdk.notices import recordable

        if self.trial is None:
            raise TypeError("this sweep has no trial: give SweepJob(trial=command(...)) or call job.sweep(...)")
        data: dict[str, Any] = {"type": self.type}
        for key in _SWEEP_FIELDS:
            value = getattr(self, key)
            if value is not None:
                data[key] = path_text(value)
        reference = self._trial_component_reference()
        if reference is not None:
            data["trial"] = reference
        else:
            trial = self._trial_command_data()
            kept = {k: v for k, v in trial.items() if k in _TRIAL_KEYS}
            for name in self._space():  # `${{inputs.lr}}` of a parameter: the trial's value of lr
                if isinstance(kept.get("command"), str):
                    kept["command"] = _search_ref(name).sub("${{search_space." + name + "}}", kept["command"])
            data["trial"] = kept
        inputs, outputs = self._given_inputs(), self._given_outputs()
        if inputs:
            data["inputs"] = inputs
        if outputs:
            data["outputs"] = outputs
        data.update(self._settings_data())
        if self.tags:
            data["tags"] = dict(self.tags)
        properties = dict(self.properties)
        ignored = {**getattr(self.trial, "ignored", {}), **self.ignored}
        if ignored:
            recorded = {k: recordable(v) for k, v in ignored.items()}
            properties[IGNORED_PROPERTY] = {**properties.get(IGNORED_PROPERTY, {}), **recorded}
        if properties:
            data["properties"] = properties
        for key in ("identity", "queue_settings"):
            if getattr(self, key) is not None:
                data[key] = to_data(getattr(self, key))
        return data

    def _job_source(self) -> SweepSource:
        return SweepSource(self._to_data(), self._base_dir, "<python>", {(): self._source_where})

    # ------------------------------------------------------------ as a pipeline step

    def _name_hint(self) -> str:
        return self.name or "sweep"

    def _step_keys(self) -> dict[str, Any]:
        """This sweep as an Azure ML pipeline's `type: sweep` step, but its inputs and outputs:
        the trial a command component (an inline one for a `command(...)`, whose inputs are the
        parameters and the values it was given), and the sweep's settings."""
        data: dict[str, Any] = {"type": self.type}
        reference = self._trial_component_reference()
        data["trial"] = reference if reference is not None else self._trial_component()
        for key in ("compute", "display_name", "description"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        data.update(self._settings_data())
        if self.tags:
            data["tags"] = dict(self.tags)
        return data

    def _step_inputs(self) -> dict[str, Any]:
        """As a step of an `@pipeline` function: the inputs it is given as they were given (other
        steps' outputs, the pipeline's inputs), its parameters left out (`search_space` has them)."""
        space = self._space()
        inputs = getattr(self.trial, "inputs", None) or {}
        return {k: v for k, v in {**inputs, **self.inputs}.items() if k not in space}

    def _to_step_data(self) -> dict[str, Any]:
        """The whole `type: sweep` step: `_step_keys`, with the inputs and outputs it is given."""
        data = self._step_keys()
        inputs, outputs = self._given_inputs(), self._given_outputs()
        if inputs:
            data["inputs"] = inputs
        if outputs:
            data["outputs"] = outputs
        return data

    def _trial_component(self) -> dict[str, Any]:
        """A `command(...)` trial as an inline command component: each input declared (a
        parameter by its expression's type, a value by its own, with that value as default)."""
        trial = self._trial_command_data()
        component: dict[str, Any] = {"type": "command"}
        component.update({k: v for k, v in trial.items() if k in _TRIAL_KEYS and k != "limits"})
        declared: dict[str, Any] = {}
        for name, value in (getattr(self.trial, "inputs", None) or {}).items():
            if isinstance(value, SweepDistribution):
                declared[name] = {"type": _expression_type(value)}
                continue
            data = to_data(value)
            if isinstance(data, dict):
                declared[name] = {k: v for k, v in data.items() if k in ("type", "optional", "description", "mode")}
            else:
                declared[name] = {"type": _literal_type(data), "default": data}
        for name, expression in self.search_space.items():
            declared.setdefault(name, {"type": _expression_type(expression)})
        if declared:
            component["inputs"] = declared
        outputs = self._given_outputs()
        if outputs:
            component["outputs"] = {k: {"type": (v or {}).get("type", "uri_folder")} for k, v in outputs.items()}
        return component

    def __repr__(self) -> str:
        shown = {"name": self.name, "status": self.status, "objective": self.objective, "limits": self.limits}
        return f"SweepJob({', '.join(f'{k}={v!r}' for k, v in shown.items() if v is not None)})"


Sweep = SweepJob  # `azure.ai.ml.entities.Sweep`, the node `job.sweep(...)` returns


def sweep_of(
    trial: Any,
    *,
    primary_metric: str,
    goal: str,
    sampling_algorithm: Any = "random",
    compute: str | None = None,
    max_concurrent_trials: int | None = None,
    max_total_trials: int | None = None,
    timeout: int | None = None,
    trial_timeout: int | None = None,
    early_termination_policy: Any = None,
    search_space: dict[str, Any] | None = None,
    identity: Any = None,
    queue_settings: Any = None,
    **extra: Any,
) -> SweepJob:
    """`trial.sweep(...)` (azure-ai-ml's `Command.sweep`): the sweep of this job or component
    step, its inputs set to a search space expression being the parameters."""
    settings = {
        "primary_metric": primary_metric,
        "goal": goal,
        "sampling_algorithm": sampling_algorithm,
        "compute": compute,
        "max_concurrent_trials": max_concurrent_trials,
        "max_total_trials": max_total_trials,
        "timeout": timeout,
        "trial_timeout": trial_timeout,
        "early_termination": early_termination_policy,
        "search_space": search_space,
        "identity": identity,
        "queue_settings": queue_settings,
    }
    limits = {k: settings.pop(k) for k in list(settings) if k in SweepJobLimits.__dataclass_fields__}
    objective = Objective(goal=settings.pop("goal"), primary_metric=settings.pop("primary_metric"))
    job = SweepJob(
        trial=trial,
        objective=objective,
        limits=SweepJobLimits(**{k: v for k, v in limits.items() if v is not None}),
        name=getattr(trial, "name", None),
        display_name=getattr(trial, "display_name", None),
        experiment_name=getattr(trial, "experiment_name", None),
        description=getattr(trial, "description", None),
        tags=dict(getattr(trial, "tags", None) or {}),
        properties=dict(getattr(trial, "properties", None) or {}),
        **{k: v for k, v in settings.items() if v is not None},
    )
    job._source_where = caller_position()
    job._base_dir = getattr(trial, "_base_dir", job._base_dir)
    if job.compute is None:
        job.compute = getattr(trial, "compute", None)
    if job.identity is None:
        job.identity = getattr(trial, "identity", None)
    if job.queue_settings is None:
        job.queue_settings = getattr(trial, "queue_settings", None)
    if extra:
        note_ignored("job.sweep", extra)
        job._ignored.update(extra)
    _as_pipeline_step(job, trial)
    return job


def _as_pipeline_step(job: SweepJob, trial: Any) -> None:
    """Inside an `@pipeline` function the sweep is the step, in its trial's place (the trial is
    not run on its own, as in azure-ai-ml), and its outputs are the step's: `sweep.outputs.model`
    passed to a later call reads the best trial's output."""
    from distrun.sdk.pipeline_nodes import NodeOutputs, building

    pipeline = building()
    if pipeline is None:
        return
    declared = getattr(trial, "outputs", None) or {}
    job.outputs = NodeOutputs(job, {port: to_data(out) if out is not None else None for port, out in declared.items()})
    pipeline.replace(trial, job)
