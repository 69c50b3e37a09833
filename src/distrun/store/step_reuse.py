"""The completed pipeline steps a later run may reuse, by reuse key (`distrun.spec.pipeline_reuse`).

    $DISTRUN_HOME/step_reuse/<key>.json   {"job": ..., "step": ..., "pipeline": ...,
                                           "outputs": {NAME: sha256 of its content}, "completed_at": ...}

Kept in the store, never in a job folder: a job's processes can write their own folder, so a
key or an output digest kept there could be forged. The digests of the outputs are taken when the
step's job completed; a later run hashes those outputs again and reuses the step only when they
are unchanged (a later job that read them, or anything else, may have written them since). The
newest completed run of a key replaces the one before.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from distrun.core.file_modes import make_dirs, write_file
from distrun.core.safe_files import read_text

FOLDER = "step_reuse"
MAX_RECORD_BYTES = 1 << 20


@dataclass(frozen=True)
class CompletedStep:
    job: str  # the job whose outputs a reusing step points at
    step: str
    pipeline: str
    outputs: dict[str, str] = field(default_factory=dict)  # output name -> content digest at completion
    completed_at: float = 0.0


def _path(home: Path, key: str) -> Path:
    if not key.isalnum():  # a hex digest: never a path of its own
        raise ValueError(f"not a reuse key: {key!r}")
    return home / FOLDER / f"{key}.json"


def remember(home: Path, key: str, step: CompletedStep) -> None:
    """Record `step` as the newest completed run of `key`."""
    path = _path(home, key)
    make_dirs(path.parent)
    record = {
        "job": step.job,
        "step": step.step,
        "pipeline": step.pipeline,
        "outputs": step.outputs,
        "completed_at": step.completed_at or time.time(),
    }
    write_file(path, json.dumps(record, sort_keys=True).encode("utf-8"))


def completed_run(home: Path, key: str) -> CompletedStep | None:
    """The newest completed run of `key`; None when there is none (or its record is unreadable)."""
    try:
        data = json.loads(read_text(_path(home, key), MAX_RECORD_BYTES))
        return CompletedStep(
            job=str(data["job"]),
            step=str(data["step"]),
            pipeline=str(data["pipeline"]),
            outputs={str(name): str(digest) for name, digest in dict(data["outputs"]).items()},
            completed_at=float(data["completed_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
