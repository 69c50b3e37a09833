"""Load a pipeline job (YAML file) into a `LoadedPipeline`: every step a command job document,
checked as a command job file is checked.

Steps: read YAML with positions -> apply `--set` overrides -> the pipeline's own schema
(settings, `jobs`, its inputs and outputs) -> each step's component file (commandComponent
schema) -> each step built into a command job (`distrun.spec.pipeline_steps`: the
component's command with the step's keys, inputs and outputs bound) -> that job validated by
the command job's model and checks -> the graph (undefined steps and outputs, cycles). Every
problem of every step and component is reported in one round, in file order, each with its
file:line:col, key path and fix; nothing runs while there is one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from distrun.core.errors import Problem, ValidationError
from distrun.loading.automl_loader import automl_step, is_automl_document
from distrun.loading.component_reader import ComponentReader, StepComponents, load_component_data, load_component_file
from distrun.loading.loader import candidate_problems, load_job_data
from distrun.loading.parallel_step import parallel_steps_as_commands
from distrun.loading.raw_checks import in_file_order
from distrun.loading.spark_loader import is_spark_document, spark_document_problems
from distrun.loading.sweep_step import load_step_sweep, sweep_step
from distrun.spec import models, pipeline_models
from distrun.spec.derived_names import pipeline_name_problems
from distrun.spec.job_kind import is_pipeline_document
from distrun.spec.loaded import LoadedJob
from distrun.spec.loaded_pipeline import LoadedComponent, LoadedPipeline, PipelineStep, UpstreamOutput
from distrun.spec.overrides import overridden_mapping
from distrun.spec.pipeline_graph_checks import cycle_problems, pipeline_output_problems
from distrun.spec.pipeline_settings import pipeline_spec, setting_notes
from distrun.spec.pipeline_step_kinds import component_fits, component_key, is_sweep_step, step_kind_ok
from distrun.spec.pipeline_steps import StepBuilder, outputs_of_step
from distrun.spec.port_overrides import refusing_unknown_ports
from distrun.spec.source_map import SourceMap, format_key_path
from distrun.spec.yaml_source import read_yaml_file

__all__ = [
    "load_component_data",
    "load_component_file",
    "load_document_data",
    "load_document_file",
    "load_pipeline_data",
    "load_pipeline_file",
    "preview_output_uri",
]

# What a step naming a pipeline component may set: its component's steps set the rest.
PIPELINE_STEP_KEYS = ("type", "component", "inputs", "outputs", "compute", "display_name", "description", "tags")
# The job name upstream inputs name while a pipeline is only checked (no run, so no job yet).
PREVIEW_PIPELINE = "pipeline"


def preview_output_uri(pipeline: str, step: str, output: str) -> str:
    return f"azureml://jobs/{pipeline}.{step}/outputs/{output}"


def load_document_file(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedJob | LoadedPipeline:
    """A command job or a pipeline job, as the file says (`type: pipeline`, a pipelineJob
    `$schema`, or `jobs:`); the file is read once."""
    file = Path(path)
    data, smap = read_yaml_file(file)
    return load_document_data(data, file, overrides, smap)


def load_document_data(
    data: Any, file: Path, overrides: list[str] | tuple[str, ...], smap: SourceMap
) -> LoadedJob | LoadedPipeline:
    """What `load_document_file` does once the file `file` was read into `data`."""
    if isinstance(data, dict) and is_pipeline_document(data):
        return load_pipeline_data(data, file.resolve().parent, str(file), overrides, smap)
    return load_job_data(data, file.resolve().parent, str(file), overrides, smap)


def load_pipeline_file(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), base_dir: str | Path | None = None
) -> LoadedPipeline:
    """`base_dir`: where relative paths start (default: the file's folder; a pipeline built in
    Python and kept as a file: where that Python ran)."""
    file = Path(path)
    data, smap = read_yaml_file(file)
    start = Path(base_dir) if base_dir is not None else file.resolve().parent
    return load_pipeline_data(data, start, str(file), overrides, smap)


def load_pipeline_data(
    data: Any,
    base_dir: Path,
    source: str = "<python>",
    overrides: list[str] | tuple[str, ...] = (),
    smap: SourceMap | None = None,
) -> LoadedPipeline:
    smap = smap or SourceMap(source)
    written = data
    data = overridden_mapping(data, smap, overrides, "a pipeline job", "`type: pipeline`, `jobs:`")
    return refusing_unknown_ports(written, data, overrides, _PipelineLoader(data, base_dir, source, smap).load)


def _datastore_inputs(document: dict[str, Any]) -> list[str]:
    """The inputs of a step's job document that read a datastore path (azureml://datastores/...)."""
    inputs = document.get("inputs")
    return [
        str(name)
        for name, value in (inputs.items() if isinstance(inputs, dict) else ())
        if isinstance(value, dict) and str(value.get("path", "")).startswith("azureml://datastores/")
    ]


@dataclass
class _Level:
    """One level of a pipeline: the pipeline file, or a pipeline component one of its steps names."""

    data: dict[str, Any]  # `inputs` and `outputs` as its steps' `parent.` sees them, and its `jobs`
    spec: pipeline_models.PipelineJob  # the settings and compute its steps take
    smap: SourceMap
    base_dir: Path
    source: str
    prefix: str = ""  # its steps' full names: "" at the top, "OUTER." inside the step OUTER
    files: tuple[str, ...] = ()  # the pipeline component files it is inside (one naming itself)
    inherited: dict[str, UpstreamOutput] = field(default_factory=dict)  # inputs that are steps' outputs
    refused: frozenset[str] = frozenset()  # inputs whose value the naming step gave wrong

    def find(self, path: tuple[str | int, ...]) -> Any:
        return self.smap.find(path)


class _PipelineLoader:
    def __init__(self, data: dict[str, Any], base_dir: Path, source: str, smap: SourceMap) -> None:
        self.data = data
        self.base_dir = base_dir
        self.source = source
        self.smap = smap
        self.problems: list[Problem] = []
        self.step_notes: list[str] = []  # what the steps said without refusing (StepBuilder.notes)
        self.sources: list[str] = [source]  # files in the order problems are reported
        self.components = StepComponents(ComponentReader(source, self.problems, self.sources))

    def problem(self, level: _Level, message: str, path: tuple[str | int, ...], hint: str) -> None:
        self.problems.append(Problem(message, format_key_path(path), level.find(path), hint))

    def load(self) -> LoadedPipeline:
        spec = pipeline_spec(self.data, self.smap, self.problems)
        top = _Level(self.data, spec, self.smap, self.base_dir, self.source, files=(self.source,))
        if self.data.get("jobs") == {}:
            self.problem(
                top,
                "the pipeline has no steps",
                ("jobs",),
                "add a step under `jobs:`, e.g. `train: {type: command, component: ./train.yml}`",
            )
        steps, _ = self._level(top)
        self.problems += pipeline_output_problems(steps)
        self.problems += cycle_problems(steps)
        name = self.data.get("name")
        if name is None or (isinstance(name, str) and re.fullmatch(models.JOB_NAME_PATTERN, name)):
            self.problems += pipeline_name_problems(name, self.smap.find(("name",)), steps)  # else: the model said
        if self.problems:
            raise ValidationError(self._ordered(self.problems))
        return LoadedPipeline(spec, self.base_dir, self.source, self.smap, steps, setting_notes(spec) + self.step_notes)

    # ------------------------------------------------------------ one level's steps

    def _level(self, level: _Level) -> tuple[dict[str, PipelineStep], dict[str, UpstreamOutput]]:
        """The level's steps, each a command job (a pipeline component's steps in its place, named
        OUTER.STEP), and which of its steps writes each of the level's outputs."""
        jobs = level.data.get("jobs") if isinstance(level.data.get("jobs"), dict) else {}
        components: dict[str, LoadedComponent | None] = {}
        runnable: list[str] = []
        problem = partial(self.problem, level)
        # A parallel step runs as a command step (distrun.loading.parallel_step); None when refused.
        jobs = parallel_steps_as_commands(jobs, problem, level.smap, level.base_dir, self.step_notes)
        for name, raw in jobs.items():
            if is_automl_document(raw):  # the inline command step that runs its search
                raw = jobs[name] = automl_step(raw, level.smap, ("jobs", name), problem)
            if isinstance(raw, dict) and step_kind_ok(problem, str(name), raw):
                at = (level.smap, level.source, level.base_dir)
                components[name] = self.components.of(*at, str(name), raw, component_key(raw))
                if component_fits(problem, str(name), raw, components[name]):
                    runnable.append(name)
        outputs_of: dict[str, dict[str, str] | None] = {name: None for name in jobs}  # None: not known
        outputs_of.update({name: outputs_of_step(jobs[name], components.get(name)) for name in runnable})
        steps: dict[str, PipelineStep] = {}
        writers: dict[str, dict[str, UpstreamOutput]] = {}  # a pipeline step's outputs: who writes each
        for name in runnable:
            component = components[name]
            builder = StepBuilder(
                name,
                jobs[name],
                level.spec,
                level.data,
                level.smap,
                level.base_dir,
                component,
                outputs_of,
                level.prefix,
                level.inherited,
                level.refused,
            )
            if is_sweep_step(jobs[name]):
                assert component is not None  # `component_fits` said so
                sweep = sweep_step(builder, component)
                self.problems += builder.problems
                self.problems += step_problems(sweep, self.source)
                self.step_notes += builder.notes
                steps[sweep.name] = sweep
                continue
            if component is not None and isinstance(component.spec, pipeline_models.PipelineComponent):
                inner, writers[level.prefix + name] = self._nested(level, name, builder, component)
                steps.update(inner)
                continue
            step = builder.build()
            self.problems += builder.problems
            self.problems += step_problems(step, self.source)
            self.step_notes += builder.notes
            steps[step.name] = step
        self._through_pipeline_steps(steps, writers)
        exported = {
            level_output: UpstreamOutput(step.name, output)
            for step in steps.values()
            for output, level_output in step.pipeline_outputs.items()
        }
        return steps, exported

    def _nested(
        self, level: _Level, name: str, builder: StepBuilder, component: LoadedComponent
    ) -> tuple[dict[str, PipelineStep], dict[str, UpstreamOutput]]:
        """A step naming a pipeline component: the component's steps, with the inputs the step gives."""
        raw = builder.raw
        # An inline pipeline component (a mapping under `component:`, as distrun's SDK writes a
        # nested @pipeline) is finite: it cannot name itself, though it shares its file's name.
        inline = isinstance(raw.get("component"), dict)
        if not inline and component.source in level.files:
            chain = " -> ".join([*level.files[1:], component.source])
            self.problem(
                level,
                f"pipeline component {component.source} names itself ({chain})",
                ("jobs", name, "component"),
                "a pipeline component cannot contain itself, directly or through others",
            )
            return {}, {}
        for key in raw:
            if key not in PIPELINE_STEP_KEYS:
                self.problem(
                    level,
                    f"a pipeline step does not take `{key}`: its component's steps set their own",
                    ("jobs", name, key),
                    f"a pipeline step takes {', '.join(PIPELINE_STEP_KEYS)}",
                )
        builder._inputs()
        builder._outputs()
        self.problems += builder.problems
        self.step_notes += builder.notes
        settings = level.spec.settings.model_copy(
            update={"default_compute": raw.get("compute") or level.spec.settings.default_compute or level.spec.compute}
        )
        inner_spec = pipeline_models.PipelineJob.model_construct(
            jobs={}, settings=settings, compute=None, experiment_name=level.spec.experiment_name
        )
        inner = _Level(
            {
                "inputs": builder.document.get("inputs") or {},
                "outputs": builder.document.get("outputs") or {},
                "jobs": component.data.get("jobs"),
            },
            inner_spec,
            component.source_map,
            component.base_dir,
            component.source,
            f"{level.prefix}{name}.",
            level.files if inline else (*level.files, component.source),
            dict(builder.upstream),
            frozenset(builder.refused),
        )
        steps, writers = self._level(inner)
        # Outputs of the component bound to this level's outputs are those outputs now.
        for step in steps.values():
            step.pipeline_outputs = {
                output: builder.pipeline_outputs[inner_output]
                for output, inner_output in step.pipeline_outputs.items()
                if inner_output in builder.pipeline_outputs
            }
        return steps, writers

    def _through_pipeline_steps(
        self, steps: dict[str, PipelineStep], writers: dict[str, dict[str, UpstreamOutput]]
    ) -> None:
        """An input that reads an output of a pipeline step reads the output of the step inside it
        that writes that output."""
        for step in steps.values():
            for input_name, upstream in list(step.upstream.items()):
                if upstream.step not in writers:
                    continue
                writer = writers[upstream.step].get(upstream.output)
                if writer is not None:
                    step.upstream[input_name] = writer
                    continue
                self.problems.append(
                    Problem(
                        f"output {upstream.output!r} of pipeline step {upstream.step!r} is written by none of "
                        "its component's steps",
                        f"{step.key}.inputs.{input_name}",
                        step.source_map.find(("inputs", input_name)),
                        f"bind it in the component: `OUTPUT: ${{{{parent.outputs.{upstream.output}}}}}` under a step",
                    )
                )

    def _ordered(self, problems: list[Problem]) -> list[Problem]:
        """In file order: the pipeline file, then each component file as first met, then overrides."""

        def rank(problem: Problem) -> int:
            source = problem.position.source if problem.position else ""
            if source.startswith("--set"):
                return len(self.sources) + 1
            return self.sources.index(source) if source in self.sources else len(self.sources)

        return sorted(in_file_order(problems), key=rank)


def _rekeyed(problem: Problem, prefix: str) -> Problem:
    from dataclasses import replace

    key = f"{prefix}.{problem.key_path}" if problem.key_path else prefix
    return replace(problem, key_path=key)


def step_problems(step: PipelineStep, source: str) -> list[Problem]:
    """The step's command job, validated and checked as a job file would be. Its inputs
    from other steps name outputs that exist only once those steps ran: their paths are
    not checked here (their bindings were)."""
    document = step.bound_document(lambda up: preview_output_uri(PREVIEW_PIPELINE, up.step, up.output))
    if step.is_sweep:  # checked as a sweep job file is, its trial as a command job
        later_paths = _datastore_inputs(document) if step.depends_on else []
        try:
            load_step_sweep(step, document, source, (*step.upstream, *later_paths))
            return []
        except ValidationError as exc:
            found = exc.problems
    elif is_spark_document(document):  # a spark step: checked as a Spark job file is
        found = spark_document_problems(document, step.base_dir, source, step.source_map)
    else:
        found = candidate_problems(document, step.base_dir, source, step.source_map)
    upstream = tuple(f"inputs.{name}.path" for name in step.upstream)
    # A datastore path a step after others reads may be written by one of them (Microsoft's
    # 4b: the first step's output is a datastore folder, the second reads a file in it), so
    # that it is missing now is no problem yet: it is checked when the step starts.
    later = tuple(f"inputs.{name}.path" for name in _datastore_inputs(document)) if step.depends_on else ()
    prefix = step.key or f"jobs.{step.name}"
    return [
        p if p.position is not None and p.position.source == step.component else _rekeyed(p, prefix)
        for p in found
        if not p.key_path.startswith(upstream)
        and not (p.key_path.startswith(later) and p.message.endswith("which does not exist"))
    ]
