"""Step reuse for a pipeline run: a step's key from the files it reads, the earlier run it may
reuse, and what a completed step leaves for later runs.

The key is `distrun.spec.pipeline_reuse.reuse_key` over the step's job document with its local
paths hashed by content (`distrun.core.content_hash`): its data inputs, the upstream outputs it
reads (by the folder the upstream job wrote, read as a job-writable folder: no link followed),
its code folder (what a snapshot of it copies) and its conda file; a sweep step's trial component's
code folder and conda file, in its own folder. The record of a completed step is kept in the store
(`distrun.store.step_reuse`) with the digests of its outputs (a sweep's: its best trial's); an
earlier run is reused only while its job is still recorded Completed and every output still has
that digest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrun.core.content_hash import DigestLimitError, content_digest
from distrun.core.errors import DistrunError
from distrun.core.job_status import JobStatus
from distrun.spec.pipeline_reuse import TRIAL, hashed_paths, reuse_key, sweep_key_document
from distrun.store import step_reuse
from distrun.store.step_reuse import CompletedStep

if TYPE_CHECKING:
    from distrun.spec.loaded_pipeline import PipelineStep

__all__ = [
    "CompletedStep",
    "DigestLimitError",
    "earlier_run",
    "output_digests",
    "pipeline_step_key",
    "remember_step",
    "step_key",
]


def _job_root(path: Path, home: Path) -> Path | None:
    """The job folder `path` lies in (its processes can write it), or None for a path elsewhere."""
    try:
        parts = path.relative_to(home / "jobs").parts
    except ValueError:
        return None
    return home / "jobs" / parts[0] if parts else None


def _digest(path: Path, home: Path, *, code: bool = False) -> str:
    from distrun.store.snapshot import code_skip

    root = _job_root(path, home)
    skip = code_skip(path, (home,)) if code and path.is_dir() else None
    return content_digest(path, root=root, skip=skip)


def pipeline_step_key(step: PipelineStep, document: dict[str, Any], home: Path) -> str | None:
    """The reuse key of a pipeline step, its job (or sweep) `document` with its upstream inputs
    bound: a sweep step's covers its trial component, whose paths start at its own folder."""
    if step.trial is None:
        return step_key(document, step.base_dir, home)
    return step_key(sweep_key_document(document, step.trial.data), step.base_dir, home, step.trial.base_dir)


def step_key(document: dict[str, Any], base_dir: Path, home: Path, trial_dir: Path | None = None) -> str | None:
    """The reuse key of a step's job document (its upstream inputs bound to the upstream jobs'
    outputs); None when a path it names cannot be read now (the step then runs, and loading its
    job says what is wrong). `trial_dir`: where a sweep step's trial component's paths start."""
    from distrun.data.locations import input_location

    digests = {}
    for key_path, text in hashed_paths(document).items():
        folder = trial_dir if key_path[0] == TRIAL and trial_dir is not None else base_dir
        try:
            if key_path[0] == "inputs":
                where = input_location(text, base_dir, home).path
            else:
                where = Path(text) if Path(text).is_absolute() else folder / text
            if where is None:
                continue  # a URL: counted by its text
            digests[key_path] = _digest(where, home, code=key_path in (("code",), (TRIAL, "code")))
        except DigestLimitError:
            raise  # the caller says that the step is not reused, and why
        except (OSError, DistrunError):
            return None
    return reuse_key(document, digests)


def output_digests(home: Path, job: str, outputs: list[str]) -> dict[str, str]:
    """The content digest of each named output of the completed `job`, where it wrote it.
    Raises DistrunError (the job is not Completed, or has no such output) or OSError."""
    from distrun.data.locations import job_output_path

    return {name: _digest(job_output_path(home, job, name), home) for name in outputs}


def remember_step(home: Path, key: str, job: str, step: str, pipeline: str, outputs: list[str]) -> str | None:
    """Record the completed `job` as the run of `key`; why it could not be, or None."""
    try:
        digests = output_digests(home, job, outputs)
        step_reuse.remember(home, key, CompletedStep(job=job, step=step, pipeline=pipeline, outputs=digests))
    except (OSError, DistrunError) as exc:
        return exc.message if isinstance(exc, DistrunError) else str(exc)
    return None


def earlier_run(home: Path, key: str) -> tuple[CompletedStep | None, str | None]:
    """The completed run of `key` that may be reused now, or None with why not (None: there is none)."""
    from distrun.store.index import JobIndex

    found = step_reuse.completed_run(home, key)
    if found is None:
        return None, None
    try:
        # Checked even for a step without outputs: a job since canceled, or removed, is not reused.
        status = JobIndex(home / "jobs.db").get(found.job).status
        if status != JobStatus.COMPLETED:
            return None, f"the earlier run {found.job} cannot be reused: its job is {status} now"
        now = output_digests(home, found.job, list(found.outputs))
    except DistrunError as exc:
        return None, f"the earlier run {found.job} cannot be reused: {exc.message}"
    except OSError as exc:
        return None, f"the earlier run {found.job} cannot be reused: its outputs cannot be read ({exc})"
    changed = sorted(name for name, digest in found.outputs.items() if now.get(name) != digest)
    if changed:
        names = ", ".join(changed)
        return None, f"the earlier run {found.job} cannot be reused: its output {names} changed since it completed"
    return found, None
