"""Load a job (YAML file or plain data from the SDK) into a validated `JobSpec`.

Steps: read YAML with positions -> apply `--set` overrides -> rewrite older forms ->
pydantic validation -> semantic checks (references, reserved variables, paths). Every
problem found becomes a `Problem` with file:line:col, key path and a fix; all problems are
reported together, and nothing runs while there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.core.errors import Problem, ValidationError
from distrun.loading import checks
from distrun.loading.checks_tensorflow import tensorflow_problems
from distrun.loading.raw_checks import in_file_order, raw_problems
from distrun.loading.spark_loader import is_spark_document, load_spark_data
from distrun.spec import models, paths
from distrun.spec.job_kind import not_a_command_job
from distrun.spec.loaded import LoadedJob, loaded_job
from distrun.spec.model_errors import ModelError, translate
from distrun.spec.normalize import normalize
from distrun.spec.overrides import apply_overrides
from distrun.spec.paths import REMOTE_SCHEMES
from distrun.spec.port_overrides import refusing_unknown_ports
from distrun.spec.source_map import SourceMap
from distrun.spec.yaml_source import read_yaml_file

__all__ = ["REMOTE_SCHEMES", "LoadedJob", "load_job_data", "load_job_file", "local_path", "semantic_problems"]


def load_job_file(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedJob:
    file = Path(path)
    data, smap = read_yaml_file(file)
    return load_job_data(data, file.resolve().parent, str(file), overrides, smap)


def load_job_data(
    data: Any,
    base_dir: Path,
    source: str = "<python>",
    overrides: list[str] | tuple[str, ...] = (),
    smap: SourceMap | None = None,
) -> LoadedJob:
    if is_spark_document(data):  # `type: spark`: the command job that runs spark-submit
        return load_spark_data(data, base_dir, source, overrides, smap)
    smap = smap or SourceMap(source)
    written = data
    data = apply_overrides(data, smap, list(overrides))
    return refusing_unknown_ports(written, data, overrides, lambda: _validated(data, base_dir, source, smap))


def _validated(data: Any, base_dir: Path, source: str, smap: SourceMap) -> LoadedJob:
    if data is None:
        raise ValidationError(
            [
                Problem(
                    "the job is empty",
                    "",
                    smap.find(()),
                    "a job needs at least `command:`, e.g. `command: python train.py`",
                )
            ]
        )
    if not isinstance(data, dict):
        raise ValidationError(
            [
                Problem(
                    f"a job is a mapping of keys (command:, code:, ...), but this document is {_kind_name(data)}",
                    "",
                    smap.find(()),
                    "start the file with top-level keys such as `command:`, without a leading '- '",
                )
            ]
        )
    other_kind = not_a_command_job(data, smap)
    if other_kind is not None:
        raise ValidationError([other_kind])
    data = normalize(data, smap)
    try:
        spec = models.JobSpec.model_validate(data)
    except ModelError as exc:
        # What can be checked without a valid schema is reported in the same round.
        raise ValidationError(in_file_order([*translate(exc, data, smap), *raw_problems(data, smap)])) from None
    loaded = loaded_job(spec, base_dir, source, smap)  # an AutoML job's search is one
    problems = semantic_problems(loaded)
    if problems:
        raise ValidationError(in_file_order(problems))
    return loaded


def _kind_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return f"the value {value!r}"


def candidate_problems(document: Any, base_dir: Path, source: str, smap: SourceMap) -> list[Problem]:
    """The problems of a command job document distrun made (a pipeline's step with its inputs
    bound, a sweep's trial at example values), found as a job file's are: the schema's, or once
    it is valid, the checks' (`semantic_problems`); [] when it would load."""
    try:
        document = normalize(document, smap)
        spec = models.JobSpec.model_validate(document)
    except ValidationError as exc:
        return exc.problems
    except ModelError as exc:
        return [*translate(exc, document, smap), *raw_problems(document, smap)]
    return semantic_problems(LoadedJob(spec, base_dir, source, smap))


def semantic_problems(job: LoadedJob) -> list[Problem]:
    """Problems of a schema-valid job: undefined references, reserved variables, missing paths,
    and the rules of its distribution type."""
    return [*checks.semantic_problems(job.spec, job.base_dir, job.position), *tensorflow_problems(job)]


def local_path(job: LoadedJob, text: str) -> Path | None:
    """A local path or file:// URL resolved against the job's folder; None for remote URIs."""
    return paths.local_path(job.base_dir, text)
