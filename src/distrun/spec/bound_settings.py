"""A step's settings bound to the pipeline's inputs: `compute: ${{parent.inputs.train_node}}`.

Azure ML lets a step take any setting (`compute`, `resources.instance_count`, an environment
variable, ...) from an input of the pipeline around it, as Microsoft's train/eval pipeline
component does with its compute. Here such a setting becomes that input's value before the step
is built, so the step is checked and run with the value itself, and `--set inputs.X=...`
changes it like any input. Only `${{parent.inputs.X}}` is a setting's binding: another step's
output is known only when that step has run, after the step's compute had to be chosen.

Pure text work on the step's raw mapping; `inputs` and `outputs` are bound by the step builder
(`distrun.spec.pipeline_steps`), and the command's `${{inputs.X}}` are its job's.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

from distrun.spec.pipeline_bindings import NotABinding, binding_of
from distrun.spec.source_map import KeyPath

# Keys of a step that are not settings: bound elsewhere, or text holding the job's own `${{...}}`.
NOT_SETTINGS = ("inputs", "outputs", "command", "component", "trial", "type", "search_space")

# A problem found: (message, where under the step, hint).
Found = tuple[str, KeyPath, str]


def bound_settings(
    raw: dict[str, Any], pipeline_inputs: Any, refused: Collection[str], from_steps: Collection[str]
) -> tuple[dict[str, Any], list[Found]]:
    """`raw` with every setting written as `${{parent.inputs.X}}` replaced by the value of the
    pipeline input X (`pipeline_inputs`: the pipeline's `inputs`, or what the step naming a pipeline
    component gave it). `refused`: inputs whose value was refused where given (the setting is then
    left out, said once there); `from_steps`: inputs that are other steps' outputs (not a setting)."""
    inputs = pipeline_inputs if isinstance(pipeline_inputs, dict) else {}
    found: list[Found] = []

    def bound(value: Any, at: KeyPath) -> Any:
        if isinstance(value, dict):
            return {key: bound(item, (*at, key)) for key, item in value.items()}
        if isinstance(value, list):
            return [bound(item, (*at, index)) for index, item in enumerate(value)]
        try:
            binding = binding_of(value)
        except NotABinding as exc:
            found.append((str(exc), at, "write the whole value as ${{parent.inputs.NAME}}"))
            return value
        if binding is None:
            return value
        if binding.kind != "input":
            found.append(
                (
                    f"{binding.text()} cannot be a setting: a step's settings are known before any step runs",
                    at,
                    "bind the setting to an input of the pipeline: ${{parent.inputs.NAME}}",
                )
            )
            return value
        if binding.name in refused:
            return None
        if binding.name in from_steps or binding.name not in inputs:
            known = ", ".join(name for name in inputs if name not in from_steps) or "none"
            what = "is another step's output" if binding.name in from_steps else "is not an input of the pipeline"
            found.append(
                (
                    f"{binding.text()}: {binding.name!r} {what}",
                    at,
                    f"bind the setting to one of the pipeline's value inputs: {known}",
                )
            )
            return value
        return _input_value(inputs[binding.name])

    resolved = {
        key: value if key in NOT_SETTINGS else bound(copy.deepcopy(value), (key,)) for key, value in raw.items()
    }
    return {key: value for key, value in resolved.items() if value is not None or raw[key] is None}, found


def _input_value(given: Any) -> Any:
    """A pipeline input's value: itself, or a declared input's `value`/`default` (`{type: string, default: x}`)."""
    if isinstance(given, dict) and "path" not in given and ("value" in given or "default" in given):
        return copy.deepcopy(given.get("value", given.get("default")))
    return copy.deepcopy(given)
