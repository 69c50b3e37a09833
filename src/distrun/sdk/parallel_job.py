"""azure-ai-ml's `parallel_run_function` and `RunFunction` for distrun: a parallel component made in
Python, whose call inside an `@pipeline` function is a `type: parallel` step.

The step is written as the YAML form writes it (an inline parallel component under `component:`,
the step's own settings beside it), and loaded by the same loader (`distrun.loading.parallel_step`),
so a parallel step built in Python is checked and run exactly as one written in YAML.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from distrun.core.user_paths import current_folder
from distrun.sdk.inputs_outputs import Input, Output
from distrun.sdk.notices import caller_position
from distrun.sdk.pipeline_nodes import NodeOutput, NodeOutputs, absolute, building
from distrun.sdk.plain import AttrDict, to_data
from distrun.spec.parallel_settings import PARALLEL_KEYS

# parallel_run_function's settings that are a parallel job's own (the YAML keys of the same names).
SETTINGS = (*(key for key in PARALLEL_KEYS if key != "task"), "environment_variables")


class RunFunction:
    """The task of a parallel job: each process imports `entry_script` from `code`, runs its
    `init()` once and `run(mini_batch)` for each mini-batch it takes."""

    def __init__(
        self,
        *,
        code: Any = None,
        entry_script: str | None = None,
        program_arguments: str | None = None,
        environment: Any = None,
        append_row_to: str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise TypeError(f"RunFunction() takes no {', '.join(sorted(unknown))}")
        self.code = code
        self.entry_script = entry_script
        self.program_arguments = program_arguments
        self.environment = environment
        self.append_row_to = append_row_to
        self._base_dir = current_folder()

    def _to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "run_function"}
        if self.code is not None:
            data["code"] = absolute(self.code, self._base_dir)
        environment = to_data(self.environment)
        if isinstance(environment, dict) and isinstance(environment.get("conda_file"), str):
            environment = {**environment, "conda_file": absolute(environment["conda_file"], self._base_dir)}
        for key, value in (
            ("entry_script", self.entry_script),
            ("program_arguments", self.program_arguments),
            ("environment", environment),
            ("append_row_to", self.append_row_to),
        ):
            if value is not None:
                data[key] = value
        return data


class Resources(AttrDict):
    """`node.resources.instance_count = 2`, as azure-ai-ml's ResourceConfiguration."""

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


class ParallelFunction:
    """What `parallel_run_function` returns: call it (inside an `@pipeline` function) to make a step."""

    def __init__(self, fields: dict[str, Any]) -> None:
        task = fields.pop("task", None)
        if not isinstance(task, RunFunction):
            raise TypeError("parallel_run_function() needs task=RunFunction(code=..., entry_script=...)")
        self.task = task
        self.name = fields.pop("name", None)
        self.display_name = fields.pop("display_name", None)
        self.description = fields.pop("description", None)
        self.tags = dict(fields.pop("tags", None) or {})
        self.inputs = AttrDict(fields.pop("inputs", None) or {})
        self.outputs = AttrDict(fields.pop("outputs", None) or {})
        self.instance_count = fields.pop("instance_count", None)
        self.compute = fields.pop("compute", None)
        self.settings = {key: fields.pop(key) for key in SETTINGS if key in fields}
        if fields:
            raise TypeError(f"parallel_run_function() takes no {', '.join(sorted(fields))}")

    def __call__(self, *args: Any, **inputs: Any) -> ParallelNode:
        if args:
            raise TypeError(f"{self.name or 'a parallel function'}() takes its inputs by name")
        return ParallelNode(self, inputs)

    def _component_data(self) -> dict[str, Any]:
        """The inline parallel component a step names."""
        declared = {name: _declaration(value) for name, value in self.inputs.items()}
        data: dict[str, Any] = {"type": "parallel"}
        if self.name:
            data["name"] = self.name
        data.update(
            inputs=declared,
            outputs={name: _declaration(value) for name, value in self.outputs.items()},
            task=self.task._to_data(),
            **{key: to_data(value) for key, value in self.settings.items()},
        )
        return data


def _declaration(value: Any) -> dict[str, Any]:
    """An input or output of the function as a component declares it."""
    if isinstance(value, (Input, Output)):
        data = to_data(value)
        data.pop("path", None)  # a step gives the value
        return data if isinstance(data, dict) else {"type": "uri_folder"}
    if isinstance(value, dict):
        return dict(value)
    return {"type": "string", "default": value}


class ParallelNode:
    """A step running a parallel function: its inputs, outputs and settings, changeable before the
    pipeline is submitted (`node.resources.instance_count = 2`, `node.max_concurrency_per_instance = 2`)."""

    type = "parallel"

    def __init__(self, function: ParallelFunction, inputs: dict[str, Any]) -> None:
        unknown = sorted(set(inputs) - set(function.inputs))
        if unknown:
            raise TypeError(f"{function.name or 'the parallel function'} has no input {', '.join(unknown)}")
        self.function = function
        # A step's output given here is copied: `node.inputs.x.mode = ...` (Microsoft's notebook
        # 1g sets eval_mount and direct) changes this step's input, not the other step's output.
        self.inputs = AttrDict({k: copy.copy(v) if isinstance(v, NodeOutput) else v for k, v in inputs.items()})
        declared = {name: _declaration(value) for name, value in function.outputs.items()}
        self.outputs = NodeOutputs(self, declared)
        self.name: str | None = None
        self.compute = function.compute
        self.display_name = function.display_name
        self.resources = Resources({"instance_count": function.instance_count} if function.instance_count else {})
        for key in SETTINGS:
            setattr(self, key, None)
        self._base_dir: Path = current_folder()
        self._source_where = caller_position()
        pipeline = building()
        if pipeline is not None:
            pipeline.add(self)

    def _name_hint(self) -> str:
        return str(self.function.name or "parallel")

    def _step_keys(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": "parallel", "component": self.function._component_data()}
        for key in ("compute", "display_name"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.resources:
            data["resources"] = dict(self.resources)
        for key in SETTINGS:
            if getattr(self, key) is not None:
                data[key] = to_data(getattr(self, key))
        return data

    def __repr__(self) -> str:
        return f"ParallelNode({self.name or self._name_hint()}, inputs={dict(self.inputs)!r})"


def parallel_run_function(**fields: Any) -> ParallelFunction:
    """azure-ai-ml's `parallel_run_function(name=, inputs=, outputs=, input_data=, mini_batch_size=,
    instance_count=, max_concurrency_per_instance=, ..., task=RunFunction(...))`."""
    return ParallelFunction(dict(fields))
