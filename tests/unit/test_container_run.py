"""What distrun passes to podman/docker for a rank, and whether a local job runs in a container at all."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from distrun.agent.containers import ContainerRun, container_name, run_argv, start_failure
from distrun.backends import container_choice
from distrun.backends.container_choice import SWITCH, choose_container, job_image
from distrun.core.errors import DistrunError
from distrun.plan.model import Bindings, ProcessSpec
from support.job_files import load_text

SPEC = ProcessSpec(
    name="rank_1",
    role="rank",
    index=1,
    node_rank=0,
    local_rank=1,
    rank=1,
    argv=("bash", "-c", "python train.py"),
    env={"RANK": "1"},
    env_defaults={},
    cwd="/home/u/.distrun/jobs/j/code",
    log_name="std_log_process_01.txt",
    label="0/1",
)


@pytest.fixture(autouse=True)
def containers_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the choice itself: the unit tests' `--no-container` is taken away."""
    monkeypatch.delenv(SWITCH, raising=False)


def _run(**changes: object) -> ContainerRun:
    given: dict = {"engine": "podman", "program": "/usr/bin/podman", "image": "reg/img:1", "mounts": ("/jobs/j",)}
    given.update(changes)
    return ContainerRun(**given)


def test_podman_argv_runs_the_rank_in_the_foreground_with_host_network_and_variables_by_name():
    env = {"RANK": "1", "SECRET_TOKEN": "s3cr3t", "PATH": "/host/venv/bin", "DISTRUN_LAUNCH_ID": "L"}
    argv = run_argv(_run(user="0:0", extra_mounts=("/data:/data:ro",)), SPEC, env, "distrun-x-rank_1")
    assert argv[:8] == ["/usr/bin/podman", "--runtime", "runc", "run", "--rm", "--init", "--name", "distrun-x-rank_1"]
    joined = " ".join(argv)
    assert "--network host --ipc host --user 0:0" in joined
    assert "--volume /jobs/j:/jobs/j --volume /data:/data:ro --workdir /home/u/.distrun/jobs/j/code" in joined
    assert "--env RANK --env SECRET_TOKEN" in joined and "s3cr3t" not in joined  # values from podman's environment
    assert "PATH" not in argv[argv.index("--env") :][:-4]  # this machine's PATH is not the image's
    assert argv[-5:] == ["DISTRUN_LAUNCH_ID=L", "reg/img:1", "bash", "-c", "python train.py"]


def test_user_gpus_and_docker_differences():
    rootless = run_argv(_run(gpus=True), SPEC, {}, "n")
    assert "--userns=keep-id" in rootless and "--user" not in rootless
    assert " --device nvidia.com/gpu=all " in f" {' '.join(rootless)} "
    docker = run_argv(_run(engine="docker", program="docker", user="1000:1000", gpus=True), SPEC, {}, "n")
    assert docker[:3] == ["docker", "run", "--rm"] and "--runtime" not in docker
    assert "--gpus all" in " ".join(docker) and "--user 1000:1000" in " ".join(docker)
    assert _run(engine="docker").engine_env() == {}


def test_container_names_are_per_launch_and_process():
    first = container_name("job-a-123", "rank_0")
    assert first.startswith("distrun-") and first.endswith("-rank_0")
    assert first != container_name("job-a-124", "rank_0") and first != container_name("job-a-123", "rank_1")


def test_an_engine_that_could_not_start_the_container_is_said_plainly():
    tail = "Trying to pull reg/img:1...\nError: initializing source docker://reg/img:1: connection refused\n"
    said = start_failure(_run(), 125, tail)
    assert said == (
        "podman could not start a container: initializing source docker://reg/img:1: connection refused; "
        "see docs/environments-and-data.md#containers"
    )
    assert start_failure(_run(), 1, tail) is None  # the rank's own failure stays the rank's


IMAGE_JOB = "command: python train.py\nenvironment: {image: reg/img:1}\n"


def _choose(home: Path) -> container_choice.ContainerChoice:
    spec = load_text(home, IMAGE_JOB).spec
    return choose_container(spec, home / "config.yaml", home / "jobs" / "j", Bindings(), False, home / "containers")


def test_only_an_image_alone_runs_in_a_container(tmp_path):
    assert job_image(load_text(tmp_path, IMAGE_JOB).spec) == "reg/img:1"
    built = "command: x\nenvironment: {image: reg/img:1, conda_file: {dependencies: [python=3.11]}}\n"
    assert job_image(load_text(tmp_path, built).spec) is None
    assert job_image(load_text(tmp_path, "command: x\n").spec) is None


def test_without_an_engine_the_job_runs_here_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    container_choice.find_engine.cache_clear()
    try:
        choice = _choose(tmp_path)
    finally:
        container_choice.find_engine.cache_clear()
    assert choice.run is None
    why = "no container engine on this machine (podman, then docker, were looked for)"
    assert choice.note is not None and choice.note.startswith(f"environment.image reg/img:1 is not used: {why}")


def test_no_container_and_the_config_setting_keep_it_here_on_purpose(tmp_path, monkeypatch):
    monkeypatch.setenv(SWITCH, "off")
    assert "is not used: --no-container" in str(_choose(tmp_path).note)
    monkeypatch.delenv(SWITCH)
    (tmp_path / "config.yaml").write_text("containers:\n  use: false\n")
    assert f"is not used: containers.use is false in {tmp_path / 'config.yaml'}" in str(_choose(tmp_path).note)


def test_a_wrong_containers_setting_names_its_line(tmp_path):
    (tmp_path / "config.yaml").write_text("containers:\n  mount: [/a:/a]\n")
    with pytest.raises(DistrunError) as caught:
        _choose(tmp_path)
    assert f"{tmp_path / 'config.yaml'}:2" in caught.value.message
    assert "containers.mount: not a setting" in caught.value.message


def test_mounts_are_the_job_folder_and_data_outside_it(tmp_path):
    job_dir = tmp_path / "jobs" / "j"
    inputs = {"data": "/data/set", "inside": str(job_dir / "inputs" / "x"), "again": "/data/set/part"}
    mounts = container_choice._mounts(job_dir, Bindings(input_paths=inputs, outputs={"model": str(job_dir / "m")}))
    assert mounts == (str(job_dir), "/data/set")


def test_the_plan_says_the_processes_run_in_containers():
    from distrun.backends.local.backend import LocalLaunch

    assert LocalLaunch(("distrun",), _run()).display() == {
        "runs_in": "a container of image reg/img:1 per process (/usr/bin/podman)"
    }
    assert LocalLaunch(("distrun",)).display() == {}


def test_a_slurm_node_reads_the_submitters_choice_and_uses_its_own_engine(tmp_path, monkeypatch):
    from distrun.backends.slurm.layout import SlurmPaths
    from distrun.backends.slurm.node_agent import node_container

    job_dir = tmp_path / "job"
    assert node_container(job_dir, "n1") is None  # a job without containers
    written = _run(user="0:0", extra_mounts=("/data:/data:ro",), gpus=True, config_dir="/home/u/.distrun/containers")
    path = SlurmPaths(job_dir).container
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(written.to_dict()))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text("#!/bin/sh\n")
    (bin_dir / "podman").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert node_container(job_dir, "n1") == dataclasses.replace(written, program=str(bin_dir / "podman"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(DistrunError, match="node n2 has no podman") as missing:
        node_container(job_dir, "n2")
    assert "--no-container" in (missing.value.hint or "")
    # A rank rewrote the file: named, not a traceback, and nothing of it is used.
    path.write_text(json.dumps({**written.to_dict(), "engine": "sh"}))
    with pytest.raises(DistrunError, match="not the container settings distrun wrote"):
        node_container(job_dir, "n1")
