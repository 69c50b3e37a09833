"""An input's or output's `path`, as written in a job, -> where it is on this machine.

    ./data, /abs, file:///abs                      a local path (relative to the job file)
    azureml://datastores/<ds>/paths/<p>            the datastore's folder / <p> (also the long
                                                   azureml://subscriptions/.../workspaces/.../datastores/... form)
    azureml://jobs/<job>/outputs/<name>            a finished job's named output
    azureml:<name>:<version>, azureml:<name>@latest  a data asset (distrun data create); for an
                                                   input of a model type, a registered model
                                                   (distrun model create), as is
    azureml://registries/<reg>/models/<name>/versions/<v>   (an error: no registry is local)
    http(s)://...                                  downloaded into the cache when the job starts
    s3://, gs://, wasbs://, abfss://, ...           fetched through fsspec and its plugin
    a URL under a prefix of config.yaml's url_mirrors  its local copy (distrun.data.mirrors)

Resolution reads DISTRUN_HOME (config.yaml, the job index, assets) but never the network:
remote sources are only fetched by `fetch_input`, when a job is being prepared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from distrun.core.errors import DistrunError
from distrun.core.job_kind import JobKind
from distrun.core.user_paths import expand_user
from distrun.data.datastores import DATASTORE_URI as _DATASTORE
from distrun.data.mirrors import MIRRORED_SCHEMES, Mirror, mirrored
from distrun.data.remote_fs import FSSPEC_PLUGINS, fetch_remote, remote_fs_problem
from distrun.spec.paths import local_path
from distrun.spec.pipeline_models import RESERVED_OUTPUTS

if TYPE_CHECKING:
    from distrun.store.index import JobRecord

_JOB_OUTPUT = re.compile(r"^azureml://jobs/(?P<job>[^/]+)/outputs/(?P<out>[^/]+)/?(?:paths/(?P<sub>.*))?$")
_ASSET = re.compile(r"^azureml:(?!//)(?P<name>[^:@/]+)(?::(?P<version>[^:@/]+)|@(?P<label>[^:@/]+))?$")
HTTP_SCHEMES = ("http://", "https://")
MAX_ASSET_DEPTH = 8


@dataclass(frozen=True)
class Location:
    """A local path (`path`), or a remote source (`url`) fetched when the job starts."""

    path: Path | None = None
    url: str | None = None
    origin: str = ""  # what the user wrote, for messages
    mirror: Mirror | None = None  # the url_mirrors entry that gave `path` for a URL
    note: str = ""  # what the reference resolved to, in a few words, where `origin` does not say

    def source(self) -> str:
        """Where the data comes from, in a few words (`distrun plan` shows it per input)."""
        if self.note:
            return self.note
        if self.mirror is not None:
            mirror = self.mirror
            return f"local copy by url_mirrors at {mirror.where}: {mirror.prefix} -> {mirror.target}"
        if self.url is not None:
            how = "downloaded" if self.url.startswith(HTTP_SCHEMES) else "fetched through fsspec"
            return f"{how} into the cache when the job starts"
        if self.origin.startswith("azureml:"):
            return "resolved from " + self.origin
        return "local path"


MODEL_TYPES = ("custom_model", "mlflow_model", "triton_model")


def input_location(text: str, base_dir: Path, home: Path, depth: int = 0, kind: str = "uri_folder") -> Location:
    """Where an input's data is; a reference that cannot resolve raises DistrunError with a fix.
    `kind`: the input's type (a model type reads `azureml:` references as registered models)."""
    if kind in MODEL_TYPES:
        from distrun.data.model_versions import is_model_reference, model_by_reference

        if is_model_reference(text):
            from distrun.data.model_store import adopt_registered

            adopt_registered(home)  # a version a job registered with mlflow.register_model
            model = model_by_reference(home, text)
            note = f"registered model {model.name}:{model.version} ({model.type}), read-only in distrun's store"
            return Location(model.path, origin=text, note=note)
    match = _DATASTORE.match(text)
    if match:
        from distrun.data.datastores import datastore_path

        return Location(datastore_path(home, match.group("ds"), match.group("path")), origin=text)
    match = _JOB_OUTPUT.match(text)
    if match:
        return Location(job_output_path(home, match.group("job"), match.group("out"), match.group("sub")), origin=text)
    match = _ASSET.match(text)
    if match:
        return _asset_location(match, home, depth)
    scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if scheme in MIRRORED_SCHEMES:
        copy = mirrored(text, home)  # a local copy named in config.yaml: no download
        if copy is not None:
            return Location(copy.path, origin=text, mirror=copy.mirror)
    if text.startswith(HTTP_SCHEMES):
        _refuse_control_characters(text)
        return Location(url=text, origin=text)
    if scheme in FSSPEC_PLUGINS:
        remote_fs_problem(scheme)
        return Location(url=text, origin=text)
    if scheme not in (None, "file"):
        return Location(origin=text)  # not a place distrun can read
    return Location(local_path(base_dir, text), origin=text)


def _refuse_control_characters(url: str) -> None:
    """A URL holding a control character (raw, or a NUL written as %00) cannot be requested, and
    its file name could not be stored: said here, before anything is recorded."""
    for at, char in enumerate(url):
        if ord(char) < 0x20 or ord(char) == 0x7F:
            raise DistrunError(
                f"the URL {url!r} holds a control character ({char!r} at position {at})",
                "percent-encode it (a space is %20) or correct the URL",
            )
    if "%00" in url:
        raise DistrunError(f"the URL {url!r} holds a NUL character (%00)", "remove it from the URL")


def _asset_location(match: re.Match[str], home: Path, depth: int) -> Location:
    from distrun.data.assets import get_asset

    asset = get_asset(home, match.group("name"), match.group("version"), match.group("label"))
    if asset.job is not None:
        _job_must_be_completed(home, asset.job, f"data asset {asset.name}:{asset.version}")
    if depth >= MAX_ASSET_DEPTH:
        raise DistrunError(f"data asset {asset.name}:{asset.version} refers to assets {depth} levels deep")
    found = input_location(asset.path, Path("/"), home, depth + 1)
    return Location(found.path, found.url, origin=match.group(0), mirror=found.mirror)


def job_output_path(home: Path, job: str, output: str, sub: str | None = None) -> Path:
    """Where a completed job wrote its named output `output`. A sweep's outputs are its best
    trial's (a pipeline's sweep step is read so); a pipeline's, the step's that writes each."""
    import json

    from distrun.core.safe_files import read_text
    from distrun.store.layout import Layout

    record = _job_must_be_completed(home, job, f"job {job}'s output {output}")
    if record.kind is JobKind.PIPELINE:  # its outputs are its steps': the pipeline's names for them
        from distrun.store.pipeline_outputs import pipeline_outputs

        outputs_of = pipeline_outputs(record.steps)
        if output not in outputs_of:
            known = ", ".join(outputs_of) or "none"
            raise DistrunError(
                f"pipeline {job} has no output {output!r} (its outputs: {known})",
                f"a step's own output is azureml://jobs/{job}.STEP/outputs/NAME",
            )
        writer = outputs_of[output]
        return job_output_path(home, writer.job, writer.output, sub)
    if record.kind is JobKind.SWEEP:
        best = (record.sweep or {}).get("best") or {}
        if not best.get("job"):
            raise DistrunError(
                f"sweep {job} has no best trial (no completed trial logged its primary metric): it has no outputs",
                "see its trials with `distrun job show " + job + "`",
            )
        job = str(best["job"])
        _job_must_be_completed(home, job, f"the best trial of sweep {record.name}: job {job}'s output {output}")
    folder = Layout(home).job(job)
    if output in RESERVED_OUTPUTS:  # the job's artifact root: its ./outputs and ./logs, as Azure ML's
        return _inside_output(folder.code, job, sub)
    try:
        outputs = json.loads(read_text(folder.bindings_json, root=folder.root))["outputs"]
    except (OSError, ValueError, KeyError):
        outputs = {}
    if output not in outputs:
        known = ", ".join(sorted(outputs)) or "none"
        raise DistrunError(f"job {job} has no output {output!r} (its outputs: {known})", "check the output's name")
    return _inside_output(Path(outputs[output]), job, sub)


def _inside_output(path: Path, job: str, sub: str | None) -> Path:
    """`sub` (the `paths/...` of a job output's URI) inside the output at `path`."""
    parts = [p for p in (sub or "").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise DistrunError(f"{sub!r} leaves job {job}'s output with '..'", "write a path inside the output")
    return path.joinpath(*parts)


def _job_must_be_completed(home: Path, job: str, what: str) -> JobRecord:
    from distrun.store.index import JobIndex

    if not (home / "jobs.db").exists():
        raise DistrunError(f"{what}: there is no job named {job!r}", "see `distrun job list`")
    record = JobIndex(home / "jobs.db").get(job)  # an unknown name raises with its own hint
    if record.status != "Completed":
        raise DistrunError(
            f"{what}: job {job} is {record.status}, and its outputs are final only when it has completed",
            f"wait for it (distrun job stream {job}) or use another job's output",
        )
    return record


def output_location(path: str | None, output: str, job: str, home: Path) -> Path | None:
    """Where an output with a `path` is written; None: the job's own named-outputs folder.

    `${{name}}` and `${{output_name}}` in the path become the job's and the output's names,
    as in Azure ML. `azureml://jobs/...` (what a finished job reports) means the job's own folder.
    """
    if path is None or path.startswith("azureml://jobs/"):
        return None
    text = path.replace("${{name}}", job).replace("${{output_name}}", output)
    match = _DATASTORE.match(text)
    if match:
        from distrun.data.datastores import datastore_path

        return datastore_path(home, match.group("ds"), match.group("path"))
    if text.startswith("file://"):
        text = text[len("file://") :]
    if "://" in text or text.startswith("azureml:"):
        raise DistrunError(
            f"output {output}: {path!r} is not a place distrun can write",
            "use azureml://datastores/<datastore>/paths/<path> (a folder per datastore) or leave `path` out",
        )
    local = expand_user(Path(text))
    if not local.is_absolute():
        raise DistrunError(
            f"output {output}: the local path {path!r} is relative", "give an absolute path or a datastore URI"
        )
    return local


def job_output_uri(job: str, output: str) -> str:
    """How a finished job names its output for a later job's input."""
    return f"azureml://jobs/{job}/outputs/{output}"


def fetch_input(location: Location, home: Path, want_file: bool, materialize: bool, out: TextIO | None = None) -> Path:
    """The local path of `location`: its own, or (for a URL) its copy in the download cache."""
    if location.url is None:
        assert location.path is not None
        return location.path
    if location.url.startswith(HTTP_SCHEMES):
        from distrun.data.http_fetch import fetch_url

        return fetch_url(location.url, home, want_file, materialize, out)
    return fetch_remote(location.url, home, materialize, out)
