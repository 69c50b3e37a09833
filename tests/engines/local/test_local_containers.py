"""A job with `environment.image` on local compute runs each rank in a podman container of the image.

The image is the test image (`support.container_image`): this machine's Python and the test
venv, mounted read-only, plus a marker file only the image has. podman comes from
scripts/deps/55-containers.sh.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from support.container_image import DDP_CHECK as CHECK
from support.container_image import DDP_JOB, MARKER, containers_of, use_test_image
from support.jobs import only_job, processes_of_job, record, wait_for

# The tests look at the containers of the test image, so they run one at a time.
pytestmark = pytest.mark.xdist_group("local-containers")

HOLD = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", os.environ["RANK"], flush=True)
time.sleep(300)
"""


@pytest.fixture
def image(distrun_home: Path) -> str:
    return use_test_image(distrun_home)


@pytest.mark.slow
def test_ddp_ranks_run_in_containers_of_the_image(image, run_cli, write_job, distrun_home):
    result = run_cli("run", str(write_job(DDP_JOB.format(image=image), {"check.py": CHECK})))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"runs each process in a container of image {image} (podman)" in result.stdout + result.stderr
    name = only_job(distrun_home)
    assert record(distrun_home, name)["status"] == "Completed"
    folder = distrun_home / "jobs" / name
    for rank in range(4):
        log = (folder / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
        assert f"rank {rank} of 4 sum 6 in image True" in log
        assert f"rank {rank} sees 4 ranks' files in /dev/shm" in log  # the host's IPC, shared
        written = folder / "code" / "outputs" / f"rank_{rank}.txt"
        assert written.read_text() == "127.0.0.1"
        assert (written.stat().st_uid, written.stat().st_gid) == (os.getuid(), os.getgid())
    assert not (Path("/") / MARKER).exists()  # the marker is the image's, not this machine's
    assert containers_of(image) == []
    assert processes_of_job(name) == []


def test_podman_that_cannot_start_a_container_is_the_reason(image, run_cli, write_job, distrun_home):
    missing = distrun_home / "not-here"
    config = yaml.safe_load((distrun_home / "config.yaml").read_text())
    config["containers"]["mounts"].append(f"{missing}:/data")
    (distrun_home / "config.yaml").write_text(yaml.safe_dump(config))
    result = run_cli("run", str(write_job(DDP_JOB.format(image=image), {"check.py": CHECK})))
    assert result.returncode == 1
    rec = record(distrun_home, only_job(distrun_home))
    assert rec["status"] == "Failed"
    assert rec["reason"] == (
        f"podman could not start a container: statfs {missing}: no such file or directory; "
        "see docs/environments-and-data.md#containers"
    )
    assert containers_of(image) == []


def test_ranks_in_containers_have_stacks_and_sigkill_of_distrun_leaves_no_container(
    image, start_cli, run_cli, write_job, distrun_home
):
    proc = start_cli("run", str(write_job(DDP_JOB.format(image=image), {"check.py": HOLD})))
    logs = distrun_home / "jobs"

    def all_up() -> bool:
        found = list(logs.glob("*/user_logs/std_log_process_*.txt"))
        return len(found) == 4 and all("up " in path.read_text() for path in found)

    assert wait_for(all_up, timeout=60)
    assert len(containers_of(image)) == 4
    # Each rank is podman's client; its Python runs in the container, found through podman.
    stacks = run_cli("job", "stacks", only_job(distrun_home))
    assert stacks.returncode == 0, stacks.stdout + stacks.stderr
    assert "4 processes (rank 0, 1, 2, 3): <module> at check.py:5" in stacks.stdout, stacks.stdout
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_for(lambda: containers_of(image) == [], timeout=30)
    assert record(distrun_home, only_job(distrun_home))["status"] != "Running"


BUILT_JOB = """
command: python check.py
code: src
environment:
  build: {path: context}
resources:
  instance_count: 1
distribution:
  type: pytorch
  process_count_per_instance: 2
"""

# Two stages: a Dockerfile a uv environment cannot stand in for, which only an engine builds.
DOCKERFILE = """FROM {image} AS stage
COPY made.txt /made.txt
FROM {image}
COPY --from=stage /made.txt /built-from-context
ENV BUILT_BY=context
"""

BUILT_CHECK = """
import os
import torch.distributed as dist
dist.init_process_group("gloo")
print("rank", dist.get_rank(), open("/built-from-context").read().strip(), os.environ["BUILT_BY"], flush=True)
dist.destroy_process_group()
"""


def test_a_build_context_is_built_into_an_image_once_and_its_ranks_run_in_it(image, run_cli, write_job, distrun_home):
    from distrun.environments.image_build import context_key

    job = write_job(BUILT_JOB, {"check.py": BUILT_CHECK})
    context = job.parent / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(DOCKERFILE.format(image=image))
    (context / "made.txt").write_text(f"made at {os.getpid()}\n")  # a new context (and image) per run
    tag = f"localhost/distrun-build:{context_key(context, 'Dockerfile')}"
    try:
        planned = run_cli("plan", str(job))
        assert planned.returncode == 0, planned.stderr
        assert f"runs in: a container of image {tag} (built from build context {context}, Dockerfile)" in planned.stdout
        assert not _image_exists(tag)  # planning builds nothing
        result = run_cli("run", str(job))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "built as a uv environment" not in result.stdout + result.stderr
        assert _image_exists(tag)
        name = only_job(distrun_home)
        for rank in range(2):
            log = (distrun_home / "jobs" / name / "user_logs" / f"std_log_process_{rank:02d}.txt").read_text()
            assert f"rank {rank} made at {os.getpid()} context" in log
        assert containers_of(tag) == []
    finally:
        subprocess.run(["podman", "rmi", "--force", tag], capture_output=True, check=False)


def test_a_build_context_whose_base_image_is_not_here_is_built_as_a_uv_environment(tmp_path, image):
    from types import SimpleNamespace

    from distrun.environments.image_build import planned_build

    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM python:3.10-slim\nRUN pip install numpy\n")
    build = SimpleNamespace(path="context", dockerfile_path=None)
    planned, why = planned_build(build, tmp_path, tmp_path / "config.yaml")
    assert planned is None
    pull = "distrun pulls nothing: `podman pull python:3.10-slim`"
    assert why == f"its base image python:3.10-slim is not in podman's store ({pull})"
    (context / "Dockerfile").write_text(f"FROM {image}\nENV A=1\n")
    planned, why = planned_build(build, tmp_path, tmp_path / "config.yaml")
    assert planned is not None and why == ""
    assert planned.tag.startswith("localhost/distrun-build:") and planned.engine == "podman"


def _image_exists(tag: str) -> bool:
    return subprocess.run(["podman", "image", "exists", tag], check=False).returncode == 0


def test_a_curated_name_runs_in_its_image_when_the_engines_store_holds_it(image, run_cli, write_job, distrun_home):
    from distrun.environments.curated import find_curated

    name = "azureml:AzureML-acpt-pytorch-1.13-cuda11.7@latest"  # a name no other test runs
    curated = find_curated(name)
    assert curated is not None
    check = f"import os; print('in image', os.path.exists('/{MARKER}'))"
    job = write_job(f'command: python -c "{check}"\nenvironment: {name}\n')
    kept = run_cli("plan", str(job))
    assert kept.returncode == 0, kept.stderr
    assert "runs in: a container" not in kept.stdout  # not in the store: this Python, as before
    subprocess.run(["podman", "tag", image, curated.image], check=True, capture_output=True)
    try:
        result = run_cli("run", str(job))
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"runs each process in a container of image {curated.image} (podman)" in result.stdout + result.stderr
        assert "in image True" in result.stdout
    finally:
        # Only that name: `podman untag IMAGE` alone would take the test image's own name too.
        subprocess.run(["podman", "untag", curated.image, curated.image], capture_output=True, check=False)
