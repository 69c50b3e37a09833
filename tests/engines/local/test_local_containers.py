"""A job with `environment.image` on local compute runs each rank in a podman container of the image.

The image is the test image (`support.container_image`): this machine's Python and the test
venv, mounted read-only, plus a marker file only the image has. podman comes from
scripts/deps/55-containers.sh.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from support.container_image import MARKER, built_test_image, container_mounts
from support.jobs import only_job, processes_of_job, record, wait_for

# The tests look at the containers of the test image, so they run one at a time.
pytestmark = pytest.mark.xdist_group("local-containers")

DDP_JOB = """
command: python check.py
code: src
environment:
  image: {image}
resources:
  instance_count: 2
limits:
  grace_period: 2
distribution:
  type: pytorch
  process_count_per_instance: 2
"""

CHECK = f"""
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * dist.get_rank()
dist.all_reduce(t)
inside = os.path.exists("/{MARKER}")
print(f"rank {{dist.get_rank()}} of {{dist.get_world_size()}} sum {{int(t.item())}} in image {{inside}}", flush=True)
with open(f"outputs/rank_{{dist.get_rank()}}.txt", "w") as handle:
    handle.write(os.environ["MASTER_ADDR"])
dist.destroy_process_group()
"""

HOLD = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("up", os.environ["RANK"], flush=True)
time.sleep(300)
"""


@pytest.fixture
def image(distrun_home: Path) -> str:
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run scripts/deps/55-containers.sh")
    distrun_home.mkdir(parents=True, exist_ok=True)
    (distrun_home / "config.yaml").write_text(json.dumps({"containers": {"mounts": container_mounts()}}))
    return built_test_image()


def _containers_of(image: str) -> list[str]:
    listed = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"ancestor={image}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


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
        written = folder / "code" / "outputs" / f"rank_{rank}.txt"
        assert written.read_text() == "127.0.0.1"
        assert (written.stat().st_uid, written.stat().st_gid) == (os.getuid(), os.getgid())
    assert not (Path("/") / MARKER).exists()  # the marker is the image's, not this machine's
    assert _containers_of(image) == []
    assert processes_of_job(name) == []


def test_podman_that_cannot_start_a_container_is_the_reason(image, run_cli, write_job, distrun_home):
    missing = distrun_home / "not-here"
    config = json.loads((distrun_home / "config.yaml").read_text())
    config["containers"]["mounts"].append(f"{missing}:/data")
    (distrun_home / "config.yaml").write_text(json.dumps(config))
    result = run_cli("run", str(write_job(DDP_JOB.format(image=image), {"check.py": CHECK})))
    assert result.returncode == 1
    rec = record(distrun_home, only_job(distrun_home))
    assert rec["status"] == "Failed"
    assert rec["reason"] == (
        f"podman could not start a container: statfs {missing}: no such file or directory; "
        "see docs/environments-and-data.md#containers"
    )
    assert _containers_of(image) == []


def test_sigkill_of_distrun_leaves_no_container(image, start_cli, write_job, distrun_home):
    proc = start_cli("run", str(write_job(DDP_JOB.format(image=image), {"check.py": HOLD})))
    logs = distrun_home / "jobs"

    def all_up() -> bool:
        found = list(logs.glob("*/user_logs/std_log_process_*.txt"))
        return len(found) == 4 and all("up " in path.read_text() for path in found)

    assert wait_for(all_up, timeout=60)
    assert len(_containers_of(image)) == 4
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_for(lambda: _containers_of(image) == [], timeout=30)
    assert record(distrun_home, only_job(distrun_home))["status"] != "Running"
