"""Read a component (Azure ML's commandComponent or pipelineComponent): from its file, `--set`
overrides applied, or given as data (inline under a step, or handed to a sweep step's supervisor),
validated by its model, each problem at its position.

Apart from `distrun.loading.pipeline_loader`, which reads the components its steps name through it,
so that the sweep loader (a sweep file's `trial: ./train.yml`) reads components without loading
pipelines, and the pipeline loader checks sweep steps with the sweep loader.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from distrun.core.errors import Position, Problem, ValidationError
from distrun.loading.raw_checks import in_file_order
from distrun.spec import pipeline_models
from distrun.spec.loaded_pipeline import LoadedComponent
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.overrides import apply_overrides
from distrun.spec.paths import local_path
from distrun.spec.pipeline_steps import copy_positions
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path
from distrun.spec.spark_models import SparkComponent
from distrun.spec.yaml_source import read_yaml_file

__all__ = ["ComponentReader", "StepComponents", "load_component_data", "load_component_file", "registered_file"]


class ComponentReader:
    """Reads components for the file `source` names them in; what is wrong goes to `problems`,
    and each component file read to `sources` (the order problems are reported in)."""

    def __init__(self, source: str, problems: list[Problem], sources: list[str]) -> None:
        self.source = source
        self.problems = problems
        self.sources = sources

    def read_file(
        self, path: Path, named_at: Position | None, at: KeyPath, overrides: list[str] | tuple[str, ...] = ()
    ) -> LoadedComponent | None:
        """The component file `path`, named at `at` (written at `named_at`)."""
        if not path.is_file():
            self.problems.append(
                Problem(
                    f"component file {path} {'is a folder' if path.is_dir() else 'does not exist'}",
                    format_key_path(at),
                    named_at,
                    "check the path (relative paths start at the folder of the file that names it)",
                )
            )
            return None
        try:
            data, smap = read_yaml_file(path)
            data = apply_overrides(data, smap, list(overrides))
        except ValidationError as exc:
            self.sources.append(str(path))
            self.problems += exc.problems
            return None
        self.sources.append(str(path))
        return self.component(data, smap, path.parent, str(path), at)

    def component(self, data: Any, smap: SourceMap, base_dir: Path, source: str, at: KeyPath) -> LoadedComponent | None:
        """The component `data` of the file `source` (inline in `self.source`: its problems keyed under `at`)."""
        if not isinstance(data, dict):
            self.problems.append(
                Problem(
                    "a component is a mapping of keys (command:, inputs:, ...)",
                    "",
                    smap.find(()),
                    "write the component's keys at the top level",
                )
            )
            return None
        kind = str(data.get("type", "command")).lower()
        schema = str(data.get("$schema", "")).lower()
        model: type[pipeline_models.CommandComponent] | type[pipeline_models.PipelineComponent]
        if kind == "pipeline" or "pipelinecomponent" in schema:
            model = pipeline_models.PipelineComponent
        elif kind == "command":
            model = pipeline_models.CommandComponent
        elif kind == "spark" or "sparkcomponent" in schema:
            model = SparkComponent  # type: ignore[assignment]
        else:
            self.problems.append(
                Problem(
                    f"a {kind} component cannot be a step: distrun runs command and pipeline components",
                    "type",
                    smap.find(("type",)),
                    "use a component with `type: command` (or `type: pipeline`)",
                )
            )
            return None
        try:
            spec = model.model_validate(data)
        except ModelError as exc:
            found = translate(exc, data, smap, model)
            if source != self.source or not at:
                self.problems += found
            else:  # an inline component: its keys are under the step's
                prefix = format_key_path(at)
                self.problems += [
                    replace(p, key_path=f"{prefix}.{p.key_path}" if p.key_path else prefix) for p in found
                ]
            return None
        return LoadedComponent(spec, data, smap, base_dir, source)


def load_component_file(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedComponent:
    """A component file on its own (`distrun component create`, `--set` overrides applied),
    checked as a pipeline checks the components its steps name: a command component's command's
    references to its inputs and outputs; a pipeline component's steps' components, each read
    (a pipeline component among them, its steps' too). A pipeline component's steps are checked
    with their inputs when a pipeline names it, as Azure ML does."""
    from distrun.loading.checks import reference_problems

    file = Path(path)
    problems: list[Problem] = []
    reader = ComponentReader(str(file), problems, [str(file)])
    component = reader.read_file(file.resolve(), SourceMap(str(file)).find(()), (), overrides)
    if component is not None and isinstance(component.spec, pipeline_models.PipelineComponent):
        _read_step_components(StepComponents(reader), component)
    elif component is not None:
        position = lambda *key: component.source_map.find(tuple(key))  # noqa: E731
        spec = component.spec
        # A command component's references are in its command, a spark component's in its args.
        text = spec.args or "" if isinstance(spec, SparkComponent) else spec.command
        problems += reference_problems(text, spec.inputs, spec.outputs, position)
    if problems or component is None:
        overridden = lambda p: bool(p.position and p.position.source.startswith("--set"))  # noqa: E731
        raise ValidationError(sorted(in_file_order(problems), key=overridden))
    return component


def _read_step_components(steps: StepComponents, component: LoadedComponent) -> None:
    """The components a pipeline component's steps name, read (each file once), and those of the
    pipeline components among them; what is wrong goes to the reader's problems."""
    pending, seen = [component], {id(component)}
    while pending:
        current = pending.pop()
        assert isinstance(current.spec, pipeline_models.PipelineComponent)
        for name, raw in current.spec.jobs.items():
            key = "trial" if raw.get("type") == "sweep" else "component"
            found = steps.of(current.source_map, current.source, current.base_dir, name, raw, key)
            if (
                found is not None
                and isinstance(found.spec, pipeline_models.PipelineComponent)
                and id(found) not in seen
            ):
                seen.add(id(found))
                pending.append(found)


def load_component_data(data: Any, base_dir: Path, source: str) -> LoadedComponent:
    """A component given as data (a pipeline's sweep step hands its trial to the sweep's
    supervisor so), validated as a pipeline validates the components its steps name."""
    problems: list[Problem] = []
    component = ComponentReader(source, problems, [source]).component(data, SourceMap(source), base_dir, source, ())
    if component is None:
        raise ValidationError(problems)
    return component


class StepComponents:
    """The component each pipeline step names (a file, a mapping, or `azureml:NAME:VERSION`),
    each file read once however many steps name it; what is wrong goes to `reader.problems`."""

    def __init__(self, reader: ComponentReader) -> None:
        self.reader = reader
        self.files: dict[Path, LoadedComponent | None] = {}

    def problem(self, smap: SourceMap, message: str, at: KeyPath, hint: str) -> None:
        self.reader.problems.append(Problem(message, format_key_path(at), smap.find(at), hint))

    def of(
        self, smap: SourceMap, source: str, base_dir: Path, name: str, raw: dict[str, Any], key: str = "component"
    ) -> LoadedComponent | None:
        """The component the step `name` (written in `source`, mapped by `smap`) names under `key`
        (`component`; a sweep step's `trial`)."""
        ref = raw.get(key)
        at = ("jobs", name, key)
        if ref is None:
            return None
        if isinstance(ref, dict):
            inline = SourceMap(source)
            copy_positions(smap, at, inline, ())
            return self.reader.component(ref, inline, base_dir, source, at)
        if not isinstance(ref, str) or not ref.strip():
            self.problem(
                smap, f"expected the path of a component file, got {ref!r}", at, "write e.g. `component: ./train.yml`"
            )
            return None
        if ref.startswith("azureml:"):
            path = self._registered(smap, ref, at)
        else:
            path = local_path(base_dir, ref.removeprefix("file:") if not ref.startswith("file://") else ref)
            if path is None:
                self.problem(
                    smap,
                    f"component {ref!r} is not a file on this machine",
                    at,
                    "name a local component file: ./train.yml",
                )
        if path is None:
            return None
        path = path.resolve()
        if path not in self.files:
            self.files[path] = self.reader.read_file(path, smap.find(at), at)
        return self.files[path]

    def _registered(self, smap: SourceMap, ref: str, at: KeyPath) -> Path | None:
        """The file of a component registered with `distrun component create`."""
        from distrun.core.errors import DistrunError

        try:
            return registered_file(ref)
        except DistrunError as exc:
            self.problem(smap, exc.message, at, exc.hint)
            return None


def registered_file(ref: str) -> Path:
    """The file of a component registered with `distrun component create` (`azureml:NAME:VERSION`,
    `azureml:NAME@latest`, `azureml:NAME`); a `DistrunError` saying why there is none."""
    from distrun.core.errors import DistrunError
    from distrun.store.components import get_component, parse_reference
    from distrun.store.layout import distrun_home

    parsed = parse_reference(ref)
    if parsed is None:
        raise DistrunError(
            f"{ref!r} is not a component distrun can find (components in Azure ML registries are not supported)",
            "name a component registered here, azureml:NAME:VERSION or azureml:NAME@latest, or a file",
        )
    return get_component(distrun_home(), *parsed).file
