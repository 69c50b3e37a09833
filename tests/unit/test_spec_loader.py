"""The job loader: Azure ML CLI v2 command jobs, older forms, `--set` overrides, command templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distrun.core.errors import ValidationError
from distrun.loading.loader import LoadedJob, load_job_data, load_job_file
from distrun.spec import models
from distrun.spec.command_template import references, render_command, render_value
from distrun.spec.overrides import parse_override
from support.job_files import load_text, write_job

SEED001 = Path(__file__).parents[1] / "data" / "seed001"


# ---------------------------------------------------------------- CLI v2 command job

FULL_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
type: command
name: mnist_ddp-1
display_name: MNIST DDP
experiment_name: mnist
description: Trains MNIST on two nodes.
tags:
  team: vision
  priority: 1
properties:
  owner: alice
command: >-
  python train.py --epochs ${{inputs.epochs}} --data ${{inputs.data}}
  --labels ${{inputs.labels}} --out ${{outputs.model}}
code: src
environment: azureml:AzureML-pytorch-2.0@latest
environment_variables:
  NCCL_DEBUG: INFO
  MASTER_PORT: 29500
  USE_AMP: true
inputs:
  epochs: 3
  data:
    type: uri_folder
    path: ./data
    mode: download
  labels:
    type: uri_file
    path: file://LABELS
  learning_rate:
    type: number
    default: 0.01
outputs:
  model:
  metrics:
    type: uri_file
    mode: upload
compute: azureml:gpu-cluster
resources:
  instance_count: 2
  instance_type: Standard_NC24
  shm_size: 8g
limits:
  timeout: 3600
distribution:
  type: pytorch
  process_count_per_instance: 4
services:
  my_jupyter:
    type: jupyter_lab
identity:
  type: user_identity
queue_settings:
  job_tier: standard
"""

TOP_LEVEL_KEYS = [
    "$schema",
    "type",
    "name",
    "display_name",
    "experiment_name",
    "description",
    "tags",
    "properties",
    "command",
    "code",
    "environment",
    "environment_variables",
    "inputs",
    "outputs",
    "compute",
    "resources",
    "limits",
    "distribution",
    "services",
    "identity",
    "queue_settings",
]


@pytest.fixture
def full_job(tmp_path: Path) -> LoadedJob:
    (tmp_path / "data").mkdir()
    (tmp_path / "labels.csv").write_text("a,b\n")
    text = FULL_JOB.replace("LABELS", str(tmp_path / "labels.csv"))
    return load_text(tmp_path, text)


def test_the_model_knows_every_top_level_key_of_a_command_job() -> None:
    known = [field.alias or name for name, field in models.JobSpec.model_fields.items()]
    assert sorted(known) == sorted(TOP_LEVEL_KEYS)


def test_every_top_level_key_loads(full_job: LoadedJob) -> None:
    written = [line.split(":", 1)[0] for line in FULL_JOB.splitlines() if line and not line[0].isspace()]
    assert sorted(written) == sorted(TOP_LEVEL_KEYS)
    spec = full_job.spec
    assert spec.schema_ == "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json"
    assert spec.type == "command"
    assert spec.name == "mnist_ddp-1"
    assert spec.display_name == "MNIST DDP"
    assert spec.experiment_name == "mnist"
    assert spec.description == "Trains MNIST on two nodes."
    assert spec.tags == {"team": "vision", "priority": "1"}
    assert spec.properties == {"owner": "alice"}
    assert spec.command.startswith("python train.py --epochs ${{inputs.epochs}}")
    assert spec.code == "src"
    assert spec.environment == "azureml:AzureML-pytorch-2.0@latest"
    # Environment variables are strings, whatever YAML typed them as.
    assert spec.environment_variables == {"NCCL_DEBUG": "INFO", "MASTER_PORT": "29500", "USE_AMP": "true"}
    assert spec.inputs["epochs"] == 3
    assert isinstance(spec.inputs["data"], models.DataInput)
    assert (spec.inputs["data"].type, spec.inputs["data"].mode) == ("uri_folder", "download")
    assert isinstance(spec.inputs["labels"], models.DataInput) and spec.inputs["labels"].type == "uri_file"
    assert isinstance(spec.inputs["learning_rate"], models.LiteralInput)
    assert spec.inputs["learning_rate"].default == 0.01
    assert spec.outputs["model"] is None
    assert spec.outputs["metrics"] == models.OutputSpec(type="uri_file", mode="upload")
    assert spec.compute == "azureml:gpu-cluster"
    assert (spec.resources.instance_count, spec.resources.instance_type) == (2, "Standard_NC24")
    assert spec.resources.shm_size == "8g"
    assert spec.limits.timeout == 3600
    assert spec.distribution == models.PyTorchDistribution(process_count_per_instance=4)
    assert spec.services == {"my_jupyter": {"type": "jupyter_lab"}}
    assert spec.identity == {"type": "user_identity"}
    assert spec.queue_settings == {"job_tier": "standard"}
    assert spec.node_count == 2 and spec.distribution_type == "pytorch"


def test_positions_of_keys_are_file_line_column(full_job: LoadedJob) -> None:
    lines = FULL_JOB.splitlines()
    where = full_job.position("resources", "instance_count")
    assert (Path(where.source).name, where.line, where.column) == ("job.yml", lines.index("  instance_count: 2") + 1, 3)
    assert full_job.position("inputs", "data", "path").line == lines.index("    path: ./data") + 1
    # A key the file does not have falls back to its nearest enclosing key.
    assert full_job.position("distribution", "nothing_here").line == full_job.position("distribution").line


def test_a_minimal_job_gets_the_defaults(tmp_path: Path) -> None:
    spec = load_text(tmp_path, "command: echo hi\n").spec
    assert spec.type == "command" and spec.name is None and spec.code is None
    assert spec.resources.instance_count == 1 and spec.distribution is None
    assert spec.inputs == {} and spec.outputs == {} and spec.environment_variables == {}


@pytest.mark.parametrize(
    "environment",
    [
        "azureml:AzureML-sklearn-1.0@latest",
        "azureml:my-env:3",
        "azureml://registries/azureml/environments/sklearn-1.5/labels/latest",
        "{image: 'python:3.11', os_type: linux}",
        "{conda_file: env.yml, image: 'mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04'}",
        "{build: {path: docker, dockerfile_path: Dockerfile}}",
    ],
)
def test_environment_reference_or_inline_object_loads(tmp_path: Path, environment: str) -> None:
    (tmp_path / "env.yml").write_text("dependencies:\n  - pip:\n      - numpy\n")  # a conda file is checked
    (tmp_path / "docker").mkdir()  # and so is a build context
    (tmp_path / "docker" / "Dockerfile").write_text("FROM mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04\n")
    spec = load_text(tmp_path, f"command: echo hi\nenvironment: {environment}\n").spec
    assert spec.environment is not None


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("pytorch", "pytorch"),
        ("PyTorch", "pytorch"),
        ("PYTORCH", "pytorch"),
        ("tensorflow", "tensorflow"),
        ("TensorFlow", "tensorflow"),
        ("TENSORFLOW", "tensorflow"),
        ("mpi", "mpi"),
        ("MPI", "mpi"),
        ("Mpi", "mpi"),
        ("Ray", "ray"),
    ],
)
def test_distribution_type_is_case_insensitive_and_lowercased(tmp_path: Path, written: str, expected: str) -> None:
    spec = load_text(tmp_path, f"command: echo hi\ndistribution:\n  type: {written}\n").spec
    assert spec.distribution is not None
    assert spec.distribution.type == expected == spec.distribution_type
    assert type(spec.distribution) is models.DISTRIBUTION_MODELS[expected]
    # The same through --set and through plain data (the SDK's dict form).
    via_set = load_text(tmp_path, "command: echo hi\n", [f"distribution.type={written}"]).spec
    assert via_set.distribution_type == expected
    via_data = load_job_data({"command": "echo hi", "distribution": {"type": written}}, tmp_path).spec
    assert via_data.distribution_type == expected


def test_distribution_defaults(tmp_path: Path) -> None:
    tf = load_text(tmp_path, "command: x\nresources: {instance_count: 3}\ndistribution: {type: tensorflow}\n").spec
    assert isinstance(tf.distribution, models.TensorFlowDistribution)
    assert tf.distribution.worker_count is None  # the planner uses instance_count
    assert tf.distribution.parameter_server_count == 0
    for kind in ("pytorch", "mpi"):
        spec = load_text(tmp_path, f"command: x\ndistribution: {{type: {kind}}}\n").spec
        assert isinstance(spec.distribution, (models.PyTorchDistribution, models.MpiDistribution))
        assert spec.distribution.process_count_per_instance == 1


def test_master_port_may_be_pinned_but_not_the_other_rendezvous_variables(tmp_path: Path) -> None:
    spec = load_text(tmp_path, "command: x\nenvironment_variables: {MASTER_PORT: 29500}\n").spec
    assert spec.environment_variables == {"MASTER_PORT": "29500"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "MASTER_ADDR", "TF_CONFIG", "OMPI_COMM_WORLD_RANK"):
        with pytest.raises(ValidationError) as caught:
            load_text(tmp_path, f"command: x\nenvironment_variables: {{{name}: '1'}}\n")
        assert [p.key_path for p in caught.value.problems] == [f"environment_variables.{name}"]


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    text = "command: x\nresources: {instance_count: 0, instanse_type: a}\nlimits: {timeout: -1}\nflavour: 1\n"
    with pytest.raises(ValidationError) as caught:
        load_text(tmp_path, text)
    keys = sorted(p.key_path for p in caught.value.problems)
    assert keys == ["flavour", "limits.timeout", "resources.instance_count", "resources.instanse_type"]
    assert caught.value.render().startswith("invalid job: 4 problems\n")


def test_a_missing_job_file_is_a_validation_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        load_job_file(tmp_path / "nope.yml")
    with pytest.raises(ValidationError, match="is a folder"):
        load_job_file(tmp_path)


# ---------------------------------------------------------------- --set overrides


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("resources.instance_count=3", ("resources", "instance_count"), 3),
        ("inputs.flag=true", ("inputs", "flag"), True),
        ('inputs.text="3"', ("inputs", "text"), "3"),
        ("inputs.rate=0.5", ("inputs", "rate"), 0.5),
        ("inputs.hello_string=hello there", ("inputs", "hello_string"), "hello there"),
        ("inputs.expr=a=b=c", ("inputs", "expr"), "a=b=c"),  # split at the first '='
        ("inputs.empty=", ("inputs", "empty"), ""),
        ("description=null", ("description",), None),
        ("resources.locations=[westus, eastus]", ("resources", "locations"), ["westus", "eastus"]),
        ("services={a: {type: ssh}}", ("services",), {"a": {"type": "ssh"}}),
        ("command=echo a: b", ("command",), "echo a: b"),  # not a mapping: the text as typed
        ("inputs.tag=#1", ("inputs", "tag"), "#1"),  # not a YAML comment
        ("inputs.bullet=- x", ("inputs", "bullet"), "- x"),  # not a block list
        ('environment.image="python:3.8"', ("environment", "image"), "python:3.8"),
        ("environment.image=python:3.8", ("environment", "image"), "python:3.8"),
        ("inputs.yes=yes", ("inputs", "yes"), "yes"),  # YAML 1.2, as Azure ML reads it
        ("resources.locations.0=westus", ("resources", "locations", 0), "westus"),
        ("$schema=x", ("$schema",), "x"),
    ],
)
def test_override_values_are_typed_as_yaml_scalars(text: str, path: tuple[Any, ...], value: Any) -> None:
    assert parse_override(text) == (path, value)


def test_overrides_apply_before_validation(tmp_path: Path) -> None:
    text = "resources:\n  instance_count: 0\ndistribution:\n  type: pytorhc\n"  # invalid as written
    job = load_text(
        tmp_path,
        text,
        [
            "command=python train.py --n ${{inputs.n}} --msg ${{inputs.msg}}",
            "resources.instance_count=1",
            "resources.instance_count=2",  # the later one wins
            "distribution.type=PyTorch",
            "distribution.process_count_per_instance=3",
            "inputs.n=24",
            "inputs.msg=hello there",
        ],
    )
    spec = job.spec
    assert spec.resources.instance_count == 2
    assert spec.distribution == models.PyTorchDistribution(process_count_per_instance=3)
    assert spec.inputs == {"n": 24, "msg": "hello there"}
    assert job.position("resources", "instance_count").source == "--set resources.instance_count=2"
    assert job.position("inputs").source == "--set inputs.n=24"  # created by that override
    assert job.position("distribution", "type").line is None


def test_an_override_replaces_a_subtree_and_its_positions(tmp_path: Path) -> None:
    path = write_job(tmp_path, "command: x\nresources:\n  instance_count: 2\n  instance_type: a\n")
    job = load_job_file(path, ["resources={instance_count: 3}"])
    assert job.spec.resources == models.ResourceConfiguration(instance_count=3)
    assert job.position("resources", "instance_type").source == "--set resources={instance_count: 3}"
    with pytest.raises(ValidationError) as caught:
        load_job_file(path, ["resources={instance_count: 0}"])
    [problem] = caught.value.problems
    assert problem.key_path == "resources.instance_count"
    assert str(problem.position) == "--set resources={instance_count: 0}"


def test_an_error_in_an_override_names_the_override(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_text(tmp_path, "command: x\n", ["inputs.my-input=3"])
    [problem] = caught.value.problems
    assert problem.key_path == "inputs.my-input"
    assert problem.position is not None and problem.position.source == "--set inputs.my-input=3"
    assert problem.position.line is None


def test_overrides_do_not_change_the_callers_data(tmp_path: Path) -> None:
    data = {"command": "x", "resources": {"instance_count": 2}, "compute": {"target": "local", "instance_count": 2}}
    before = json.dumps(data, sort_keys=True)
    job = load_job_data(data, tmp_path, overrides=["resources.instance_count=3"])
    assert job.spec.resources.instance_count == 3
    assert json.dumps(data, sort_keys=True) == before


# ---------------------------------------------------------------- command templates


def test_references_and_optional_blocks() -> None:
    command = "train ${{inputs.a}} ${{ outputs.b }} $[[--c ${{inputs.c}}]] ${{search_space.x}}"
    refs, unknown = references(command)
    assert [(r.kind, r.name, r.optional) for r in refs] == [
        ("inputs", "a", False),
        ("outputs", "b", False),
        ("inputs", "c", True),
    ]
    assert unknown == ["${{search_space.x}}"]


def test_optional_block_is_dropped_when_its_input_is_not_given() -> None:
    command = "train --a ${{inputs.a}}$[[ --c ${{inputs.c}}]] --out ${{outputs.o}}"
    assert render_command(command, {"a": "1"}, {"o": "/out"}) == "train --a 1 --out /out"
    assert render_command(command, {"a": "1", "c": "2"}, {"o": "/out"}) == "train --a 1 --c 2 --out /out"


def test_optional_input_may_be_undefined_in_the_job(tmp_path: Path) -> None:
    spec = load_text(tmp_path, "command: train $[[--c ${{inputs.c}}]]\n").spec
    assert render_command(spec.command, {}, {}) == "train "


@pytest.mark.parametrize(("value", "text"), [(True, "True"), (False, "False"), (3, "3"), (0.5, "0.5"), ("s", "s")])
def test_literal_values_render_as_azure_ml_writes_them(value: object, text: str) -> None:
    assert render_value(value) == text


# ---------------------------------------------------------------- older forms


def test_legacy_2021_preview_form_loads(tmp_path: Path) -> None:
    text = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
code:
  local_path: src
command: python train.py --epochs {inputs.epochs} --out {outputs.model} --keep {not_a_reference}
inputs:
  epochs: 3
outputs:
  model:
environment:
  docker:
    image: mcr.microsoft.com/azureml/openmpi3.1.2-ubuntu18.04
compute:
  target: azureml:gpu-cluster
  instance_count: 2
distribution:
  type: pytorch
  process_count: 8
"""
    job = load_text(tmp_path, text)
    spec = job.spec
    assert spec.code == "src"
    assert spec.command == (
        "python train.py --epochs ${{inputs.epochs}} --out ${{outputs.model}} --keep {not_a_reference}"
    )
    assert spec.environment == models.EnvironmentSpec(image="mcr.microsoft.com/azureml/openmpi3.1.2-ubuntu18.04")
    assert spec.compute == "azureml:gpu-cluster"
    assert spec.resources.instance_count == 2
    # process_count is a total over the nodes: 8 over 2 nodes is 4 per node.
    assert spec.distribution == models.PyTorchDistribution(process_count_per_instance=4)
    # Positions follow the values to their new keys.
    assert job.position("resources", "instance_count").line == 14
    assert job.position("environment", "image").line == 11


def test_legacy_process_count_error_points_at_it(tmp_path: Path) -> None:
    text = "command: x\ncompute: {target: local, instance_count: 2}\ndistribution: {type: mpi, process_count: 3}\n"
    with pytest.raises(ValidationError) as caught:
        load_text(tmp_path, text)
    [problem] = caught.value.problems
    assert problem.key_path == "distribution.process_count"
    assert problem.position is not None and (problem.position.line, problem.position.column) == (3, 27)


SEED_EXAMPLES = {
    # file: (type, instance_count, process_count_per_instance, worker_count, parameter_server_count)
    "mpi-horovodrun.yml": ("mpi", 4, 1, None, None),
    "mpi-mpirun.yml": ("mpi", 4, 4, None, None),
    "mpi-launcher-worker-env.yml": ("mpi", 4, 1, None, None),
    "mpi-k8s.yml": ("mpi", 4, 1, None, None),
    "pytorch-amlcompute.yml": ("pytorch", 4, 1, None, None),
    "pytorch-k8s.yml": ("pytorch", 4, 1, None, None),
    "tensorflow-multiworker.yml": ("tensorflow", 4, None, 4, 0),
    "tensorflow-parameter-server.yml": ("tensorflow", 1, None, 2, 4),
}


def test_every_seed_example_is_in_the_table() -> None:
    assert sorted(p.name for p in SEED001.glob("*.yml")) == sorted(SEED_EXAMPLES)


@pytest.mark.parametrize("name", sorted(SEED_EXAMPLES))
def test_seed_draft_distributed_form_loads_and_normalizes(name: str) -> None:
    kind, nodes, per_node, workers, servers = SEED_EXAMPLES[name]
    job = load_job_file(SEED001 / name)
    spec = job.spec
    assert spec.distribution is not None and spec.distribution_type == kind
    assert spec.resources.instance_count == nodes
    assert getattr(spec.distribution, "process_count_per_instance", None) == per_node
    assert getattr(spec.distribution, "worker_count", None) == workers
    assert getattr(spec.distribution, "parameter_server_count", None) == servers
    assert spec.code == "./src" and (job.base_dir / spec.code).is_dir()
    assert isinstance(spec.environment, models.EnvironmentSpec) and spec.environment.image.startswith("docker.io/")
    assert spec.properties["compute_infrastructure"] in ("managed", "k8s")


def test_seed_parameter_servers_keep_their_own_settings() -> None:
    spec = load_job_file(SEED001 / "tensorflow-parameter-server.yml").spec
    assert spec.environment_variables == {"MAGIC": "number"}
    dist = spec.distribution
    assert isinstance(dist, models.TensorFlowDistribution) and dist.parameter_server is not None
    assert dist.parameter_server.environment_variables == {"MAGIC": "newnumber"}
    assert dist.parameter_server.environment == {"docker": {"image": "docker.io/python"}}
    assert dist.parameter_server.resource_limits == {"gpu": 4, "memory": "2Gi"}
    assert spec.properties["worker_resource_limits"] == {"cpu": 4}


def test_seed_k8s_examples_keep_target_and_resource_requests() -> None:
    mpi = load_job_file(SEED001 / "mpi-k8s.yml").spec
    assert mpi.compute == "my-aks-cluster"
    assert isinstance(mpi.distribution, models.MpiDistribution)
    assert mpi.distribution.launcher_resources == {"limits": {"cpu": 1, "memory": "2Gi"}}
    assert mpi.properties["worker_resources"] == {"limits": {"gpu": 4}}
    torch = load_job_file(SEED001 / "pytorch-k8s.yml").spec
    assert torch.compute == "my-aks-cluster" and torch.properties["compute_infrastructure"] == "k8s"
    assert torch.environment_variables == {"LANGUAGE": "en-us"}
    assert torch.properties["worker_resource_limits"] == {"gpu": 4}


def test_seed_mpi_command_reads_the_hostfile_variable() -> None:
    spec = load_job_file(SEED001 / "mpi-mpirun.yml").spec
    assert "--hostfile $AZUREML_MPI_HOSTFILE" in spec.command
    assert "\n" not in spec.command  # `>-` folds the lines into one command


def test_draft_and_v2_distribution_together_are_refused(tmp_path: Path) -> None:
    text = "command: x\ndistribution: {type: mpi}\ndistributed:\n  mpi:\n    worker: {count: 2}\n"
    with pytest.raises(ValidationError, match="both `distribution` and the draft `distributed`"):
        load_text(tmp_path, text)


def test_an_override_on_plain_data_does_not_claim_the_whole_document(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        load_job_data({"code": "src"}, tmp_path, "<python>", ["resources.instance_count=2"])
    [problem] = caught.value.problems
    assert problem.key_path == "command"
    assert problem.position is not None and problem.position.source == "<python>"


def test_an_inline_environment_takes_a_numeric_version_and_its_problems_are_said_inside_it() -> None:
    # As Microsoft's pipelines write it (`version: 1`): Azure ML reads the version "1".
    environment = {"name": "prepare", "version": 1, "image": "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"}
    loaded = load_job_data({"command": "echo hi", "environment": environment}, Path("."))
    assert loaded.spec.environment.version == "1"
    # A mistake inside the mapping is that one problem, not also "environment: expected a string".
    with pytest.raises(ValidationError) as caught:
        load_job_data({"command": "echo hi", "environment": {**environment, "imag": "x"}}, Path("."))
    assert [(p.key_path, p.message) for p in caught.value.problems] == [("environment.imag", "unknown key 'imag'")]
