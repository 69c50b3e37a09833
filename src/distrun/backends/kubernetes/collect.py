"""Pod logs and outcomes, brought into the job folder on this machine.

Each agent pod's log holds its processes' lines with their `[label] ` prefixes (the live
stream of the agent inside) and, last, the agent's outcome record. The lines are split back
into `user_logs/<the process's log file>` by label, so `job logs/stream/download` read a
Kubernetes job's logs as they read a local one's; the whole pod log is kept in
`system_logs/pod_<name>.txt`, but the records that carry the pod's outputs back
(`output_records`), which are unpacked into the job folder instead. Collecting is incremental (byte offsets in
`k8s/log_offsets.json`) and serialized by a lock, so two shells never write a line twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from distrun.backends.kubernetes.job_files import K8sPaths, write_small
from distrun.backends.kubernetes.output_records import is_output_record, receive
from distrun.backends.kubernetes.pod_contract import OUTCOME_MARK
from distrun.backends.kubernetes.state import ATTEMPT_KEY, PodOutcome
from distrun.core.file_modes import open_append_beneath
from distrun.core.safe_files import read_text
from distrun.store.layout import JobFolder
from distrun.store.log_labels import log_labels


@contextlib.contextmanager
def collecting(paths: K8sPaths) -> Iterator[None]:
    with os.fdopen(open_append_beneath(paths.job_dir, paths.lock), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def label_files(folder: JobFolder) -> dict[str, str]:
    """stream label -> log file name, from the job's plan."""
    return {label: name for name, (label, _node) in log_labels(folder).items()}


def split_log(new: bytes, labels: Mapping[str, str]) -> tuple[dict[str, bytes], list[dict[str, Any]], list[bytes]]:
    """Whole lines of a pod log -> bytes per log file, the outcome records and the outputs records found."""
    files: dict[str, list[bytes]] = {}
    outcomes = []
    archive: list[bytes] = []
    mark = OUTCOME_MARK.encode()
    for line in new.splitlines(keepends=True):
        if is_output_record(line):
            archive.append(line)
            continue
        if line.startswith(mark):
            with contextlib.suppress(ValueError):
                outcomes.append(json.loads(line[len(mark) :]))
            continue
        if line.startswith(b"[") and b"] " in line:
            label, _, rest = line[1:].partition(b"] ")
            name = labels.get(label.decode("utf-8", "replace"))
            if name is not None:
                files.setdefault(name, []).append(rest)
    return {name: b"".join(parts) for name, parts in files.items()}, outcomes, archive


def _append(root: Path, path: Path, data: bytes) -> None:
    """`data` appended to `path` of the job folder `root`, its folder made where missing; no link
    planted on the way (at `user_logs/` say) is followed."""
    fd = open_append_beneath(root, path)
    with os.fdopen(fd, "ab") as handle:
        handle.write(data)


def collect_pod_log(
    folder: JobFolder,
    paths: K8sPaths,
    pod: str,
    log: bytes,
    labels: Mapping[str, str],
    user_logs: Path | None = None,
    attempt: int = 0,
) -> None:
    """Append what is new in `log` (whole lines) to the job's files; call under `collecting`.

    `user_logs`: where its processes' logs go (an earlier attempt's folder once the job restarted);
    `attempt`: the JobSet restart of the pod, kept with its outcome."""
    user_logs = user_logs if user_logs is not None else folder.user_logs
    try:
        offsets = json.loads(read_text(paths.offsets))
    except (OSError, ValueError):
        offsets = {}
    start = int(offsets.get(pod, 0))
    if len(log) < start:
        start = 0  # a pod of the same name was created again
    end = log.rfind(b"\n") + 1
    if end <= start:
        return
    new = log[start:end]
    per_file, outcomes, archive = split_log(new, labels)
    # The pod log as it was, but the outputs' records: said in a line each archive instead.
    kept = b"".join(line for line in new.splitlines(keepends=True) if not is_output_record(line))
    for record in archive:
        said = receive(record, pod, paths.outputs, folder.root)
        if said:
            kept += said.encode() + b"\n"
    _append(folder.root, folder.system_logs / f"pod_{pod}.txt", kept)
    for name, data in per_file.items():
        if "/" not in name and name.endswith(".txt"):
            _append(folder.root, user_logs / name, data)
    for outcome in outcomes:
        keep_outcome(paths, pod, outcome, attempt)
    offsets[pod] = end
    write_small(paths, paths.offsets, json.dumps(offsets).encode("utf-8"))


def keep_outcome(paths: K8sPaths, pod: str, outcome: dict[str, Any], attempt: int = 0) -> None:
    """A pod's outcome, kept in the job folder (a later, fuller report of the same pod replaces it),
    with the attempt (JobSet restart) of the pod that reported it."""
    if "/" in pod or pod.startswith("."):
        return
    outcome = {**outcome, ATTEMPT_KEY: attempt}
    write_small(paths, paths.outcomes / f"{pod}.json", json.dumps(outcome).encode("utf-8"))


def read_outcomes(paths: K8sPaths) -> dict[str, PodOutcome]:
    """Every pod's kept outcome, of every attempt, by pod name (the file's as written: `keep_outcome`)."""
    out = {}
    if paths.outcomes.is_dir():
        for file in paths.outcomes.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                out[file.stem] = PodOutcome.kept(json.loads(read_text(file)))
    return out
