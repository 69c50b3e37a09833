"""An image name never becomes an option of the engine that runs it: `environment.image`, and an
image config.yaml names, are checked against the image reference grammar before anything starts,
and the error names the file and line."""

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
