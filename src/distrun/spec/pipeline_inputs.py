"""One input of a pipeline step, bound: a value checked against the component's declaration,
data made a data input, or a binding resolved (`${{parent.inputs.X}}` to the pipeline's input,
`${{parent.jobs.STEP.outputs.Y}}` to that step's output, which the step then reads upstream).

Pure: from plain data to the input's value in the step's command job, or None with its problem
said through `problem(message, at, hint)` (`at` below the step's key).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from distrun.spec.loaded_pipeline import VALUE_STAND_INS, UpstreamOutput
from distrun.spec.pipeline_bindings import BINDING_FORMS, Binding, NotABinding, binding_of
from distrun.spec.pipeline_models import LITERAL_TYPES, RESERVED_OUTPUTS, InputDeclaration
from distrun.spec.pipeline_paths import absolute_input
from distrun.spec.source_map import KeyPath

ProblemAt = Callable[[str, KeyPath, str], None]


def close_match(word: str, choices: list[str]) -> str | None:
    import difflib  # error paths only

    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


def mapping(value: Any) -> dict[str, Any]:
    """A mapping of the raw document, or {} where it is something else (its model says what)."""
    return value if isinstance(value, dict) else {}


class InputBinder:
    """Binds a step's inputs; `upstream` and `values` collect the inputs read from other steps."""

    def __init__(
        self,
        problem: ProblemAt,
        pipeline_data: dict[str, Any],
        outputs_of: Mapping[str, Mapping[str, str] | None],
        base_dir: Path,
        prefix: str,
        inherited: Mapping[str, UpstreamOutput],
        refused_above: frozenset[str],
        upstream: dict[str, UpstreamOutput],
        values: dict[str, str],
    ) -> None:
        self.problem = problem
        self.pipeline_data = pipeline_data
        self.outputs_of = outputs_of
        self.base_dir = base_dir
        self.prefix = prefix
        self.inherited = inherited
        self.refused_above = refused_above
        self.upstream = upstream
        self.values = values

    def value(self, name: str, value: Any, decl: InputDeclaration | None) -> Any:
        """The input `name` as the step's command job takes it; None when refused (said)."""
        at: KeyPath = ("inputs", name)
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
            return self._bound(name, value, binding, decl, at)
        if decl is None:
            return absolute_input(value, self.base_dir)
        if decl.is_data:
            data = {"path": value} if isinstance(value, str) else value
            if isinstance(data, dict):
                return absolute_input({"type": decl.type, **data}, self.base_dir)
            self.problem(
                f"input {name!r} is a {decl.type} input of the component, not a value ({value!r})",
                at,
                f"give its data as `{name}: {{type: {decl.type}, path: ./data}}` or a binding",
            )
            return None
        wrong = literal_problem(decl, value)
        if wrong:
            self.problem(f"input {name!r}: {wrong}", at, literal_hint(decl))
            return None
        return value

    def _bound(self, name: str, value: Any, binding: Binding, decl: InputDeclaration | None, at: KeyPath) -> Any:
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
            return self._inherited(name, binding, decl, at)
        if binding.kind == "input":
            return self._pipeline_input(name, binding, decl, at)
        return self._step_output(name, value, binding, decl, at)

    def _inherited(self, name: str, binding: Binding, decl: InputDeclaration | None, at: KeyPath) -> Any:
        """An input of a pipeline component that the naming step bound to another step's output."""
        upstream = self.inherited[binding.name]
        if decl is not None and not decl.is_data:
            self.problem(
                f"input {name!r} is a {decl.type} input of the component, but {binding.text()} is data",
                at,
                "bind a data input (uri_folder, uri_file, ...) to a step's output",
            )
            return None
        self.upstream[name] = upstream
        given = mapping(mapping(self.pipeline_data.get("inputs")).get(binding.name))
        return {"type": decl.type if decl is not None else given.get("type", "uri_folder"), "path": binding.text()}

    def _pipeline_input(self, name: str, binding: Binding, decl: InputDeclaration | None, at: KeyPath) -> Any:
        """`${{parent.inputs.X}}`: the pipeline's input X, as the component declares the step's input."""
        inputs = mapping(self.pipeline_data.get("inputs"))
        if binding.name not in inputs:
            close = close_match(binding.name, list(inputs))
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
                self.problem(f"input {name!r} (from {binding.text()}): {wrong}", at, literal_hint(decl))
                return None
        if decl is not None and decl.is_data and isinstance(given, str):
            given = {"type": decl.type, "path": given}
        return absolute_input(given, self.base_dir)

    def _step_output(self, name: str, value: Any, binding: Binding, decl: InputDeclaration | None, at: KeyPath) -> Any:
        """`${{parent.jobs.STEP.outputs.Y}}`: read once STEP wrote it (data: its folder; a value: its text)."""
        step, output = binding.step or "", binding.name
        if step not in self.outputs_of:
            close = close_match(step, list(self.outputs_of))
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
            close = close_match(output, known)
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
    if decl.type == "boolean" and not isinstance(value, bool) and not _boolean_text(value):
        return f"expected true or false, got {value!r}"
    if decl.enum is not None and value not in decl.enum:
        return f"{value!r} is not one of {', '.join(map(repr, decl.enum))}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if decl.min is not None and value < decl.min:
            return f"{value!r} is below the input's min {decl.min:g}"
        if decl.max is not None and value > decl.max:
            return f"{value!r} is above the input's max {decl.max:g}"
    return None


def _boolean_text(value: Any) -> bool:
    """ "True" or "False" (any case): Azure ML passes a step's value to its command as text, so a
    boolean input given one runs as given; it reaches the command as exactly that text."""
    return isinstance(value, str) and value.strip().lower() in ("true", "false")


def literal_hint(decl: InputDeclaration) -> str:
    example = {"integer": "3", "number": "0.01", "boolean": "true", "string": "some text"}[decl.type]
    return f"the component declares it `type: {decl.type}`: give e.g. {example}"
