"""What the submitting side and a pod's agent agree on: names of the job's files and its pod records.

Both sides import this module; the pod's side imports only the standard library (and distrun's
own pure-Python modules, shipped to the pod in the job's ConfigMap), so nothing here may import
the job models or pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distrun.plan.model import Placement
from distrun.restarts.policy import RestartPolicy

# The ConfigMap's keys, mounted in every pod at `<work_dir>/files/`.
FILES_DIR = "files"
BUNDLE_KEY = "bundle.tgz"  # the job's files (bundle.py)
AGENT_ZIP_KEY = "distrun.zip"  # distrun's modules the pod runs (agent_zip.py)
AGENT_MODULE = "distrun.backends.kubernetes.pod_agent"
# The job's files in the bundle, which every pod plans from.
JOB_FILE = "job.json"
BINDINGS_FILE = "bindings.json"
PLACEMENT_FILE = "placement.json"
# Where a pod's distrun node agent reports its outcome (compact JSON; Kubernetes keeps 4 KiB).
TERMINATION_LOG = "termination-log"
# The agent's final log record: this prefix, then its outcome as JSON, on one line.
OUTCOME_MARK = "distrun-outcome: "


def placement_dict(where: Placement) -> dict[str, Any]:
    return {
        "hosts": list(where.hosts),
        "master_port": where.master_port,
        "task_ports": list(where.task_ports),
        "job_dir": where.job_dir,
        "run_id": where.run_id,
    }


def placement_from(data: Mapping[str, Any]) -> Placement:
    return Placement(
        hosts=tuple(data["hosts"]),
        master_port=int(data["master_port"]),
        task_ports=tuple(int(p) for p in data["task_ports"]),
        job_dir=str(data["job_dir"]),
        run_id=str(data["run_id"]),
    )


def pod_exit_codes(policy: RestartPolicy) -> list[int]:
    """limits.no_restart_exit_codes a pod can exit with (1-255): the pod agent exits with the
    failed rank's code when it is one of them, so a podFailurePolicy can match it."""
    return sorted(c for c in policy.no_restart_exit_codes if 0 < c < 256)
