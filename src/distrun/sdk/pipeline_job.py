"""`@dsl.pipeline` and `PipelineJob`, as in azure-ai-ml: a Python function whose body calls
components (and makes or calls `command(...)` jobs) builds a pipeline job.

Calling the decorated function runs its body once, with each parameter standing for the
pipeline input of that name; every component call in it is a step. A step is named after the
local variable that holds it (as azure-ai-ml does: the function's locals are read when it
returns); a step held by no variable is named after its component (`train_model`, then
`train_model_1`, ...). `PipelineJob._to_data()` is the pipeline YAML document the same pipeline
would be written as, and the YAML loader (`distrun.loading.pipeline_loader`) reads it: one
validation and one runner for both.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

from distrun.core.user_paths import current_folder
from distrun.sdk.foreign_components import refuse_microsoft_components
from distrun.sdk.job_header import JobHeader
from distrun.sdk.notices import Recorded, caller_position
from distrun.sdk.pipeline_nodes import (
    NodeOutput,
    NodeOutputs,
    PipelineBuilder,
    PipelineInput,
    StepNames,
    absolute,
    building,
    input_value,
    io_type,
    output_value,
    pop,
    push,
)
from distrun.sdk.plain import AttrDict, present, to_data, yaml_text

_PLAIN_FIELDS = ("name", "display_name", "description", "experiment_name", "compute")


class PipelineJobSettings(Recorded):
    """`pipeline_job.settings`: `default_compute` (the steps' compute unless a step names one),
    `continue_on_step_failure`, `force_rerun`, `default_datastore`."""

    def __init__(
        self,
        *,
        default_compute: str | None = None,
        default_datastore: str | None = None,
        continue_on_step_failure: bool | None = None,
        force_rerun: bool | None = None,
        **kwargs: Any,
    ) -> None:
        self.default_compute = default_compute
        self.default_datastore = default_datastore
        self.continue_on_step_failure = continue_on_step_failure
        self.force_rerun = force_rerun
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        return present(
            default_compute=self.default_compute,
            default_datastore=self.default_datastore,
            continue_on_step_failure=self.continue_on_step_failure,
            force_rerun=self.force_rerun,
        )

    def __repr__(self) -> str:
        return f"PipelineJobSettings({', '.join(f'{k}={v!r}' for k, v in self._to_data().items())})"


class PipelineOutputs(AttrDict):
    """`pipeline_job.outputs.NAME = Output(...)`: that pipeline output's type, mode or path."""

    def __setattr__(self, name: str, value: Any) -> None:
        from distrun.sdk.inputs_outputs import Output

        if not isinstance(value, (Output, dict)) and value is not None:
            raise TypeError(f"outputs.{name}: give an Output(type=..., mode=..., path=...), not {value!r}")
        self[name] = value


class PipelineJob(JobHeader):
    """A pipeline job (`azure.ai.ml.entities.PipelineJob`): its steps (`jobs`), inputs, outputs
    and settings. Returned by an `@pipeline` function; `ml_client.jobs.create_or_update` runs it."""

    type = "pipeline"
    _source = "<python>"  # where its document comes from, for messages (a loaded one: its file)

    def __init__(
        self,
        *,
        jobs: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        outputs: dict[str, Any] | None = None,
        settings: PipelineJobSettings | dict[str, Any] | None = None,
        compute: str | None = None,
        name: str | None = None,
        display_name: str | None = None,
        description: str | None = None,
        experiment_name: str | None = None,
        tags: dict[str, Any] | None = None,
        properties: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.jobs = AttrDict(jobs or {})
        self.inputs = AttrDict(inputs or {})
        self.outputs = PipelineOutputs(outputs or {})
        self.settings = (
            PipelineJobSettings(**settings) if isinstance(settings, dict) else settings or PipelineJobSettings()
        )
        self.compute = compute
        self._set_header(
            name=name,
            display_name=display_name,
            experiment_name=experiment_name,
            description=description,
            tags=tags,
            properties=properties,
        )
        self._function = display_name or "pipeline"
        self._output_sources: dict[str, NodeOutput] = {}  # pipeline output -> the step output it is
        self._base_dir = current_folder()
        self._where = caller_position()
        self._accept(kwargs)

    def _to_data(self) -> dict[str, Any]:
        """The pipeline YAML document of this job (plain data, local paths absolute)."""
        names = self._step_names()
        data: dict[str, Any] = {"type": "pipeline"}
        for key in _PLAIN_FIELDS:
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        for key in ("tags", "properties"):
            if getattr(self, key):
                data[key] = dict(getattr(self, key))
        settings = to_data(self.settings)
        if settings:
            data["settings"] = settings
        inputs = {
            key: input_value(value, names, self._base_dir, f"inputs.{key}")
            for key, value in self.inputs.items()
            if value is not None
        }
        if inputs:
            data["inputs"] = inputs
        if self.outputs:
            data["outputs"] = {key: self._output_data(key) for key in self.outputs}
        data["jobs"] = self._jobs_data(names)
        return data

    def _step_names(self) -> StepNames:
        return StepNames({id(node): step for step, node in self.jobs.items()}, self._function)

    def _jobs_data(self, names: StepNames) -> dict[str, Any]:
        return {step: self._step_data(step, node, names) for step, node in self.jobs.items()}

    def _positions(self) -> dict[tuple[str | int, ...], Any]:
        """Where the user's code built the pipeline, and each step: problems point there. A nested
        pipeline's steps (its inline component's `jobs`) point at the lines of its own function."""
        positions: dict[tuple[str | int, ...], Any] = {(): self._where}
        for step, node in self.jobs.items():
            where = getattr(node, "_source_where", None)
            if where is not None:
                positions[("jobs", step)] = where
            if isinstance(node, PipelineComponentNode):
                for path, inner in node.job._positions().items():
                    positions[("jobs", step, "component", *path)] = inner
        return positions

    def _output_data(self, key: str) -> Any:
        value = self.outputs[key]
        if value is None:
            return None
        data = dict(to_data(value))
        if "path" in data:
            data["path"] = absolute(data["path"], self._base_dir)
        return data

    def _bound_outputs(self) -> dict[tuple[int, str], str]:
        return {(id(out._node), out._port): name for name, out in self._output_sources.items()}

    def _step_data(self, step: str, node: Any, names: StepNames) -> dict[str, Any]:
        bound = self._bound_outputs()
        base_dir = getattr(node, "_base_dir", self._base_dir)
        data = settings_data(node._step_keys())
        given = node._step_inputs() if hasattr(node, "_step_inputs") else node.inputs
        inputs = {
            key: input_value(value, names, base_dir, f"{step}.inputs.{key}")
            for key, value in given.items()
            # A parameter left at None gives the step nothing: the component's default, if any.
            if not (value is None or (isinstance(value, PipelineInput) and value._value is None))
        }
        if inputs or "inputs" in data:
            data["inputs"] = inputs
        outputs = {}
        for port, out in node.outputs.items():
            written = output_value(out, bound.get((id(node), port)), base_dir)
            # A component (a sweep's trial) declares its outputs: a step lists only those it binds or changes.
            declared = data.get("component", data.get("trial"))
            if declared is None or not isinstance(written, dict) or set(written) - {"type"}:
                outputs[port] = written
        if outputs:
            data["outputs"] = outputs
        return data

    def _component_data(self) -> dict[str, Any]:
        """This pipeline as an inline pipeline component (a step of another pipeline). Its inputs'
        values are the calling step's, given there (another step's output of the calling pipeline
        among them), so only their types are read here."""
        declared_inputs = {}
        for key, value in self.inputs.items():
            declaration: dict[str, Any] = {"type": io_type(value)}
            if value is None:
                declaration["optional"] = True
            declared_inputs[key] = declaration
        return {
            "type": "pipeline",
            "name": self._function,
            **({"description": self.description} if self.description else {}),
            "inputs": declared_inputs,
            "outputs": {key: {"type": io_type(out)} for key, out in self._output_sources.items()},
            "jobs": self._jobs_data(self._step_names()),
        }

    def __str__(self) -> str:
        """The pipeline job as YAML (as azure-ai-ml prints it)."""
        return yaml_text(self._to_data())

    def __repr__(self) -> str:
        shown = self.name or self.display_name
        return f"PipelineJob(name={shown!r}, status={self.status!r}, steps={list(self.jobs)})"


class PipelineComponentNode:
    """A call of an `@pipeline` function inside another: a step running that pipeline's steps."""

    type = "pipeline"

    def __init__(self, job: PipelineJob, given: dict[str, Any]) -> None:
        self.job = job
        self.inputs = AttrDict(given)
        self.outputs = NodeOutputs(self, {key: {"type": io_type(out)} for key, out in job._output_sources.items()})
        self.name: str | None = None
        self.compute = job.settings.default_compute or job.compute
        self.display_name: str | None = None
        self._base_dir = job._base_dir
        self._source_where = caller_position()
        pipeline = building()
        if pipeline is not None:
            pipeline.add(self)

    def _name_hint(self) -> str:
        return self.job._function

    def _step_keys(self) -> dict[str, Any]:
        return {
            "type": "pipeline",
            "component": self.job._component_data(),
            **present(compute=self.compute, display_name=self.display_name),
        }


def settings_data(value: Any) -> Any:
    """A step's settings as the document holds them: a pipeline function's parameter given to one
    (`node.compute = target`, `resources={"instance_count": nodes}`) is its binding,
    `${{parent.inputs.NAME}}`, which the loader replaces with the pipeline input's value."""
    if isinstance(value, PipelineInput):
        return value.binding
    if isinstance(value, dict):
        return {key: settings_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [settings_data(item) for item in value]
    return value


def command_step_keys(job: Any) -> dict[str, Any]:
    """A `command(...)` made or called in a pipeline function, as an inline command step."""
    data = job._to_data()
    for key in ("name", "experiment_name", "inputs", "outputs"):
        data.pop(key, None)
    if isinstance(data.get("code"), str):
        data["code"] = absolute(data["code"], job._base_dir)
    environment = data.get("environment")
    if isinstance(environment, dict) and isinstance(environment.get("conda_file"), str):
        environment["conda_file"] = absolute(environment["conda_file"], job._base_dir)
    return data


# ---------------------------------------------------------------- @pipeline


def pipeline(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    display_name: str | None = None,
    description: str | None = None,
    experiment_name: str | None = None,
    tags: dict[str, Any] | None = None,
    compute: str | None = None,
    default_compute: str | None = None,
    default_datastore: str | None = None,
    continue_on_step_failure: bool | None = None,
    force_rerun: bool | None = None,
    **kwargs: Any,
) -> Any:
    """`@dsl.pipeline(...)` (or `@pipeline` bare): the function's body builds a pipeline job.

    `compute` is the pipeline's `compute`, `default_compute` its `settings.default_compute`: each
    is the compute of every step that names none."""
    options = {
        "name": name,
        "display_name": display_name,
        "description": description,
        "experiment_name": experiment_name,
        "tags": tags,
        "compute": compute,
    }
    settings = {
        "default_compute": default_compute,
        "default_datastore": default_datastore,
        "continue_on_step_failure": continue_on_step_failure,
        "force_rerun": force_rerun,
    }
    extra = {k: v for k, v in {"version": version, **kwargs}.items() if v is not None}

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function)
        for parameter in signature.parameters.values():
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise TypeError(
                    f"@pipeline {function.__name__}: parameter {parameter.name!r} takes any number of values; "
                    "a pipeline's inputs are named parameters (def pipeline_fn(data, epochs=3))"
                )

        @functools.wraps(function)
        def build(*args: Any, **values: Any) -> Any:
            try:
                bound = signature.bind(*args, **values)
            except TypeError as exc:
                raise TypeError(f"pipeline {function.__name__}(): {exc}") from None
            bound.apply_defaults()
            return _build(function, dict(bound.arguments), options, settings, extra)

        build._pipeline_function = function  # type: ignore[attr-defined]  # a pipeline component's, told apart
        return build

    return decorate(func) if callable(func) else decorate


def _build(
    function: Callable[..., Any],
    values: dict[str, Any],
    options: dict[str, Any],
    settings: dict[str, Any],
    extra: dict[str, Any],
) -> Any:
    refuse_microsoft_components(function)
    builder = PipelineBuilder(function.__name__)
    placeholders = {key: PipelineInput(key, value) for key, value in values.items()}
    push(builder)
    try:
        returned, local_vars = _run_reading_locals(function, placeholders)
    finally:
        pop(builder)
    steps = _step_names(builder.nodes, local_vars)
    for step, node in steps.items():
        node.name = step
    job = PipelineJob(
        jobs=steps,
        inputs=values,
        settings=PipelineJobSettings(**{k: v for k, v in settings.items() if v is not None}),
        **{key: value for key, value in options.items() if key != "display_name" and value is not None},
        display_name=options["display_name"] or function.__name__,
        **extra,
    )
    if job.description is None and function.__doc__:
        job.description = inspect.cleandoc(function.__doc__)
    job._function = function.__name__
    job._output_sources = _pipeline_outputs(function.__name__, returned, builder)
    for key, out in job._output_sources.items():
        job.outputs[key] = out
    if building() is not None:  # called inside another pipeline's function: a step of it
        return PipelineComponentNode(job, values)
    return job


def _run_reading_locals(function: Callable[..., Any], values: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Call the function, and read its local variables as it returns (azure-ai-ml names steps so)."""
    code = function.__code__
    captured: dict[str, Any] = {}
    previous = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            captured.update(frame.f_locals)
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        returned = function(**values)
    finally:
        sys.setprofile(previous)
    return returned, captured


def _step_names(nodes: list[Any], local_vars: dict[str, Any]) -> dict[str, Any]:
    """Each node's step name: the first local variable holding it, else its component's name."""
    named: dict[int, str] = {}
    ids = {id(node) for node in nodes}
    for var, value in local_vars.items():
        if id(value) in ids and id(value) not in named and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            named[id(value)] = var
    used = set(named.values())
    steps: dict[str, Any] = {}
    for node in nodes:
        step = named.get(id(node))
        if step is None:
            hint = re.sub(r"\W", "_", node._name_hint(), flags=re.ASCII) or "step"
            hint = hint if not hint[0].isdigit() else f"step_{hint}"
            step, n = hint, 0
            while step in used:
                n += 1
                step = f"{hint}_{n}"
            used.add(step)
        steps[step] = node
    return steps


def _pipeline_outputs(function: str, returned: Any, builder: PipelineBuilder) -> dict[str, NodeOutput]:
    if returned is None:
        return {}
    if not isinstance(returned, dict):
        raise TypeError(
            f"pipeline {function}() returned {type(returned).__name__}: a pipeline function returns nothing, "
            "or a dict of its outputs ({'model': train.outputs.model})"
        )
    outputs = {}
    for key, value in returned.items():
        if not isinstance(value, NodeOutput) or not any(value._node is node for node in builder.nodes):
            raise TypeError(
                f"pipeline {function}() returned {key!r}: {value!r} is not an output of one of its steps "
                "(return step.outputs.NAME)"
            )
        outputs[str(key)] = value
    return outputs


__all__ = ["PipelineComponentNode", "PipelineJob", "PipelineJobSettings", "command_step_keys", "pipeline"]
