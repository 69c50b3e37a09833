"""`${{parent.inputs.X}}`, `${{parent.outputs.X}}` and `${{parent.jobs.STEP.outputs.Y}}`: how a
pipeline's steps name the pipeline's inputs and outputs and each other's outputs.

Pure text work: which binding a value is, if any. What a binding refers to is checked by the
pipeline's steps (`distrun.spec.pipeline_steps`), which know the pipeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WHOLE = re.compile(r"^\s*\$\{\{\s*([^}]*?)\s*\}\}\s*$")
_ANY = re.compile(r"\$\{\{\s*parent\.[^}]*\}\}")
_PARENT_IO = re.compile(r"^parent\.(inputs|outputs)\.([A-Za-z_][A-Za-z0-9_]*)$")
_STEP_OUTPUT = re.compile(r"^parent\.jobs\.([A-Za-z_][A-Za-z0-9_]*)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)$")

BINDING_FORMS = "${{parent.inputs.NAME}}, ${{parent.outputs.NAME}} or ${{parent.jobs.STEP.outputs.NAME}}"


@dataclass(frozen=True)
class Binding:
    """One binding: `kind` is "input" (a pipeline input), "output" (a pipeline output) or
    "step_output" (another step's output, named by `step`)."""

    kind: str
    name: str
    step: str | None = None

    def text(self) -> str:
        if self.kind == "step_output":
            return f"${{{{parent.jobs.{self.step}.outputs.{self.name}}}}}"
        return f"${{{{parent.{self.kind}s.{self.name}}}}}"


class NotABinding(ValueError):
    """A `${{parent...}}` expression distrun does not understand, or one inside other text."""


def binding_of(value: object) -> Binding | None:
    """The binding a value is, None for a value that holds no `${{parent...}}`; raises
    `NotABinding` for an expression of another form or one written inside other text."""
    if not isinstance(value, str) or "${{" not in value:
        return None
    whole = _WHOLE.match(value)
    if whole is None:
        if _ANY.search(value):
            raise NotABinding(f"{value!r} holds a binding inside other text; a binding must be the whole value")
        return None
    expression = whole.group(1)
    parent = _PARENT_IO.match(expression)
    if parent:
        return Binding(parent.group(1)[:-1], parent.group(2))
    step = _STEP_OUTPUT.match(expression)
    if step:
        return Binding("step_output", step.group(2), step.group(1))
    if expression.startswith("parent."):
        raise NotABinding(f"${{{{{expression}}}}} is not a binding distrun knows")
    return None
