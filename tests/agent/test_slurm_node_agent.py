"""The Slurm node agent as a process: a node that cannot see the job folder or cannot plan says why
and leaves a failed outcome; the old --free-ports option still works for scripts already written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.cli import SRC


def test_a_node_that_cannot_see_the_job_folder_says_why(tmp_path: Path) -> None:
    env = {"SLURM_NODEID": "1", "SLURMD_NODENAME": "n2", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]"}
    result = subprocess.run(
        [sys.executable, "-m", "distrun.backends.slurm.node_agent", "--job-dir", str(tmp_path / "not-here")],
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)},
        timeout=60,
    )
    assert result.returncode == 2
    assert "distrun node agent on n2: cannot read the job folder" in result.stderr
    assert "DISTRUN_HOME must be on a filesystem every node mounts at the same path" in result.stderr


def test_a_node_that_cannot_plan_writes_a_failed_outcome(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    (job_dir / "slurm").mkdir(parents=True)
    (job_dir / "job.json").write_text('{"command": "true", "resources": {"instance_count": 2}}')
    (job_dir / "bindings.json").write_text('{"inputs": {}, "outputs": {}, "input_paths": {}}')
    env = {"SLURM_NODEID": "1", "SLURMD_NODENAME": "n2", "SLURM_JOB_ID": "7"}  # no SLURM_JOB_NODELIST
    result = subprocess.run(
        [sys.executable, "-m", "distrun.backends.slurm.node_agent", "--job-dir", str(job_dir)],
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)},
        timeout=60,
    )
    assert result.returncode == 1
    outcome = json.loads((job_dir / "slurm" / "node_01.json").read_text())
    assert outcome["status"] == "Failed"
    assert outcome["reason"].startswith("the node agent on node 1 (n2) could not start: not inside a Slurm job step")


def test_the_old_free_ports_option_still_prints_ports_for_batch_scripts_already_written() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "distrun.backends.slurm.node_agent", "--free-ports", "2"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert len({int(port) for port in result.stdout.strip().split(",")}) == 2
