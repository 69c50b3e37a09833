"""On the 2-node Slurm cluster, a job whose ranks print nothing but log a metric is not hung.

Every node's agent asks the tracking server its ranks log to (`distrun.metrics.run_clock`), so
node 1, whose rank neither prints nor logs, counts rank 0's metrics as its progress too. The
same `run_node` path runs Ray's and Kubernetes' nodes; the reader itself is
tests/unit/test_run_clock.py.
"""

from __future__ import annotations

import json

import pytest

from support.hang_jobs import METRICS_ONLY
from support.jobs import record
from support.mlflow_store import tracking_of

pytestmark = pytest.mark.slow  # `job create` makes the MLflow store, and the server starts mlflow

HANG_TIMEOUT = 5
STEPS = 10  # 9 metrics 2 s apart: silent for more than three hang timeouts


@pytest.fixture(autouse=True)
def mlflow_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRUN_MLFLOW", "1")  # the root conftest turns it off for every other test


def test_a_two_node_job_that_only_logs_metrics_on_node_0_is_not_hung(run_cli, write_job, hpc, distrun_home):
    job = write_job(
        f"command: python train.py\ncode: src\ncompute: {hpc}\nresources:\n  instance_count: 2\n",
        {"train.py": METRICS_ONLY.replace("{steps}", str(STEPS))},
    )
    done = run_cli("run", str(job), "--name", "logging", "--hang-timeout", str(HANG_TIMEOUT), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rec = record(distrun_home, "logging")
    assert rec["status"] == "Completed", rec["reason"]
    folder = distrun_home / "jobs" / "logging"
    assert float((folder / "code" / "silent.txt").read_text()) > 3 * HANG_TIMEOUT
    assert not (folder / "hang").exists()
    tracking = tracking_of(distrun_home, "logging")
    assert tracking["rank_tracking_uri"].startswith("http://"), tracking  # through distrun's server
    assert json.loads(run_cli("job", "show", "logging", "-o", "json").stdout)["metrics"] == {"loss": 0.1}
