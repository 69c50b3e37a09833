"""Azure ML SDK v1 for distrun: what `azureml.core` and `azureml.core.runconfig` offered for jobs.

from distrun.v1 import ScriptRunConfig, PyTorchConfiguration, Experiment, Workspace, Environment
"""

from __future__ import annotations

from distrun.sdk import not_provided
from distrun.sdk.v1 import (
    CondaDependencies,
    Environment,
    Experiment,
    MpiConfiguration,
    PyTorchConfiguration,
    Run,
    RunConfiguration,
    ScriptRunConfig,
    TensorFlowConfiguration,
    TensorflowConfiguration,
    Workspace,
)

__all__ = [
    "CondaDependencies",
    "Environment",
    "Experiment",
    "MpiConfiguration",
    "PyTorchConfiguration",
    "Run",
    "RunConfiguration",
    "ScriptRunConfig",
    "TensorFlowConfiguration",
    "TensorflowConfiguration",
    "Workspace",
]

# azureml.core's names distrun does not provide (yet) say what to do instead.
__getattr__ = not_provided.module_getattr(__name__, not_provided.V1, "azureml.core")
