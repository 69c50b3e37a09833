"""`from azure.ai.ml import X` becomes `from distrun import X` for every root name of a command
job; the names of what distrun does not run (Spark, endpoints) say so when imported. `dsl` and
`sweep` import (tests/unit/test_sdk_notebook_calls.py)."""

from __future__ import annotations

import importlib

import pytest

import distrun

# azure.ai.ml's root exports that concern command jobs.
COMMAND_JOB_NAMES = (
    "MLClient",
    "command",
    "load_job",
    "load_component",
    "Input",
    "Output",
    "MpiDistribution",
    "PyTorchDistribution",
    "TensorFlowDistribution",
    "RayDistribution",
    "ManagedIdentityConfiguration",
    "AmlTokenConfiguration",
    "UserIdentityConfiguration",
)


@pytest.mark.parametrize("name", COMMAND_JOB_NAMES)
def test_command_job_names_import_from_the_root(name):
    value = getattr(importlib.import_module("distrun"), name)
    assert value is not None and name in distrun.__all__
    entities = importlib.import_module("distrun.entities")
    if hasattr(entities, name):
        assert getattr(entities, name) is value  # one class, whichever module it is imported from


def test_tensorflow_notebook_imports_work():
    from distrun import TensorFlowDistribution, command

    job = command(
        command="python train.py",
        distribution=TensorFlowDistribution(worker_count=2),
        instance_count=2,
    )
    assert job.distribution.worker_count == 2


def test_an_identity_is_kept_with_the_job():
    from distrun import ManagedIdentityConfiguration, UserIdentityConfiguration, command

    job = command(command="echo hi", identity=UserIdentityConfiguration())
    assert job._to_data()["identity"] == {"type": "user_identity"}
    managed = command(command="echo hi", identity=ManagedIdentityConfiguration(client_id="abc"))
    assert managed._to_data()["identity"] == {"type": "managed", "client_id": "abc"}


@pytest.mark.parametrize(
    ("statement", "what"),
    [
        ("from distrun import load_online_endpoint", "online endpoints"),
        ("from distrun import load_batch_endpoint", "batch endpoints"),
    ],
)
def test_names_distrun_cannot_honour_raise_an_import_error_that_says_so(statement, what):
    with pytest.raises(
        ImportError, match=f"distrun does not provide .*: it runs command and pipeline jobs .* not {what}"
    ):
        exec(statement, {})


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        distrun.NoSuchThing  # noqa: B018
