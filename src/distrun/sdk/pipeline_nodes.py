"""The steps of a pipeline built in Python: what a component call or a `command(...)` inside an
`@pipeline` function leaves behind, and how each value a step is given becomes the text a
pipeline YAML would hold.

While a pipeline function runs, the pipeline being built is on a stack (`building`); a component
called then, or a `command(...)` made or called then, adds itself to it as a step. A step's
outputs are `NodeOutput`s that remember their step, so that `train.outputs.model` passed to
another call becomes `${{parent.jobs.train.outputs.model}}`, and a parameter of the pipeline
function is a `PipelineInput` that becomes `${{parent.inputs.NAME}}`. Nothing here runs or
validates: the pipeline document built from these is loaded by the YAML loader.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distrun.sdk.inputs_outputs import Input, Output
from distrun.sdk.plain import AttrDict, path_text, to_data


class PipelineBuilder:
    """The steps one `@pipeline` function call made, in the order it made them."""

    def __init__(self, function: str) -> None:
        self.function = function
        self.nodes: list[Any] = []

    def add(self, node: Any) -> None:
        if not any(node is known for known in self.nodes):
            self.nodes.append(node)

    def replace(self, old: Any, new: Any) -> None:
        """`new` in `old`'s place (a step swept: the sweep is the step, not its trial), else last."""
        for index, known in enumerate(self.nodes):
            if known is old:
                self.nodes[index] = new
                return
        self.add(new)


_building: list[PipelineBuilder] = []  # nested @pipeline calls: the innermost last


def building() -> PipelineBuilder | None:
    """The pipeline whose function is running now, if any."""
    return _building[-1] if _building else None


def push(builder: PipelineBuilder) -> None:
    _building.append(builder)


def pop(builder: PipelineBuilder) -> None:
    if _building and _building[-1] is builder:
        _building.pop()


class PipelineInput:
    """A parameter of the pipeline function, as the steps see it: `${{parent.inputs.NAME}}`."""

    def __init__(self, name: str, value: Any) -> None:
        self._name = name
        self._value = value  # what the pipeline was given (or the parameter's default)

    @property
    def binding(self) -> str:
        return f"${{{{parent.inputs.{self._name}}}}}"

    def __repr__(self) -> str:
        return f"PipelineInput({self._name}={self._value!r})"


class NodeOutput(Output):
    """An output of a step: its type, mode and path may be changed (`.mode = "upload"`), and
    passing it to another call reads it there."""

    def __init__(self, node: Any, port: str, **fields: Any) -> None:
        super().__init__(**fields)
        self._node = node
        self._port = port

    def __repr__(self) -> str:
        return f"NodeOutput({self._port} of {type(self._node).__name__}, {self._to_data()!r})"


class NodeOutputs(AttrDict):
    """A step's outputs: `step.outputs.x = Output(...)` changes output x of that step (it stays
    the step's, so later calls still read it)."""

    def __init__(self, node: Any, declared: dict[str, Any]) -> None:
        super().__init__()
        dict.__setattr__(self, "_node", node)
        for port, value in declared.items():
            self[port] = value

    def __setitem__(self, port: str, value: Any) -> None:
        node = self.__dict__["_node"]
        if isinstance(value, NodeOutput) and value._node is not node:
            raise TypeError(
                f"outputs.{port}: an output of another step cannot be this step's output; "
                "pass it to a call as an input instead"
            )
        if isinstance(value, Output) and not isinstance(value, NodeOutput):
            fields = {k: v for k, v in value._to_data().items()}
            value = NodeOutput(node, port, **fields)
        elif isinstance(value, dict):
            value = NodeOutput(node, port, **value)
        elif value is None:
            value = NodeOutput(node, port)
        elif not isinstance(value, NodeOutput):
            raise TypeError(f"outputs.{port}: give an Output(type=..., mode=..., path=...), not {value!r}")
        dict.__setitem__(self, port, value)

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __getattr__(self, name: str) -> Any:
        if name in self:
            return self[name]
        raise NoSuchOutput(self.__dict__["_node"], name, list(self))

    def __dir__(self) -> list[str]:
        return list(self)  # what a misspelled output is compared with: the step's outputs


class NoSuchOutput(AttributeError):
    """`step.outputs.NAME` for an output the step's component does not declare: said as the YAML
    loader says `${{parent.jobs.STEP.outputs.NAME}}` (with the output it means), not as a dict's
    attribute (Python would offer the dict's methods: `cleand`, did you mean `clear`?)."""

    def __init__(self, node: Any, name: str, known: list[str]) -> None:
        import difflib

        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        step = (node.name or node._name_hint()) if hasattr(node, "_name_hint") else type(node).__name__
        hint = f"did you mean outputs.{close[0]}?" if close else f"its outputs: {', '.join(known) or 'none'}"
        super().__init__(f"step {step} has no output {name!r}: {hint}")

    def __str__(self) -> str:
        return str(self.args[0])


def absolute(path: Any, base_dir: Path) -> Any:
    """A local relative path made absolute against `base_dir` (where the user's code ran), as the
    YAML loader makes a file's paths absolute against its folder; URIs, `azureml:` names and
    bindings stay as they are."""
    from distrun.spec.paths import local_path

    text = path_text(path)
    if not isinstance(text, str) or not text or "${{" in text or text.startswith("azureml:"):
        return text
    local = local_path(base_dir, text)
    return text if local is None else str(local)


def io_type(value: Any) -> str:
    """The declared type of a pipeline component's input given this value."""
    if isinstance(value, PipelineInput):
        return io_type(value._value)
    if isinstance(value, (Input, Output)):
        return str(value.type or "uri_folder")
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


class StepNames:
    """The step name of each node of one pipeline (for the bindings that read its outputs)."""

    def __init__(self, names: dict[int, str], function: str) -> None:
        self._names = names
        self.function = function

    def of(self, node: Any, where: str) -> str:
        try:
            return self._names[id(node)]
        except KeyError:
            raise TypeError(
                f"{where}: it is an output of a step that is not in pipeline {self.function}() "
                "(made outside its function, or in another pipeline): pass it in as a parameter of the function"
            ) from None


def input_value(value: Any, names: StepNames, base_dir: Path, where: str) -> Any:
    """A value given to a step's input, as the pipeline document holds it."""
    if isinstance(value, NodeOutput):
        return f"${{{{parent.jobs.{names.of(value._node, where)}.outputs.{value._port}}}}}"
    if isinstance(value, PipelineInput):
        return value.binding
    if isinstance(value, Input):
        if value.is_literal:
            return value.default
        data = to_data(value)
        if "path" in data:
            data["path"] = absolute(data["path"], base_dir)
        return data
    if isinstance(value, Output):
        raise TypeError(f"{where}: an Output is not a value to read; pass a step's output (step.outputs.NAME)")
    if isinstance(value, os.PathLike):
        return absolute(value, base_dir)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    from distrun.sdk.sweep_space import SweepDistribution

    if isinstance(value, SweepDistribution):
        raise TypeError(
            f"{where}: {value!r} is a search space, and this step is not swept: "
            "call .sweep(primary_metric=..., goal=...) on the step and use what it returns, or give one value"
        )
    raise TypeError(
        f"{where}: {type(value).__name__} is not an input value (give a number, text, Input or a step's output)"
    )


def output_value(output: NodeOutput, bound_to: str | None, base_dir: Path) -> Any:
    """A step's output as the pipeline document holds it: bound to a pipeline output, else its
    settings (type, mode, path) when it has any besides its type."""
    if bound_to is not None:
        return f"${{{{parent.outputs.{bound_to}}}}}"
    data = output._to_data()
    if "path" in data:
        data["path"] = absolute(data["path"], base_dir)
    return data
