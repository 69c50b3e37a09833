"""A value distrun hands to another program's command line never becomes one of its options:
`environment.image`, and an image config.yaml names, are checked against the image reference
grammar before anything starts (the error names the file and line); a data path is never handed
to `--volume` with a ':' in it; a Slurm target's names and time are checked before they are
written into `#SBATCH` lines."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("image", ["--privileged", "--volume=/etc:/x", "-v", "python:3.11 --privileged"])
@pytest.mark.parametrize("verb", ["plan", "run"])
def test_an_image_that_is_not_an_image_reference_is_refused_at_its_line(run_cli, write_job, distrun_home, image, verb):
    job = write_job(f"command: echo hi\nenvironment:\n  image: {json.dumps(image)}\n")
    result = run_cli(verb, str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{job}:3:3: environment.image: {image!r} is not an image reference" in result.stderr
    assert "hint: write an image such as" in result.stderr
    assert "Traceback" not in result.stderr and "a container of image" not in result.stdout
    assert not (distrun_home / "jobs").exists() or not any((distrun_home / "jobs").iterdir())


def test_an_image_config_yaml_names_is_refused_before_a_pod_is_made(run_cli, write_job, distrun_home):
    distrun_home.mkdir(parents=True, exist_ok=True)
    (distrun_home / "config.yaml").write_text(
        "environments:\n  trainer: {image: '--privileged'}\ncompute:\n  k8s: {type: kubernetes, namespace: default}\n"
    )
    job = write_job("command: echo hi\nenvironment: trainer\ncompute: k8s\n")
    result = run_cli("plan", str(job))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "environments.trainer.image: '--privileged' is not an image reference" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_data_path_holding_a_colon_is_never_handed_to_volume(tmp_path):
    from distrun.backends.container_choice import _mounts
    from distrun.core.errors import DistrunError
    from distrun.plan.model import Bindings

    plain = Bindings(inputs={}, outputs={}, input_paths={"data": "/data/set"})
    assert _mounts(tmp_path, plain) == (str(tmp_path), "/data/set")
    hostile = Bindings(inputs={}, outputs={}, input_paths={"data": "/data/x:/etc:rw"})
    with pytest.raises(DistrunError, match="cannot be mounted into a container"):
        _mounts(tmp_path, hostile)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("partition", "gpu --uid=0"),
        ("partition", "-x"),
        ("account", "a\n#SBATCH --uid=0"),
        ("qos", "high;id"),
        ("time_limit", "1:00 --uid=0"),
    ],
)
def test_a_slurm_target_value_that_would_be_another_option_is_refused(key, value):
    from distrun.backends.slurm.target import SlurmSettings
    from distrun.core.errors import DistrunError

    assert SlurmSettings.from_settings("s", {"partition": "gpu-a100", "time_limit": "1-02:00:00"}).partition
    with pytest.raises(DistrunError, match=f"{key}: .* is not a Slurm"):
        SlurmSettings.from_settings("s", {key: value})
