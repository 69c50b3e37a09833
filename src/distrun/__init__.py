"""distrun: run distributed training jobs written as Azure ML command-job YAML."""

from __future__ import annotations

from typing import Any

from distrun.errors import DistrunError, JobFailedError, ValidationError

__version__ = "0.1.0"

# The SDK (azure.ai.ml's names) loads on first use: the CLI imports this package and must
# start without pydantic, the loader or the SDK.
_SDK_EXPORTS = {
    "command": "distrun.sdk.command_job",
    "load_job": "distrun.sdk.command_job",
    "Input": "distrun.sdk.inputs_outputs",
    "Output": "distrun.sdk.inputs_outputs",
    "MLClient": "distrun.sdk.client",
}

__all__ = ["DistrunError", "JobFailedError", "ValidationError", "__version__", *_SDK_EXPORTS]


def __getattr__(name: str) -> Any:
    module_name = _SDK_EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'distrun' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SDK_EXPORTS))
