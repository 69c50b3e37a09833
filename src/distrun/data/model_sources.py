"""Where a model is registered from, as `az ml model create --path` takes it:

    ./model, /abs/model.pkl, file:///abs            the user's own file or folder
    azureml://jobs/<job>/outputs/<out>[/paths/<p>]  a completed job's output (a pipeline's by its
                                                    name, a sweep's: its best trial's)
    azureml://datastores/<ds>/paths/<p>             a datastore folder
    runs:/<run id>/<path>                           an artifact of a job's MLflow run

Everything but the first is something a job wrote, read by `model_files.copy_from_job` below a
root distrun trusts (the job's folder, the run's artifact folder). Pure resolution, no copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from distrun.core.errors import DistrunError

RUNS_PREFIX = "runs:/"
_ARTIFACTS = re.compile(r"^azureml://jobs/(?P<job>[^/]+)/outputs/artifacts/paths/(?P<name>[^/]+)/?$")


@dataclass(frozen=True)
class ModelSource:
    """What to copy: `root / relative`, written by a job (`from_job`) or the user's own."""

    root: Path
    relative: str
    from_job: bool
    job: str | None = None  # the job it came from, as the user named it
    run_id: str | None = None

    @property
    def path(self) -> Path:
        return self.root / self.relative if self.relative else self.root


def model_source(text: str, cwd: Path, home: Path) -> ModelSource:
    """The source `text` names; DistrunError with a fix when it cannot be read here."""
    if text.startswith(RUNS_PREFIX):
        return _run_source(text, home)
    from distrun.data.locations import input_location

    logged = _logged_by_run(text, home)
    if logged is not None:
        return logged
    location = input_location(text, cwd, home)
    if location.url is not None or location.path is None:
        raise DistrunError(
            f"{text!r} is not a place distrun can register a model from",
            "download it first and give the local path, or give azureml://jobs/JOB/outputs/OUTPUT or runs:/RUN/PATH",
        )
    path = location.path
    if text.startswith("azureml://jobs/"):
        job = text.split("/")[3]
        return _beneath_jobs(path, home, job)
    if text.startswith("azureml:"):  # a datastore folder: jobs may write there too
        return ModelSource(path.parent, path.name, True)
    if not path.exists():
        raise DistrunError(f"{path} does not exist", "give the model's file or folder")
    return ModelSource(path, "", False)


def _logged_by_run(text: str, home: Path) -> ModelSource | None:
    """`azureml://jobs/JOB/outputs/artifacts/paths/NAME` where the job's own files have no NAME:
    on Azure ML a job's artifacts are also what its MLflow run logged, so NAME is the run's
    artifact or logged model of that name (`mlflow.sklearn.autolog()` logs one as `model`)."""
    match = _ARTIFACTS.match(text)
    store = home / "mlflow.db"
    if match is None or not store.is_file():
        return None
    from distrun.data.locations import job_output_path
    from distrun.metrics.sqlite_store import job_run_artifacts

    job, name = match.group("job"), match.group("name").strip("/")
    if job_output_path(home, job, "artifacts", name).exists():
        return None  # the job's own ./outputs/NAME... as always
    folder = job_run_artifacts(store, job, name)
    artifacts = home / "mlartifacts"
    if folder is None or not folder.is_relative_to(artifacts):
        return None
    return ModelSource(artifacts, str(folder.relative_to(artifacts)), True, job)


def _beneath_jobs(path: Path, home: Path, job: str) -> ModelSource:
    """A job's output: read below that job's folder when it lies there (the usual place)."""
    jobs = home / "jobs"
    try:
        parts = path.relative_to(jobs).parts
    except ValueError:  # an output written to a datastore
        return ModelSource(path.parent, path.name, True, job)
    return ModelSource(jobs / parts[0], "/".join(parts[1:]), True, job)


def _run_source(text: str, home: Path) -> ModelSource:
    from distrun.metrics.sqlite_store import artifact_folder, run_job_name

    run_id, _, inner = text[len(RUNS_PREFIX) :].lstrip("/").partition("/")
    store = home / "mlflow.db"
    folder = artifact_folder(store, run_id) if run_id and store.is_file() else None
    if folder is None:
        raise DistrunError(
            f"{text}: there is no MLflow run {run_id!r} with local artifacts in distrun's tracking store",
            "give the run id of a distrun job (MLFLOW_RUN_ID, shown by `distrun job show -o json`)",
        )
    parts = [p for p in inner.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise DistrunError(f"{text}: '..' leaves the run's artifacts", "give a path inside the run's artifacts")
    return ModelSource(folder, "/".join(parts), True, run_job_name(store, run_id), run_id)
