"""A node of many processes under a low limit on open files: the agent makes room for itself.

The agent holds 3 descriptors a process; under the usual soft limit of 1024 a node of more
than ~300 processes used to fail with "Too many open files". Here the soft limit is 64 and the
node has 40 processes (120 descriptors).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from support.cli import cli_env


def _low_soft_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))


def test_a_node_needing_more_descriptors_than_the_soft_limit_runs(tmp_path: Path, distrun_home: Path):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or hard >= 1024, "the hard limit leaves the agent no room to test"
    job = tmp_path / "job.yml"
    job.write_text(
        json.dumps(
            {
                "command": "sh -c 'ulimit -Sn'",
                "resources": {"instance_count": 1},
                "distribution": {"type": "pytorch", "process_count_per_instance": 40},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "distrun", "run", str(job)],
        capture_output=True,
        text=True,
        timeout=300,
        env=cli_env(distrun_home),
        preexec_fn=_low_soft_limit,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Status: Completed" in done.stdout
    # Every rank ran, and saw the raised soft limit (at least what the agent needed).
    limits = [int(line.split()[-1]) for line in done.stdout.splitlines() if line.startswith("[0/")]
    assert len(limits) == 40 and min(limits) >= 3 * 40
