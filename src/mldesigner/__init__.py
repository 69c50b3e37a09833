"""distrun's `mldesigner`: `from mldesigner import command_component, Input, Output` as in
Microsoft's mldesigner, so a file of `@command_component` functions written for Azure ML runs
unchanged with distrun (see docs/sdk.md, "Components from Python functions").

Only what a component file uses is here; the implementation is `distrun.sdk.designer`. Do not
install Microsoft's mldesigner into the same environment: both are the package `mldesigner`.
"""

from __future__ import annotations

from distrun.sdk.designer import command_component
from distrun.sdk.inputs_outputs import Input, Output

__all__ = ["Input", "Output", "command_component"]
