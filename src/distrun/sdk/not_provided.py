"""The names of azure-ai-ml (and azureml-core) that distrun does not provide yet, each with what it
is and what to do instead, and the one message each of them fails with:

    distrun does not provide NAME (AZURE'S NAME): it runs command and pipeline jobs (...), not WHAT; WHAT TO DO

An import raises ImportError with it, `MLClient.NAME` AttributeError: never "cannot import name",
a bare ModuleNotFoundError, or Python's guess at a similar attribute. docs/sdk.md lists them, and a
test reads that list against these tables.
"""

from __future__ import annotations

from typing import Any

# What each is, and what to do instead.
ELSEWHERE = "manage it with Microsoft's azure-ai-ml against an Azure ML workspace; distrun runs the jobs"
PARALLEL_COMPONENT = (
    "parallel component objects",
    "make one with distrun.parallel.parallel_run_function, or write a `type: parallel` component file",
)
MODELS = (
    "model YAML files loaded in Python",
    "build distrun.entities.Model(...) for ml_client.models.create_or_update, or `distrun model create -f FILE`",
)
DATASTORES = ("datastores", "give a job's data as a local path or a URL")
V1_COMPUTE = ("v1 compute objects", "pass the target's name as compute_target")

# `from distrun import NAME` (azure.ai.ml's root names).
ROOT: dict[str, tuple[str, str]] = {
    "load_batch_deployment": ("batch deployments", ELSEWHERE),
    "load_batch_endpoint": ("batch endpoints", ELSEWHERE),
    "load_online_deployment": ("online deployments", ELSEWHERE),
    "load_online_endpoint": ("online endpoints", ELSEWHERE),
    "load_compute": ("Azure ML compute definitions", "define a target with `distrun compute create`"),
    "load_data": ("data assets", "build one with distrun.entities.Data(...) and ml_client.data.create_or_update"),
    "load_datastore": DATASTORES,
    "load_environment": (
        "environment assets",
        "build one with distrun.entities.Environment(...) and ml_client.environments.create_or_update",
    ),
    "load_model": MODELS,
    "load_model_package": ("model packages", ELSEWHERE),
    "load_registry": ("registries", ELSEWHERE),
    "load_workspace": ("workspaces", "use MLClient() as it is: its workspace is DISTRUN_HOME"),
    "load_workspace_connection": ("workspace connections", ELSEWHERE),
}

# `from distrun.entities import NAME` (azure.ai.ml.entities).
ENTITIES: dict[str, tuple[str, str]] = {
    "JobService": (
        "a job's services (SSH, Jupyter, TensorBoard on Azure ML's nodes)",
        "leave `services` out: the ranks run on your own machines, reach them there",
    ),
    "ManagedOnlineEndpoint": ("online endpoints", ELSEWHERE),
    "ManagedOnlineDeployment": ("online deployments", ELSEWHERE),
    "BatchEndpoint": ("batch endpoints", ELSEWHERE),
    "BatchDeployment": ("batch deployments", ELSEWHERE),
    "Datastore": DATASTORES,
    "ParallelComponent": PARALLEL_COMPONENT,
}

# `ml_client.NAME` (MLClient's operations).
CLIENT: dict[str, tuple[str, str]] = {
    "datastores": DATASTORES,
    "online_endpoints": ("online endpoints", ELSEWHERE),
    "online_deployments": ("online deployments", ELSEWHERE),
    "batch_endpoints": ("batch endpoints", ELSEWHERE),
    "batch_deployments": ("batch deployments", ELSEWHERE),
    "registries": ("registries", ELSEWHERE),
}

# `from distrun.v1 import NAME` (azureml.core).
V1: dict[str, tuple[str, str]] = {
    "ComputeTarget": V1_COMPUTE,
    "AmlCompute": V1_COMPUTE,
    "Dataset": ("datasets as v1 arguments", "pass a path, or an Input, as the argument"),
    "Model": (
        "v1 model registration (Model.register)",
        "register with distrun.entities.Model and ml_client.models.create_or_update, or `distrun model create`",
    ),
}


def message(name: str, what: str, todo: str, where: str = "") -> str:
    return (
        f"distrun does not provide {name}{f' ({where})' if where else ''}: it runs command and pipeline jobs "
        f"(command(...), load_job, load_component, @dsl.pipeline, MLClient.jobs), not {what}; {todo}"
    )


def import_error(table: dict[str, tuple[str, str]], name: str, azure_module: str = "") -> ImportError:
    """The ImportError of `from ... import name`, a name of `table`; `azure_module` names where
    azure-ai-ml (or azureml-core) has it, when that is not the module's root."""
    what, todo = table[name]
    return ImportError(message(name, what, todo, f"{azure_module}.{name}" if azure_module else ""), name=name)


def module_getattr(module: str, table: dict[str, tuple[str, str]], azure_module: str) -> Any:
    """A module's `__getattr__`: a name of `table` says what to do; any other is not there."""

    def lookup(name: str) -> Any:
        if name in table:
            raise import_error(table, name, azure_module)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return lookup
