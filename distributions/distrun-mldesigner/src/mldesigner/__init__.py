"""distrun's `mldesigner`: `from mldesigner import command_component, Input, Output` as in
Microsoft's mldesigner, so a file of `@command_component` functions written for Azure ML runs
unchanged with distrun (see docs/sdk.md, "Components from Python functions").

The distribution `distrun-mldesigner`, apart from distrun's own: it is the package `mldesigner`,
as Microsoft's is, so it goes only into a Python without Microsoft's. Only what a component file
uses is here; the implementation is `distrun.sdk.designer`. A name only Microsoft's package has
says so when imported, and a Python that holds both distributions is told once.
"""

from __future__ import annotations

import warnings
from importlib import metadata
from typing import Any

from distrun.sdk.designer import command_component
from distrun.sdk.inputs_outputs import Input, Output

__all__ = ["Input", "Output", "command_component"]

# What Microsoft's mldesigner exports besides the three above (its `__all__`), and its subpackage
# `dsl`: a file that uses one is written for Microsoft's package and needs it.
MICROSOFT_ONLY = (
    "Meta",
    "reference_component",
    "generate",
    "execute",
    "compile",
    "IOContext",
    "OutputContext",
    "get_io_context",
    "get_root_pipeline_context",
    "PipelineContext",
    "PipelineStage",
    "dsl",
)

BOTH_INSTALLED = (
    "Microsoft's mldesigner and distrun-mldesigner are both installed in this Python ({where}): both are "
    "the package `mldesigner`, so the one installed last replaced the other's files. Keep one: `pip "
    "uninstall mldesigner distrun-mldesigner`, then install distrun-mldesigner here to run component "
    "files with distrun, and Microsoft's mldesigner in a Python of its own for Azure ML"
)


def __getattr__(name: str) -> Any:
    if name in MICROSOFT_ONLY:
        raise ImportError(
            f"mldesigner.{name} is Microsoft's mldesigner's, which this Python does not have: its `mldesigner` "
            "is distrun's (distrun-mldesigner), which provides command_component, Input and Output. "
            "Run a file that needs Microsoft's mldesigner in a Python with Microsoft's package instead of distrun's",
            name=name,
        )
    raise AttributeError(f"module 'mldesigner' (distrun's) has no attribute {name!r}")


def _microsoft_installed() -> str | None:
    """Where Microsoft's mldesigner is recorded as installed, if it is."""
    try:
        found = metadata.distribution("mldesigner")
    except metadata.PackageNotFoundError:
        return None
    return str(found.locate_file(""))


if (_where := _microsoft_installed()) is not None:
    warnings.warn(BOTH_INSTALLED.format(where=_where), stacklevel=2)
