"""A pipeline step as the command job it runs as: its component's command, code, environment,
resources and distribution, with the step's own keys over them, and its inputs and outputs
bound (the component's defaults filled in, `${{parent...}}` resolved).

Pure: from plain data and positions to a `PipelineStep` and the problems found. The command
job document built here is then validated by the command job's own model and checks (the
loader), so a step is held to the same rules as a job file. Every value keeps where it was
written (the pipeline file, or the component file), so any later problem points there.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from distrun.core.errors import Problem
from distrun.spec.bound_settings import bound_settings
from distrun.spec.loaded_pipeline import LoadedComponent, PipelineStep, UpstreamOutput
from distrun.spec.pipeline_bindings import NotABinding, binding_of
from distrun.spec.pipeline_inputs import InputBinder, close_match, mapping
from distrun.spec.pipeline_models import DATA_TYPES, InputDeclaration, PipelineJob, job_output_type
from distrun.spec.pipeline_paths import absolute, absolute_environment
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path
from distrun.spec.spark_models import SPARK_COMPONENT_KEYS, SparkComponent

__all__ = ["FROM_COMPONENT", "StepBuilder", "copy_positions", "outputs_of_step"]

# What a command step takes from its component; the step's own keys come over these.
FROM_COMPONENT = ("command", "code", "environment", "environment_variables", "resources", "distribution")
# Mappings a step's own value is merged into (key by key) rather than replacing.
MERGED = ("environment_variables", "resources", "conf")
# Keys of a step that are the pipeline's, not its command job's.
STEP_ONLY = ("type", "component", "force_rerun")


def copy_positions(smap: SourceMap, prefix: KeyPath, into: SourceMap, at: KeyPath) -> None:
    """The positions under `prefix` in `smap`, set under `at` in `into`."""
    n = len(prefix)
    for path, where in smap.positions.items():
        if path[:n] == prefix:
            into.set(at + path[n:], where)


class StepBuilder:
    """Builds one step; `problems` collects what is wrong with it."""

    def __init__(
        self,
        name: str,
        raw: dict[str, Any],
        pipeline: PipelineJob,
        pipeline_data: dict[str, Any],
        smap: SourceMap,
        base_dir: Path,
        component: LoadedComponent | None,
        outputs_of: Mapping[str, Mapping[str, str] | None],
        prefix: str = "",
        inherited: Mapping[str, UpstreamOutput] | None = None,
        refused_above: frozenset[str] = frozenset(),
    ) -> None:
        self.name = name
        self.raw = raw
        self.pipeline = pipeline
        self.pipeline_data = pipeline_data
        self.smap = smap
        self.base_dir = base_dir
        self.component = component
        self.outputs_of = outputs_of  # every step's outputs and their types (None: not known)
        # Inside a pipeline component: its steps' full names start with the naming step's ("OUTER."),
        # and its inputs that the naming step bound to other steps' outputs read those outputs.
        self.prefix = prefix
        self.inherited = inherited or {}
        # Inputs of the component whose value the naming step gave wrong (said there): reading
        # one says nothing more. `refused` is this step's own, for the steps of its component.
        self.refused_above = refused_above
        self.refused: set[str] = set()
        self.path: KeyPath = ("jobs", name)
        self.problems: list[Problem] = []
        self.notes: list[str] = []  # what is said but not refused (an undeclared input, dropped)
        self.document: dict[str, Any] = {}
        self.positions = SourceMap(smap.source)
        self.positions.set((), smap.find(self.path))
        self.upstream: dict[str, UpstreamOutput] = {}
        self.values: dict[str, str] = {}  # inputs reading an upstream output's value: name -> type
        self.pipeline_outputs: dict[str, str] = {}
        # Settings written as ${{parent.inputs.X}} (`compute`, say) are that input's value from here on.
        self.raw, found = bound_settings(raw, pipeline_data.get("inputs"), refused_above, self.inherited)
        for message, at, hint in found:
            self.problem(message, at, hint)

    def problem(self, message: str, at: KeyPath, hint: str) -> None:
        path = self.path + at
        self.problems.append(Problem(message, format_key_path(path), self.smap.find(path), hint))

    # ------------------------------------------------------------ the whole step

    def build(self) -> PipelineStep:
        if self.component is not None:
            self._from_component(self.component)
        for key, value in self.raw.items():
            if key in STEP_ONLY or key in ("inputs", "outputs"):
                continue
            if self.component is not None and key in ("command", "code"):
                self.problem(
                    f"a step with a component runs the component's {key}; it cannot set `{key}`",
                    (key,),
                    f"remove `{key}` here, or change it in the component file {self.component.source}",
                )
                continue
            value = copy.deepcopy(value)
            if key == "environment":
                value = absolute_environment(value, self.base_dir)
            elif key == "code" and isinstance(value, str):
                value = absolute(value, self.base_dir)
            ours = self.document.get(key)
            if key in MERGED and isinstance(ours, dict) and isinstance(value, dict):
                value = {**ours, **value}
            elif key == "distribution" and isinstance(ours, dict) and isinstance(value, dict):
                same = str(ours.get("type", "")).lower() == str(value.get("type", ours.get("type", ""))).lower()
                value = {**ours, **value} if same else value
            self.document[key] = value
            copy_positions(self.smap, self.path + (key,), self.positions, (key,))
        if str(self.raw.get("type", "")).lower() == "spark":  # loaded as a Spark job (`spark_loader`)
            self.document["type"] = "spark"
        self.document.setdefault("display_name", self.name)
        if self.pipeline.experiment_name and "experiment_name" not in self.document:
            self.document["experiment_name"] = self.pipeline.experiment_name
        self.compute()
        self._inputs()
        self._outputs()
        return PipelineStep(
            name=self.prefix + self.name,
            document=self.document,
            source_map=self.positions,
            base_dir=self.component.base_dir if self.component else self.base_dir,
            # An inline component (a mapping under `component:`) is written in the pipeline file.
            component=self.component.source if self.component and self.component.source != self.smap.source else None,
            upstream=self.upstream,
            values=self.values,
            pipeline_outputs=self.pipeline_outputs,
            is_deterministic=self.component.spec.is_deterministic if self.component else True,
            force_rerun=self.force_rerun(),
            compute_key=self.compute_key,
            key=format_key_path(self.path),
        )

    def force_rerun(self) -> bool:
        """The step's own `force_rerun` (a command or sweep step's): it then runs even when an
        earlier run could be reused."""
        force_rerun = self.raw.get("force_rerun", False)
        if not isinstance(force_rerun, bool):
            self.problem(
                f"force_rerun must be true or false, not {force_rerun!r}",
                ("force_rerun",),
                "write `force_rerun: true` to run this step even when an earlier run could be reused",
            )
        return force_rerun is True

    def compute(self) -> None:
        """The step's compute: its own, or the pipeline's default; `compute_key` says where it was written."""
        compute = self.raw.get("compute") or self.pipeline.settings.default_compute or self.pipeline.compute
        self.compute_key = f"jobs.{self.name}.compute"
        if compute is not None:
            self.document["compute"] = compute
            if "compute" not in self.raw:
                where = ("settings", "default_compute") if self.pipeline.settings.default_compute else ("compute",)
                self.positions.set(("compute",), self.smap.find(where))
                self.compute_key = format_key_path(where)

    def _from_component(self, component: LoadedComponent) -> None:
        spark = isinstance(component.spec, SparkComponent)
        for key in SPARK_COMPONENT_KEYS if spark else FROM_COMPONENT:
            if key not in component.data:
                continue
            value = copy.deepcopy(component.data[key])
            if key == "code":
                value = absolute(value, component.base_dir)
            elif key == "environment":
                value = absolute_environment(value, component.base_dir)
            self.document[key] = value
            copy_positions(component.source_map, (key,), self.positions, (key,))

    def _undeclared(self, kind: str, name: str, declared: list[str]) -> None:
        """A step's input or output its component does not declare."""
        close = close_match(name, declared)
        if kind == "input" and close is None:
            # Azure ML builds a step's inputs from its component's declarations: one it does not
            # declare is dropped, and the pipeline runs (published pipelines pass such inputs).
            # Dropped here too, and said; a name close to a declared one is a misspelling, refused.
            where = self.smap.find(self.path + ("inputs", name))
            self.notes.append(
                f"{where}: {format_key_path(self.path + ('inputs', name))}: the component declares no input "
                f"{name!r} (its inputs: {', '.join(declared) or 'none'}): Azure ML drops it, and so does distrun"
            )
            return
        listed = ", ".join(declared) or "none"
        self.problem(
            f"the component has no {kind} {name!r}",
            (f"{kind}s", name),
            f"did you mean {close!r}?" if close else f"remove it; the component's {kind}s: {listed}",
        )

    # ------------------------------------------------------------ inputs

    def _given(self, key: str) -> dict[str, Any] | None:
        """The step's `inputs` or `outputs` ({} when it has none); None when they are not a
        mapping, which is passed on as written for the command job's model to say what is wrong."""
        given = self.raw.get(key)
        if given is None or isinstance(given, dict):
            return given or {}
        self.document[key] = given
        copy_positions(self.smap, self.path + (key,), self.positions, (key,))
        return None

    def _entries(
        self, key: str, given: dict[str, Any], declared: Mapping[str, Any] | None
    ) -> Iterator[tuple[str, Any, tuple[str, str]]]:
        """Each entry given under `key` (inputs, outputs) with its position kept; one the component
        does not declare is said and skipped."""
        for name, value in given.items():
            at = (key, name)
            copy_positions(self.smap, self.path + at, self.positions, at)
            if declared is not None and name not in declared:
                self._undeclared(key[:-1], name, list(declared))
                continue
            yield name, value, at

    def _inputs(self) -> None:
        given = self._given("inputs")
        if given is None:
            return
        declared = self.component.spec.inputs if self.component else None
        binder = InputBinder(
            self.problem,
            self.pipeline_data,
            self.outputs_of,
            self.base_dir,
            self.prefix,
            self.inherited,
            self.refused_above,
            self.upstream,
            self.values,
        )
        inputs: dict[str, Any] = {}
        for name, value, _ in self._entries("inputs", given, declared):
            if value is None:
                continue  # given as nothing: the component's default, if any
            bound = binder.value(name, value, declared.get(name) if declared else None)
            # A refused value (its problem is said) still names the input, so that the command's
            # `${{inputs.NAME}}` is not reported as undefined as well.
            inputs[name] = bound if bound is not None else ""
            if bound is None:
                self.refused.add(name)
        for name, decl in (declared or {}).items():
            if name in inputs or (name in given and given[name] is not None):
                continue
            if decl.default is not None:
                inputs[name] = self._default(decl)
                copy_positions(self.component.source_map, ("inputs", name, "default"), self.positions, ("inputs", name))  # type: ignore[union-attr]
            elif not decl.optional:
                self.problem(
                    f"input {name!r} of the component is required: it has no default and is not optional",
                    ("inputs",) if "inputs" in self.raw else (),
                    f"give it under jobs.{self.name}.inputs, e.g. `{name}: ${{{{parent.inputs.{name}}}}}`",
                )
        if inputs or "inputs" in self.raw:
            self.document["inputs"] = inputs

    def _default(self, decl: InputDeclaration) -> Any:
        if decl.is_data:
            assert self.component is not None
            return {"type": decl.type, "path": absolute(str(decl.default), self.component.base_dir)}
        return decl.default

    # ------------------------------------------------------------ outputs

    def _outputs(self) -> None:
        given = self._given("outputs")
        if given is None:
            return
        declared = self.component.spec.outputs if self.component else None
        outputs: dict[str, Any] = {}
        for name, value, at in self._entries("outputs", given, declared):
            outputs[name] = None  # a refused value still names the output (see _inputs)
            kind = {"type": job_output_type(declared[name].type)} if declared is not None else {}
            try:
                binding = binding_of(value)
            except NotABinding as exc:
                self.problem(str(exc), at, "write the whole value as ${{parent.outputs.NAME}}")
                continue
            if binding is None:
                outputs[name] = {**kind, **value} if isinstance(value, dict) else (value if value else kind or None)
                continue
            if binding.kind != "output":
                self.problem(
                    f"an output can only be bound to an output of the pipeline, not to {binding.text()}",
                    at,
                    "write `${{parent.outputs.NAME}}` with NAME under the pipeline's `outputs:`",
                )
                continue
            declared_outputs = mapping(self.pipeline_data.get("outputs"))
            if binding.name not in declared_outputs:
                close = close_match(binding.name, list(declared_outputs))
                add = f"add `{binding.name}:` under the pipeline's `outputs:`"
                self.problem(
                    f"{binding.text()} refers to an undefined pipeline output {binding.name!r}",
                    at,
                    f"did you mean parent.outputs.{close}? Otherwise {add}" if close else add,
                )
                continue
            self.pipeline_outputs[name] = binding.name
            pipeline_output = mapping(declared_outputs[binding.name])
            outputs[name] = {**kind, **copy.deepcopy(pipeline_output)} or None
            copy_positions(self.smap, ("outputs", binding.name), self.positions, at)
        for name, decl in (declared or {}).items():
            if outputs.get(name) is None:
                outputs[name] = {"type": job_output_type(decl.type), **({"mode": decl.mode} if decl.mode else {})}
        if outputs or "outputs" in self.raw:
            self.document["outputs"] = outputs


def outputs_of_step(raw: Any, component: LoadedComponent | None) -> dict[str, str]:
    """A step's outputs and their types (what `${{parent.jobs.STEP.outputs.NAME}}` may name)."""
    if component is not None:
        return {name: decl.type for name, decl in component.spec.outputs.items()}
    outputs = raw.get("outputs") if isinstance(raw, dict) else None
    if not isinstance(outputs, dict):
        return {}
    found = {}
    for name, value in outputs.items():
        kind = value.get("type") if isinstance(value, dict) else None
        found[str(name)] = kind if kind in DATA_TYPES else "uri_folder"
    return found
