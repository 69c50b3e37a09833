"""The SDK builds the same job as YAML, through the same loader: shapes, defaults, errors, notices.

Nothing here starts a job; tests/surfaces/test_sdk_jobs.py runs real ones.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import distrun
from distrun import Input, MLClient, Output, command, load_job
from distrun.core.errors import DistrunError
from distrun.entities import (
    CommandJob,
    Environment,
    MpiDistribution,
    PyTorchDistribution,
    ResourceConfiguration,
    TensorFlowDistribution,
)
from distrun.sdk.notices import IgnoredArgumentWarning
from distrun.v1 import (
    Environment as V1Environment,
)
from distrun.v1 import (
    Experiment,
    MpiConfiguration,
    PyTorchConfiguration,
    ScriptRunConfig,
    TensorflowConfiguration,
    Workspace,
)
from support.sdk import sdk_env, write

__all__ = ["sdk_env"]  # the fixture, imported for pytest

V2_COMMAND = "python train.py --epochs ${{inputs.epochs}} --data ${{inputs.data}} --model-dir ${{outputs.model}}"

V2_YAML = """
    command: python train.py --epochs ${{inputs.epochs}} --data ${{inputs.data}} --model-dir ${{outputs.model}}
    code: ./src
    inputs:
      epochs: 1
      data:
        type: uri_folder
        path: ./data
    outputs:
      model:
        type: uri_folder
    environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
    resources:
      instance_count: 2
    distribution:
      type: pytorch
      process_count_per_instance: 2
"""


def spec_of(job) -> dict:  # type: ignore[no-untyped-def]
    """The validated job, as the loader gives it to submission."""
    loaded = job._job_source().load()
    return loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True)


def v2_job(**changes):  # type: ignore[no-untyped-def]
    args = {
        "code": "./src",
        "command": V2_COMMAND,
        "inputs": {"epochs": 1, "data": Input(type="uri_folder", path="./data")},
        "outputs": {"model": Output(type="uri_folder")},
        "environment": "azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest",
        "instance_count": 2,
        "distribution": {"type": "PyTorch", "process_count_per_instance": 2},
    }
    args.update(changes)
    return command(**args)


def problems(exc: distrun.ValidationError) -> list[tuple[str, str, str]]:
    return [(p.key_path, p.message, p.hint) for p in exc.problems]


# ---------------------------------------------------------------- the package


# ---------------------------------------------------------------- one job model


def test_sdk_and_yaml_give_the_same_job(sdk_env):
    yml = write(sdk_env / "job.yml", V2_YAML)
    from_yaml = spec_of(load_job(yml))
    from_sdk = spec_of(v2_job())
    typed = spec_of(v2_job(distribution=PyTorchDistribution(process_count_per_instance=2)))
    assert from_sdk == from_yaml == typed
    assert from_sdk["distribution"] == {"type": "pytorch", "process_count_per_instance": 2}
    assert from_sdk["resources"]["instance_count"] == 2


def test_loaded_yaml_job_is_an_sdk_job_that_can_be_changed(sdk_env):
    job = load_job(write(sdk_env / "job.yml", V2_YAML), params_override=[{"inputs.epochs": 3}])
    assert isinstance(job, CommandJob)
    assert job.inputs.epochs == 3 and job.inputs["data"].path == "./data"
    assert job.distribution == PyTorchDistribution(process_count_per_instance=2)
    job.resources.instance_count = 3
    job.inputs["epochs"] = 5
    spec = spec_of(job)
    assert spec["resources"]["instance_count"] == 3 and spec["inputs"]["epochs"] == 5


def test_loaded_yaml_job_errors_point_into_the_file(sdk_env):
    yml = write(sdk_env / "job.yml", "command: echo hi\nresources:\n  instance_count: 2\n")
    job = load_job(yml)
    job.resources.instance_count = 0
    with pytest.raises(distrun.ValidationError) as caught:
        MLClient().jobs.create_or_update(job)
    assert f"{yml}:3:3: resources.instance_count: must be at least 1, got 0" in str(caught.value)
    write(yml, "command: echo hi\nresources:\n  instance_cont: 2\n")
    with pytest.raises(distrun.ValidationError, match=r"job.yml:3:3: resources.instance_cont: unknown key"):
        load_job(yml)


def test_typed_distributions_map_to_the_model(sdk_env):
    tf = spec_of(command(command="python t.py", instance_count=2, distribution=TensorFlowDistribution(worker_count=2)))
    assert tf["distribution"] == {
        "type": "tensorflow",
        "worker_count": 2,
        "parameter_server_count": 0,
        "chief_count": 0,
    }
    mpi = spec_of(command(command="python t.py", distribution=MpiDistribution(process_count_per_instance=3)))
    assert mpi["distribution"]["process_count_per_instance"] == 3 and mpi["distribution"]["type"] == "mpi"
    job = command(command="python t.py", distribution={"type": "MPI"})
    assert isinstance(job.distribution, MpiDistribution)
    job.resources = ResourceConfiguration(instance_count=3, instance_type="STANDARD_NC6")
    spec = spec_of(job)
    assert spec["resources"]["instance_count"] == 3 and spec["resources"]["instance_type"] == "STANDARD_NC6"


def test_dict_distribution_tolerates_extra_keys_and_says_so_once(sdk_env):
    with pytest.warns(IgnoredArgumentWarning, match=r"ignores sku='gpu'") as said:
        first = v2_job(distribution={"type": "pytorch", "process_count_per_instance": 2, "sku": "gpu"})
        v2_job(distribution={"type": "pytorch", "process_count_per_instance": 2, "sku": "gpu"})
    assert len([w for w in said if "sku" in str(w.message)]) == 1
    assert said[0].filename == __file__  # the warning points at the user's line
    spec = spec_of(first)
    assert spec["distribution"] == {"type": "pytorch", "process_count_per_instance": 2}
    assert spec["properties"]["distrun.ignored"] == {"distribution.sku": "gpu"}


def test_node_count_is_ignored_as_in_azure_ml(sdk_env):
    with pytest.warns(IgnoredArgumentWarning, match="Azure ML ignores it too; the number of nodes is instance_count"):
        dist = PyTorchDistribution(process_count_per_instance=2, node_count=4)
    spec = spec_of(command(command="python t.py", instance_count=2, distribution=dist))
    assert spec["resources"]["instance_count"] == 2
    assert spec["distribution"]["process_count_per_instance"] == 2


def test_the_yaml_model_stays_strict(sdk_env):
    yml = write(sdk_env / "job.yml", "command: echo\ndistribution:\n  type: pytorch\n  sku: gpu\n")
    with pytest.raises(distrun.ValidationError, match=r"job.yml:4:3: distribution.sku: unknown key 'sku'"):
        load_job(yml)


def test_literal_and_typed_inputs(sdk_env):
    job = command(
        command="python t.py ${{inputs.lr}} ${{inputs.n}} ${{inputs.flag}}",
        inputs={"lr": Input(type="number", default=0.1), "n": 3, "flag": True},
    )
    spec = spec_of(job)
    assert spec["inputs"]["lr"] == {"type": "number", "default": 0.1}
    assert spec["inputs"]["n"] == 3 and spec["inputs"]["flag"] is True


def test_environment_entity_and_paths(sdk_env):
    (sdk_env / "env.yml").write_text("dependencies:\n  - pip:\n      - numpy\n")  # a conda file is checked
    job = command(
        command="python t.py",
        code=Path("src"),
        environment=Environment(image="mcr.microsoft.com/azureml/base:latest", conda_file="env.yml"),
        environment_variables={"EPOCHS": 3},
    )
    spec = spec_of(job)
    assert spec["environment"] == {"image": "mcr.microsoft.com/azureml/base:latest", "conda_file": "env.yml"}
    assert spec["code"] == "src" and spec["environment_variables"] == {"EPOCHS": "3"}


# ---------------------------------------------------------------- errors as the CLI gives them


def test_validate_reports_without_raising(sdk_env):
    result = MLClient().jobs.validate(command(command="echo ${{inputs.x}}"))
    assert not result.passed
    assert result.error_messages == {"command": "${{inputs.x}} refers to an undefined input 'x'"}
    assert MLClient().jobs.validate(command(command="echo hi")).passed
    with pytest.raises(distrun.ValidationError):
        MLClient().jobs.validate(command(command="echo ${{inputs.x}}"), raise_on_failure=True)


def test_unknown_compute_is_the_cli_error(sdk_env):
    with pytest.raises(DistrunError, match="unknown compute target 'gpu-cluster'; known targets: local"):
        MLClient().jobs.create_or_update(command(command="echo hi", compute="azureml:gpu-cluster"))
    with pytest.raises(DistrunError, match="unknown compute target 'hpc'"):
        MLClient(compute="hpc").jobs.create_or_update(command(command="echo hi"))


def test_unknown_distribution_type_is_the_loader_error(sdk_env):
    with pytest.raises(distrun.ValidationError, match=r"distribution\.type: unknown distribution type 'horovod'"):
        spec_of(command(command="echo hi", distribution={"type": "horovod"}))


def test_workspace_arguments_are_accepted_and_named_once(sdk_env):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        client = MLClient("credential", "sub-id", "rg", "ws")
        MLClient("credential", "sub-id", "rg", "ws")
    messages = [str(w.message) for w in said if issubclass(w.category, IgnoredArgumentWarning)]
    assert messages == [
        "distrun: MLClient ignores credential='credential' (distrun needs no Azure credential); recorded, not used",
        "distrun: MLClient ignores subscription_id='sub-id', resource_group_name='rg', workspace_name='ws' "
        "(jobs run on this machine or on compute targets in $DISTRUN_HOME/config.yaml); recorded, not used",
    ]
    assert client.subscription_id == "sub-id" and client.workspace_name == "ws"


# ---------------------------------------------------------------- v1


def v1_spec(config: ScriptRunConfig, experiment: str = "exp") -> dict:
    loaded = config._job_source(experiment, {}).load()
    return loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_v1_pytorch_process_count_is_a_total(sdk_env):
    src = ScriptRunConfig(
        source_directory="./src",
        script="train.py",
        arguments=["--epochs", 25, "--local_rank", "$LOCAL_RANK"],
        compute_target="local",
        distributed_job_config=PyTorchConfiguration(process_count=4, node_count=2),
    )
    spec = v1_spec(src)
    assert spec["resources"]["instance_count"] == 2
    assert spec["distribution"] == {"type": "pytorch", "process_count_per_instance": 2}
    assert spec["command"] == 'python train.py --epochs 25 --local_rank "$LOCAL_RANK"'
    assert spec["code"] == "./src" and spec["compute"] == "local" and spec["experiment_name"] == "exp"
    assert "limits" not in spec or spec["limits"] == {}


def test_v1_process_count_must_divide_by_nodes(sdk_env):
    src = ScriptRunConfig(script="t.py", distributed_job_config=PyTorchConfiguration(process_count=5, node_count=2))
    with pytest.raises(distrun.ValidationError, match="process_count 5 is not a multiple of instance_count 2"):
        v1_spec(src)


def test_v1_defaults_of_the_other_configurations(sdk_env):
    pytorch = v1_spec(ScriptRunConfig(script="t.py", distributed_job_config=PyTorchConfiguration(node_count=2)))
    assert pytorch["distribution"]["process_count_per_instance"] == 1  # one process per node
    mpi = v1_spec(ScriptRunConfig(script="t.py", distributed_job_config=MpiConfiguration(node_count=2)))
    assert mpi["distribution"]["process_count_per_instance"] == 1 and mpi["resources"]["instance_count"] == 2
    tf = v1_spec(ScriptRunConfig(script="t.py", distributed_job_config=TensorflowConfiguration()))
    assert (tf["distribution"]["worker_count"], tf["distribution"]["parameter_server_count"]) == (1, 1)
    plain = v1_spec(ScriptRunConfig(script="t.py", max_run_duration_seconds=600))
    assert "distribution" not in plain and plain["limits"]["timeout"] == 600 and plain["code"] == "."


def test_v1_per_node_command_list(sdk_env):
    launch = (
        "python -m torch.distributed.launch --nproc_per_node 2 --nnodes 2 --node_rank $NODE_RANK "
        "--master_addr $MASTER_ADDR --master_port $MASTER_PORT --use_env train.py --epochs 50"
    )
    src = ScriptRunConfig(
        source_directory="./src", command=launch.split(), distributed_job_config=PyTorchConfiguration(node_count=2)
    )
    spec = v1_spec(src)
    assert spec["command"] == launch
    assert spec["distribution"]["process_count_per_instance"] == 1 and spec["resources"]["instance_count"] == 2


def test_v1_script_and_command_together_is_an_error(sdk_env):
    with pytest.raises(distrun.ValidationError, match="takes script= or command=, not both"):
        v1_spec(ScriptRunConfig(script="t.py", command=["python", "t.py"]))
    with pytest.raises(distrun.ValidationError, match="needs script= or command="):
        v1_spec(ScriptRunConfig(source_directory="."))


def test_v1_environment_and_workspace_are_recorded(sdk_env):
    with pytest.warns(IgnoredArgumentWarning, match="Workspace ignores subscription_id='sub'"):
        ws = Workspace(subscription_id="sub", resource_group="rg", workspace_name="ws")
    curated = V1Environment.get(workspace=ws, name="AzureML-PyTorch-1.6-GPU")
    assert curated.job_environment() == "azureml:AzureML-PyTorch-1.6-GPU@latest"
    env = V1Environment("mine")
    env.docker.base_image = "python:3.11"
    env.environment_variables = {"NCCL_DEBUG": "INFO"}
    src = ScriptRunConfig(script="t.py", environment=env)
    source = src._job_source("exp", {"Workspace.subscription_id": "sub"})
    spec = source.load().spec
    assert spec.environment.image == "python:3.11" and spec.environment_variables == {"NCCL_DEBUG": "INFO"}
    assert spec.properties["distrun.ignored"] == {"Workspace.subscription_id": "sub"}
    assert Experiment(ws, "exp").name == "exp"
