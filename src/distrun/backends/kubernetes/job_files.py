"""Where a Kubernetes job's own files live in its job folder, and the small ones read back on every look.

Nothing here asks the cluster: the job folder is on the submitting machine, and it is all that
is left of a job once Kubernetes removed its pods and objects.

k8s/objects.json       the objects created, in the order they were created
k8s/layout.json        the pod layout (`PodLayout`) the objects were rendered for
k8s/cancel             the time `distrun job cancel` asked, written before the objects are deleted
k8s/stopping           when distrun first began stopping the job's remaining pods
k8s/log_offsets.json   how far each pod's log was read (`collect`)
k8s/collect.lock       held while logs and outcomes are brought in (`collect.collecting`)
k8s/outcomes/POD.json  each pod agent's outcome, with the attempt (JobSet restart) of its pod
k8s/outputs/POD.*      a pod's outputs archive while its log records come in (`output_records`)
k8s/attempt            the attempt whose logs user_logs/ holds
k8s/preemptions        JobSet's count of restarts for disrupted pods, kept for when the JobSet is gone
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distrun.backends.kubernetes.pods import PodLayout, PodRole
from distrun.core.file_modes import write_file_beneath
from distrun.core.safe_files import SMALL_FILE_LIMIT, read_text
from distrun.spec.models import JobLimits, JobSpec
from distrun.store.layout import JobFolder


class K8sPaths:
    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir  # everything below is written without following a link (`write_file_beneath`)
        self.folder = job_dir / "k8s"
        self.objects = self.folder / "objects.json"
        self.layout = self.folder / "layout.json"
        self.cancel = self.folder / "cancel"
        self.stopping = self.folder / "stopping"
        self.offsets = self.folder / "log_offsets.json"
        self.lock = self.folder / "collect.lock"
        self.outcomes = self.folder / "outcomes"
        self.outputs = self.folder / "outputs"
        self.attempt = self.folder / "attempt"  # the attempt whose logs user_logs/ holds
        self.preemptions = self.folder / "preemptions"


def write_json(paths: K8sPaths, path: Path, data: Any) -> None:
    """`data` as indented JSON, replacing the file at once (a reader never sees half of it)."""
    write_small(paths, path, json.dumps(data, indent=2).encode("utf-8"))


def write_small(paths: K8sPaths, path: Path, data: bytes) -> None:
    """`data` into `path` of the job folder, whole, never through a link planted on the way."""
    write_file_beneath(paths.job_dir, path, data)


def save_layout(paths: K8sPaths, layout: PodLayout) -> None:
    write_json(paths, paths.layout, dataclasses.asdict(layout))


def load_layout(folder: JobFolder) -> PodLayout:
    data = json.loads(read_text(K8sPaths(folder.root).layout, root=folder.root))
    return _layout_from(data)


def _layout_from(data: Mapping[str, Any]) -> PodLayout:
    roles = tuple(PodRole(**role) for role in data["roles"])
    return PodLayout(data["object_name"], bool(data["jobset"]), roles)


def note_cancel(paths: K8sPaths) -> None:
    """The time of the first cancel request: a failure before it still wins."""
    if not paths.cancel.exists():
        write_small(paths, paths.cancel, f"{time.time()}\n".encode())


def stopping_for(paths: K8sPaths) -> float:
    """Seconds since distrun first began stopping the job's remaining pods (this call, the first time)."""
    try:
        since = float(read_text(paths.stopping, SMALL_FILE_LIMIT))
    except (OSError, ValueError):
        since = time.time()
        write_small(paths, paths.stopping, f"{since}\n".encode())
    return time.time() - since


def shown_attempt(paths: K8sPaths) -> int:
    """The attempt whose logs user_logs/ holds: the latest seen (the JobSet and its pods may be gone since)."""
    try:
        return int(read_text(paths.attempt, SMALL_FILE_LIMIT))
    except (OSError, ValueError):
        return 0


def show_attempt(paths: K8sPaths, attempt: int) -> None:
    write_small(paths, paths.attempt, f"{attempt}\n".encode())


def kept_preemptions(paths: K8sPaths, seen: int | None) -> int:
    """The JobSet's count of restarts for disrupted pods: `seen` kept, or, without a JobSet, the last kept."""
    if seen is None:
        try:
            return int(read_text(paths.preemptions, SMALL_FILE_LIMIT))
        except (OSError, ValueError):
            return 0
    with contextlib.suppress(OSError):
        write_small(paths, paths.preemptions, f"{seen}\n".encode())
    return seen


def job_limits(folder: JobFolder) -> JobLimits:
    """The job's limits from its job.json; the defaults (no restarts) when it cannot be read."""
    try:
        return JobSpec.model_validate(json.loads(read_text(folder.job_json, root=folder.root))).limits
    except (OSError, ValueError):
        return JobLimits()


def planned_processes(folder: JobFolder) -> list[dict[str, Any]]:
    """The plan's processes (plan.json), for those whose pods went before they reported; [] unreadable."""
    try:
        plan = json.loads(read_text(folder.plan_json, root=folder.root))
        return [p for node in plan["nodes"] for p in node["processes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []
