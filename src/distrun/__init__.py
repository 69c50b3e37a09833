"""distrun: run distributed training jobs written as Azure ML command-job YAML."""

from __future__ import annotations

from distrun._version import __version__

# Nothing but the version (above) is imported here at run time: every `python -m distrun.<module>`
# imports this package first, a cluster node's ports step included (distrun.backends.ports), and
# pays for what it holds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from distrun.core.errors import DistrunError as DistrunError
    from distrun.core.errors import JobFailedError as JobFailedError
    from distrun.core.errors import NotSupportedYetError as NotSupportedYetError
    from distrun.core.errors import ResourceNotFoundError as ResourceNotFoundError
    from distrun.core.errors import ValidationError as ValidationError


_ERRORS = ("DistrunError", "JobFailedError", "ValidationError", "ResourceNotFoundError", "NotSupportedYetError")

# The SDK (azure.ai.ml's names) loads on first use: the CLI imports this package and must
# start without pydantic, the loader or the SDK. These are the names `azure.ai.ml` exports at its
# root that concern command jobs, so `from azure.ai.ml import X` becomes `from distrun import X`.
_SDK_EXPORTS = {
    "command": "distrun.sdk.command_job",
    "spark": "distrun.sdk.spark_job",
    "load_job": "distrun.sdk.command_job",
    "load_component": "distrun.sdk.components",
    "Input": "distrun.sdk.inputs_outputs",
    "Output": "distrun.sdk.inputs_outputs",
    "MLClient": "distrun.sdk.client",
    "PyTorchDistribution": "distrun.sdk.distributions",
    "TensorFlowDistribution": "distrun.sdk.distributions",
    "MpiDistribution": "distrun.sdk.distributions",
    "RayDistribution": "distrun.sdk.distributions",
    "UserIdentityConfiguration": "distrun.sdk.identities",
    "ManagedIdentityConfiguration": "distrun.sdk.identities",
    "AmlTokenConfiguration": "distrun.sdk.identities",
}

# Modules of `azure.ai.ml` that distrun mirrors (`from azure.ai.ml import dsl` -> `from distrun import
# dsl`, `from azure.ai.ml.sweep import Choice` -> `from distrun.sweep import Choice`).
_SUBMODULES = ("dsl", "sweep", "parallel", "automl")

__all__ = [*_ERRORS, "__version__", *_SDK_EXPORTS]


def __getattr__(name: str) -> Any:
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"distrun.{name}")
    module_name = "distrun.core.errors" if name in _ERRORS else _SDK_EXPORTS.get(name)
    if module_name is None:
        from distrun.sdk import not_provided  # azure.ai.ml's root names distrun lacks say what to do

        if name in not_provided.ROOT:
            raise not_provided.import_error(not_provided.ROOT, name)
        raise AttributeError(f"module 'distrun' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ERRORS) | set(_SDK_EXPORTS) | set(_SUBMODULES))
