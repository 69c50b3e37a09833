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
from distrun.spec import paths
from distrun.spec.loaded_pipeline import VALUE_STAND_INS, LoadedComponent, PipelineStep, UpstreamOutput
from distrun.spec.pipeline_bindings import BINDING_FORMS, Binding, NotABinding, binding_of
from distrun.spec.pipeline_models import (
    DATA_TYPES,
    LITERAL_TYPES,
    RESERVED_OUTPUTS,
    InputDeclaration,
    PipelineJob,
    job_output_type,
)
from distrun.spec.pipeline_settings import bound_settings
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path

# What a command step takes from its component; the step's own keys come over these.
FROM_COMPONENT = ("command", "code", "environment", "environment_variables", "resources", "distribution")
# Mappings a step's own value is merged into (key by key) rather than replacing.
MERGED = ("environment_variables", "resources")
# Keys of a step that are the pipeline's, not its command job's.
STEP_ONLY = ("type", "component", "force_rerun")


def copy_positions(smap: SourceMap, prefix: KeyPath, into: SourceMap, at: KeyPath) -> None:
    """The positions under `prefix` in `smap`, set under `at` in `into`."""
    n = len(prefix)
    for path, where in smap.positions.items():
        if path[:n] == prefix:
            into.set(at + path[n:], where)


def _close(word: str, choices: list[str]) -> str | None:
    import difflib  # error paths only

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def _absolute(text: Any, base_dir: Path) -> Any:
    """A local relative path made absolute against `base_dir` (the file that wrote it), so that a
    step's paths from two files (pipeline and component) resolve as each file meant."""
    if not isinstance(text, str) or not text or binding_of_or_none(text) is not None:
        return text
    local = paths.local_path(base_dir, text)
    return str(local) if local is not None else text


def binding_of_or_none(value: object) -> Binding | None:
    try:
        return binding_of(value)
    except NotABinding:
        return None


def _mapping(value: Any) -> dict[str, Any]:
    """A mapping of the raw document, or {} where it is something else (its model says what)."""
    return value if isinstance(value, dict) else {}


def _absolute_environment(env: Any, base_dir: Path) -> Any:
    if not isinstance(env, dict):
        return env
    env = dict(env)
    if isinstance(env.get("conda_file"), str):
        env["conda_file"] = _absolute(env["conda_file"], base_dir)
    if isinstance(env.get("build"), dict) and isinstance(env["build"].get("path"), str):
        env["build"] = {**env["build"], "path": _absolute(env["build"]["path"], base_dir)}
    return env


def _absolute_input(value: Any, base_dir: Path) -> Any:
    if isinstance(value, dict) and isinstance(value.get("path"), str):
        return {**value, "path": _absolute(value["path"], base_dir)}
    return value


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
                value = _absolute_environment(value, self.base_dir)
            elif key == "code" and isinstance(value, str):
                value = _absolute(value, self.base_dir)
            ours = self.document.get(key)
            if key in MERGED and isinstance(ours, dict) and isinstance(value, dict):
                value = {**ours, **value}
            elif key == "distribution" and isinstance(ours, dict) and isinstance(value, dict):
                same = str(ours.get("type", "")).lower() == str(value.get("type", ours.get("type", ""))).lower()
                value = {**ours, **value} if same else value
            self.document[key] = value
            copy_positions(self.smap, self.path + (key,), self.positions, (key,))
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
        for key in FROM_COMPONENT:
            if key not in component.data:
                continue
            value = copy.deepcopy(component.data[key])
            if key == "code":
                value = _absolute(value, component.base_dir)
            elif key == "environment":
                value = _absolute_environment(value, component.base_dir)
            self.document[key] = value
            copy_positions(component.source_map, (key,), self.positions, (key,))

    def _undeclared(self, kind: str, name: str, declared: list[str]) -> None:
        """A step's input or output its component does not declare."""
        close = _close(name, declared)
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
        inputs: dict[str, Any] = {}
        for name, value, _ in self._entries("inputs", given, declared):
            if value is None:
                continue  # given as nothing: the component's default, if any
            bound = self._input_value(name, value, declared.get(name) if declared else None)
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
            return {"type": decl.type, "path": _absolute(str(decl.default), self.component.base_dir)}
        return decl.default

    def _input_value(self, name: str, value: Any, decl: InputDeclaration | None) -> Any:
        at = ("inputs", name)
        try:
            binding = binding_of(value)
            if binding is None and isinstance(value, dict):
                binding = binding_of(value.get("path"))
                if binding is not None:
                    at = at + ("path",)
        except NotABinding as exc:
            self.problem(str(exc), at, f"write the whole value as {BINDING_FORMS}")
            return None
        if binding is not None:
            return self._bound_input(name, value, binding, decl, at)
        if decl is None:
            return _absolute_input(value, self.base_dir)
        if decl.is_data:
            data = {"path": value} if isinstance(value, str) else value
            if isinstance(data, dict):
                return _absolute_input({"type": decl.type, **data}, self.base_dir)
            self.problem(
                f"input {name!r} is a {decl.type} input of the component, not a value ({value!r})",
                at,
                f"give its data as `{name}: {{type: {decl.type}, path: ./data}}` or a binding",
            )
            return None
        wrong = literal_problem(decl, value)
        if wrong:
            self.problem(f"input {name!r}: {wrong}", at, _literal_hint(decl))
            return None
        return value

    def _bound_input(self, name: str, value: Any, binding: Binding, decl: InputDeclaration | None, at: KeyPath) -> Any:
        if binding.kind == "output":
            self.problem(
                f"{binding.text()} is an output of the pipeline: a step cannot read it",
                at,
                "read what a step wrote with ${{parent.jobs.STEP.outputs.NAME}}",
            )
            return None
        if binding.kind == "input" and binding.name in self.refused_above:
            return ""  # its value was refused where it was given
        if binding.kind == "input" and binding.name in self.inherited:
            upstream = self.inherited[binding.name]
            if decl is not None and not decl.is_data:
                self.problem(
                    f"input {name!r} is a {decl.type} input of the component, but {binding.text()} is data",
                    at,
                    "bind a data input (uri_folder, uri_file, ...) to a step's output",
                )
                return None
            self.upstream[name] = upstream
            given = _mapping(_mapping(self.pipeline_data.get("inputs")).get(binding.name))
            return {"type": decl.type if decl is not None else given.get("type", "uri_folder"), "path": binding.text()}
        if binding.kind == "input":
            inputs = _mapping(self.pipeline_data.get("inputs"))
            if binding.name not in inputs:
                close = _close(binding.name, list(inputs))
                add = f"add `{binding.name}` under the pipeline's `inputs:`"
                self.problem(
                    f"{binding.text()} refers to an undefined pipeline input {binding.name!r}",
                    at,
                    f"did you mean parent.inputs.{close}? Otherwise {add}" if close else add,
                )
                return None
            given = copy.deepcopy(inputs[binding.name])
            if isinstance(given, dict) and "path" not in given and ("value" in given or "default" in given):
                given = given.get("value", given.get("default"))  # `{type: integer, default: 3}`
            if decl is not None and not decl.is_data and not isinstance(given, dict):
                wrong = literal_problem(decl, given)
                if wrong:
                    self.problem(f"input {name!r} (from {binding.text()}): {wrong}", at, _literal_hint(decl))
                    return None
            if decl is not None and decl.is_data and isinstance(given, str):
                given = {"type": decl.type, "path": given}
            return _absolute_input(given, self.base_dir)
        step, output = binding.step or "", binding.name
        if step not in self.outputs_of:
            close = _close(step, list(self.outputs_of))
            self.problem(
                f"{binding.text()} refers to an undefined step {step!r}",
                at,
                f"did you mean parent.jobs.{close}?"
                if close
                else f"the pipeline's steps: {', '.join(self.outputs_of)}",
            )
            return None
        outputs = self.outputs_of[step]
        if outputs is not None and output not in outputs and output not in RESERVED_OUTPUTS:
            known = list(outputs)
            close = _close(output, known)
            self.problem(
                f"{binding.text()} refers to an undefined output {output!r} of step {step!r}",
                at,
                f"did you mean parent.jobs.{step}.outputs.{close}?"
                if close
                else f"step {step}'s outputs: {', '.join(known) or 'none'}",
            )
            return None
        written = (outputs or {}).get(output)
        if decl is not None and not decl.is_data:
            if written is not None and written not in LITERAL_TYPES:
                self.problem(
                    f"input {name!r} is a {decl.type} input of the component, but {binding.text()} is data",
                    at,
                    "bind a data input (uri_folder, uri_file, ...) to a step's output, or a value input "
                    "to a value output (type: string, integer, number or boolean)",
                )
                return None
            # A value output (a function's return value): the step gets its text once it was written.
            self.upstream[name] = UpstreamOutput(self.prefix + step, output)
            self.values[name] = decl.type
            return VALUE_STAND_INS[decl.type]
        self.upstream[name] = UpstreamOutput(self.prefix + step, output)
        kind = decl.type if decl is not None else (outputs or {}).get(output, "uri_folder")
        extra = {k: v for k, v in value.items() if k != "path"} if isinstance(value, dict) else {}
        return {"type": kind, **extra, "path": binding.text()}

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
            declared_outputs = _mapping(self.pipeline_data.get("outputs"))
            if binding.name not in declared_outputs:
                close = _close(binding.name, list(declared_outputs))
                add = f"add `{binding.name}:` under the pipeline's `outputs:`"
                self.problem(
                    f"{binding.text()} refers to an undefined pipeline output {binding.name!r}",
                    at,
                    f"did you mean parent.outputs.{close}? Otherwise {add}" if close else add,
                )
                continue
            self.pipeline_outputs[name] = binding.name
            pipeline_output = _mapping(declared_outputs[binding.name])
            outputs[name] = {**kind, **copy.deepcopy(pipeline_output)} or None
            copy_positions(self.smap, ("outputs", binding.name), self.positions, at)
        for name, decl in (declared or {}).items():
            if outputs.get(name) is None:
                outputs[name] = {"type": job_output_type(decl.type), **({"mode": decl.mode} if decl.mode else {})}
        if outputs or "outputs" in self.raw:
            self.document["outputs"] = outputs


def literal_problem(decl: InputDeclaration, value: Any) -> str | None:
    """What is wrong with a value for a literal input of type `decl.type`, or None."""
    if isinstance(value, dict):
        if "value" not in value and "default" not in value:
            return f"expected a {decl.type} value, got a mapping"
        value = value.get("value", value.get("default"))
    if isinstance(value, list):
        return f"expected a {decl.type} value, got a list"
    if decl.type == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        return f"expected a whole number, got {value!r}"
    if decl.type == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return f"expected a number, got {value!r}"
    if decl.type == "boolean" and not isinstance(value, bool):
        return f"expected true or false, got {value!r}"
    if decl.enum is not None and value not in decl.enum:
        return f"{value!r} is not one of {', '.join(map(repr, decl.enum))}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if decl.min is not None and value < decl.min:
            return f"{value!r} is below the input's min {decl.min:g}"
        if decl.max is not None and value > decl.max:
            return f"{value!r} is above the input's max {decl.max:g}"
    return None


def _literal_hint(decl: InputDeclaration) -> str:
    example = {"integer": "3", "number": "0.01", "boolean": "true", "string": "some text"}[decl.type]
    return f"the component declares it `type: {decl.type}`: give e.g. {example}"


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
