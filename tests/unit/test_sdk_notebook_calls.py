"""The calls Azure ML's notebooks make besides jobs: the workspace, the cluster cell (AmlCompute),
environment versions, and the imports of pipelines and sweeps (built and run: test_sdk_pipelines.py,
test_sdk_sweeps.py).

Nothing here starts a job; tests/surfaces/test_sdk_jobs.py runs one on a target made this way.
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest

import distrun
from distrun import MLClient, NotSupportedYetError, ResourceNotFoundError, command
from distrun.core.errors import DistrunError
from distrun.entities import AmlCompute, Compute, Environment, Workspace
from distrun.prepare.compute import read_targets, resolve_target
from distrun.sdk.notices import IgnoredArgumentWarning
from support.sdk import sdk_env

__all__ = ["sdk_env"]  # the fixture, imported for pytest


@pytest.fixture
def client(sdk_env: Path) -> MLClient:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IgnoredArgumentWarning)
        return MLClient(object(), "sub-id", "my-rg", "my-ws")


def test_workspaces_get_gives_the_named_workspace(client: MLClient, sdk_env: Path) -> None:
    workspace = client.workspaces.get(client.workspace_name)
    assert isinstance(workspace, Workspace)
    assert (workspace.name, workspace.location, workspace.resource_group) == ("my-ws", "local", "my-rg")
    assert workspace.id.endswith("/resourceGroups/my-rg/providers/Microsoft.MachineLearningServices/workspaces/my-ws")
    home = Path(client.layout.home)
    assert workspace.mlflow_tracking_uri == f"sqlite:///{home / 'mlflow.db'}"  # where every job's ranks log
    assert client.workspaces.get("other").name == "other"
    assert MLClient().workspaces.get().name == "local"
    assert [w.name for w in client.workspaces.list()] == ["my-ws"]


def test_the_cluster_cell_creates_a_local_target_once_and_says_so(
    client: MLClient, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "cpu-cluster"
    with pytest.raises(ResourceNotFoundError, match=r"compute 'cpu-cluster' not found .*targets are: local") as caught:
        client.compute.get(name)
    assert isinstance(caught.value, LookupError) and "AmlCompute(name=...)" in caught.value.hint

    cluster = AmlCompute(
        name=name,
        type="amlcompute",
        size="STANDARD_DS3_V2",
        min_instances=0,
        max_instances=4,
        idle_time_before_scale_down=180,
        tier="Dedicated",
    )
    made = client.compute.begin_create_or_update(cluster).result()
    assert made is cluster and (made.name, made.size, made.max_instances) == (name, "STANDARD_DS3_V2", 4)
    said = capsys.readouterr().err
    assert f"distrun: compute {name} (AmlCompute size=STANDARD_DS3_V2, min_instances=0, max_instances=4)" in said
    assert "is a local target: its jobs run on this machine" in said and str(client.layout.config_path) in said
    config = client.layout.config_path
    assert resolve_target(f"azureml:{name}", config).type == "local"  # what a job's `compute:` then finds

    got = client.compute.get(name)
    assert isinstance(got, AmlCompute) and (got.name, got.type, got.provisioning_state) == (
        name,
        "amlcompute",
        "Succeeded",
    )
    client.begin_create_or_update(AmlCompute(name=name, size="other")).result()  # MLClient's own verb: names it
    assert "compute cpu-cluster is a local target" in capsys.readouterr().err
    assert list(read_targets(config)) == [name]
    assert [c.name for c in client.compute.list()] == ["local", name]


def test_an_amlcompute_names_an_existing_target_of_any_type_unchanged(
    client: MLClient, capsys: pytest.CaptureFixture[str]
) -> None:
    config = client.layout.config_path
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("compute:\n  gpu-cluster: {type: slurm, partition: gpu}\n")
    client.compute.begin_create_or_update(AmlCompute(name="gpu-cluster", max_instances=8)).result()
    assert f"compute gpu-cluster is the slurm target in {config}; used as it is" in capsys.readouterr().err
    assert read_targets(config)["gpu-cluster"].settings == {"partition": "gpu"}
    found = client.compute.get("gpu-cluster")
    assert type(found) is Compute and found.type == "slurm"
    assert client.compute.get("local").name == "local"


def test_compute_names_and_kinds_distrun_cannot_make_are_refused_clearly(client: MLClient) -> None:
    with pytest.raises(DistrunError, match="compute name 'a b' is not allowed"):
        client.compute.begin_create_or_update(AmlCompute(name="a b"))
    with pytest.raises(NotSupportedYetError, match="does not create Compute compute yet"):
        client.compute.begin_create_or_update(Compute(name="ci", type="computeinstance"))
    with pytest.raises(NotSupportedYetError, match="does not create object objects yet"):
        client.create_or_update(object())


def test_environment_versions_count_up_as_azure_ml_does(client: MLClient, sdk_env: Path) -> None:
    (sdk_env / "conda.yml").write_text("dependencies:\n  - pip:\n      - six\n")
    (sdk_env / "conda2.yml").write_text("dependencies:\n  - pip:\n      - attrs\n")
    env = Environment(name="sklearn-env", conda_file="conda.yml", image="mcr.microsoft.com/azureml/base:latest")
    first = client.environments.create_or_update(env)
    assert (first.version, env.version) == ("1", "1")  # set on the object passed too, as azure-ai-ml does
    assert f"{first.name}:{first.version}" == "sklearn-env:1"
    assert first.conda_file == str(sdk_env / "conda.yml")
    changed = client.environments.create_or_update(Environment(name="sklearn-env", conda_file="conda2.yml"))
    assert changed.version == "2"
    # azure-ai-ml asks the service for the next version whatever the definition: unchanged -> "3".
    again = client.environments.create_or_update(Environment(name="sklearn-env", conda_file="conda2.yml"))
    assert again.version == "3"
    assert client.environments.get("sklearn-env").version == "3"
    assert client.environments.get("sklearn-env", version="1").conda_file == str(sdk_env / "conda.yml")
    pinned = client.environments.create_or_update(Environment(name="other", version="7", conda_file="conda.yml"))
    assert pinned.version == "7"
    assert client.environments.create_or_update(Environment(name="other", conda_file="conda.yml")).version == "8"


def test_pipeline_and_sweep_modules_import_with_azure_ml_names() -> None:
    from distrun import dsl
    from distrun.sweep import (
        BanditPolicy,
        BayesianSamplingAlgorithm,
        Choice,
        LogUniform,
        Objective,
        QUniform,
        Randint,
        SweepJobLimits,
        Uniform,
    )

    assert distrun.dsl is dsl and "sweep" in dir(distrun)
    space = Choice(values=[0.01, 0.1])
    assert (space.type, space.values) == ("choice", [0.01, 0.1]) and space == Choice([0.01, 0.1])
    assert (Uniform(0.1, 0.9).type, Uniform(0.1, 0.9).max_value) == ("uniform", 0.9)
    assert LogUniform(min_value=-6, max_value=-1).type == "loguniform" and QUniform(1, 9, 2).q == 2
    assert Randint(upper=5).upper == 5 and BayesianSamplingAlgorithm().type == "bayesian"
    assert BanditPolicy(slack_factor=0.1, evaluation_interval=2).slack_factor == 0.1
    assert Objective(goal="maximize", primary_metric="accuracy").goal == "maximize"
    assert SweepJobLimits(max_total_trials=4).max_total_trials == 4

    assert dsl.pipeline is importlib.import_module("distrun.dsl").pipeline  # runs: tests/unit/test_sdk_pipelines.py
    job = command(command="python train.py --lr ${{inputs.lr}}", inputs={"lr": 0.1})
    trial = job(lr=space)
    assert trial.inputs["lr"] is space and job.inputs["lr"] == 0.1  # a copy, as azure-ai-ml's job(...)
    # sweeps: tests/unit/test_sdk_sweeps.py
