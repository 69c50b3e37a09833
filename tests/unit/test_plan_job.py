"""`PlanJob`: the validated job as plain data, read from job.json by the node agents without pydantic.

The agents plan from it, local compute and every backend's render from the job models through
it: these tests hold the two forms to each other, field by field and plan by plan, and check
that a job.json changed after submission is a clear error, not a wrong plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distrun.agent.node import read_job
from distrun.core.errors import DistrunError
from distrun.loading.loader import load_job_data, load_job_file
from distrun.plan import build_plan, task_port_count
from distrun.plan.model import Placement
from distrun.plan.plan_job import PlanJob
from distrun.restarts.policy import RestartPolicy
from distrun.spec.models import JobSpec
from support.cli import REPO

EXAMPLES = sorted(REPO.glob("examples/*/job.yml"))

# Jobs with every option the planner reads set away from its default, one per distribution.
VARIANTS: dict[str, dict[str, object]] = {
    "pytorch": {
        "command": "python train.py --lr ${{inputs.lr}}",
        "inputs": {"lr": 0.1},
        "environment_variables": {"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
        "resources": {"instance_count": 2, "properties": {"gpus_per_node": "a100:2"}},
        "distribution": {"type": "pytorch", "process_count_per_instance": 2},
        "limits": {
            "timeout": 120,
            "hang_timeout": 60,
            "grace_period": 0,
            "max_restarts": 3,
            "max_preemptions": 1,
            "no_restart_exit_codes": [3, 4],
        },
    },
    "none": {"command": "echo one", "limits": {"grace_period": 2.5}},
    "mpi": {
        "command": "python hvd.py",
        "resources": {"instance_count": 3},
        "distribution": {"type": "mpi", "process_count_per_instance": 4, "mpirun_args": ["--bind-to", "none"]},
    },
    "tensorflow": {
        "command": "python tf.py",
        "resources": {"instance_count": 2},
        "distribution": {
            "type": "tensorflow",
            "worker_count": 3,
            "parameter_server_count": 2,
            "chief_count": 1,
            "parameter_server": {
                "environment_variables": {"PS_ONLY": 1},
                "resource_limits": {"cpu": 2},
            },
        },
    },
    "ray": {
        "command": "python ray_job.py",
        "resources": {"instance_count": 2},
        "distribution": {
            "type": "ray",
            "port": 6380,
            "include_dashboard": True,
            "dashboard_port": 8266,
            "head_node_additional_args": "--num-cpus 2",
            "worker_node_additional_args": "--num-cpus 1",
        },
    },
}


def _spec(data: dict[str, object]) -> JobSpec:
    return load_job_data(json.loads(json.dumps(data)), Path.cwd(), "job.yml").spec


def _specs() -> list[JobSpec]:
    return [load_job_file(path).spec for path in EXAMPLES] + [_spec(data) for data in VARIANTS.values()]


def _agrees(job: PlanJob, spec: JobSpec) -> None:
    """Every field of `job` is what the job models say."""
    dist = spec.distribution
    assert job.command == spec.command
    assert job.node_count == spec.node_count
    assert job.distribution_type == spec.distribution_type
    assert job.environment_variables == spec.environment_variables
    assert job.gpus_per_node == (spec.resources.properties or {}).get("gpus_per_node")
    assert job.process_count_per_instance == getattr(dist, "process_count_per_instance", 1)
    assert job.mpirun_args == tuple(getattr(dist, "mpirun_args", ()))
    if spec.distribution_type == "tensorflow":
        ps = getattr(dist, "parameter_server", None)
        assert job.tensorflow.worker_count == getattr(dist, "worker_count", None)
        assert job.tensorflow.parameter_server_count == getattr(dist, "parameter_server_count", None)
        assert job.tensorflow.chief_count == getattr(dist, "chief_count", None)
        assert job.tensorflow.ps_environment_variables == (ps.environment_variables if ps else {})
        assert job.tensorflow.ps_recorded == tuple(
            k for k in ("environment", "resource_limits") if ps is not None and getattr(ps, k) is not None
        )
    if spec.distribution_type == "ray":
        for name in ("port", "address", "include_dashboard", "dashboard_port"):
            assert getattr(job.ray, name) == getattr(dist, name), name
        assert job.ray.head_node_additional_args == getattr(dist, "head_node_additional_args", None)
        assert job.ray.worker_node_additional_args == getattr(dist, "worker_node_additional_args", None)
    assert job.grace_seconds == spec.limits.grace_seconds
    assert job.timeout == spec.limits.timeout
    assert job.hang_timeout == spec.limits.hang_timeout
    assert job.restarts == RestartPolicy.of(spec.limits)


@pytest.mark.parametrize("spec", _specs(), ids=[p.parent.name for p in EXAMPLES] + list(VARIANTS))
def test_every_field_is_what_the_job_models_say(spec: JobSpec) -> None:
    _agrees(PlanJob.of(spec), spec)


def test_the_variants_set_every_option_away_from_its_default() -> None:
    # Otherwise the agreement above could pass with a field that is always its default.
    defaults = PlanJob(command="x", node_count=1, distribution_type=None)
    seen = [PlanJob.of(_spec(data)) for data in VARIANTS.values()]
    for name in PlanJob.__dataclass_fields__:
        if name not in ("command", "distribution_type"):
            assert any(getattr(job, name) != getattr(defaults, name) for job in seen), name


def test_a_node_plans_from_job_json_what_the_submitter_plans_from_the_models(write_job, distrun_home: Path) -> None:
    from support.jobs import prepare_local_job

    for index, (kind, data) in enumerate(VARIANTS.items()):
        path = write_job(json.dumps(data))
        prepared = prepare_local_job(path, f"plan_job_{index}")
        node = read_job(prepared.folder.root)
        assert node.plan_job == PlanJob.of(prepared.spec), kind
        hosts = ("10.0.0.1", "10.0.0.2", "10.0.0.3")[: prepared.spec.node_count]
        ports = tuple(range(21000, 21000 + task_port_count(prepared.spec)))
        placement = Placement(
            hosts=hosts, master_port=20000, job_dir=str(prepared.folder.root), run_id="r", task_ports=ports
        )
        from_models = build_plan(prepared.spec, placement, prepared.bindings)
        from_json = build_plan(node.plan_job, placement, node.bindings)
        assert from_json.to_dict() == from_models.to_dict(), kind


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["resources"].update(instance_count="2"), "resources: instance_count is '2', not int"),
        (lambda d: d["resources"].update(instance_count=True), "resources: instance_count is True, not int"),
        (lambda d: d.update(command=["rm", "-rf"]), "command is ['rm', '-rf'], not str"),
        (lambda d: d.pop("command"), "command is missing"),
        (lambda d: d.update(environment_variables={"A": 1}), "environment_variables: A is 1, not str"),
        (lambda d: d.update(limits=[]), "limits is list, not a mapping"),
        (lambda d: d["limits"].update(no_restart_exit_codes=["3"]), "no_restart_exit_codes[0] is '3', not int"),
        (lambda d: d["distribution"].update(type="horovod"), "distribution.type 'horovod' is not one distrun knows"),
        (lambda d: d["distribution"].update(mpirun_args="--oversubscribe"), "mpirun_args is str, not a list"),
    ],
)
def test_a_job_json_changed_after_submission_is_a_clear_error(change, said: str) -> None:
    data = json.loads(json.dumps(_spec(VARIANTS["mpi"]).model_dump(mode="json", by_alias=True, exclude_none=True)))
    data["limits"] = {"max_restarts": 1}
    change(data)
    with pytest.raises(DistrunError) as caught:
        PlanJob.from_dump(data, "job.json")
    assert said in caught.value.message
    assert caught.value.message.startswith("job.json")
    assert "submit the job again" in caught.value.render()


def test_a_job_json_that_is_not_a_mapping_is_a_clear_error() -> None:
    with pytest.raises(DistrunError, match=r"job.json is list, not a mapping"):
        PlanJob.from_dump([], "job.json")


def _prepared_folder(write_job, name: str) -> Path:
    from support.jobs import prepare_local_job

    return prepare_local_job(write_job(json.dumps(VARIANTS["none"])), name).folder.root


def test_a_node_never_blocks_on_or_follows_what_a_rank_put_in_place_of_job_json(
    write_job, distrun_home: Path, tmp_path: Path
) -> None:
    import os

    from distrun.core.safe_files import UnsafeFileError

    folder = _prepared_folder(write_job, "swapped")
    job_json = folder / "job.json"
    outside = tmp_path / "outside.json"
    outside.write_text(job_json.read_text())
    job_json.unlink()
    os.mkfifo(job_json)  # an open for reading would wait forever for a writer
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        read_job(folder)
    job_json.unlink()
    job_json.symlink_to(outside)  # a valid job, but not the one in the folder
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        read_job(folder)
    job_json.unlink()
    job_json.write_text("{not json")
    with pytest.raises(DistrunError, match=r"job.json is not what distrun wrote there"):
        read_job(folder)
    job_json.write_text(outside.read_text())
    (folder / "bindings.json").write_text('{"unknown": 1}')
    with pytest.raises(DistrunError, match=r"bindings.json is not what distrun wrote there"):
        read_job(folder)
