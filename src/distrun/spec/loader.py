"""Load a job (YAML file or plain data from the SDK) into a validated `JobSpec`.

Steps: read YAML with positions -> apply `--set` overrides -> rewrite older forms ->
pydantic validation -> semantic checks (references, reserved variables, paths). Every
problem found becomes a `Problem` with file:line:col, key path and a fix; all problems are
reported together, and nothing runs while there is one.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.errors import Position, Problem, ValidationError
from distrun.spec import models
from distrun.spec.command_template import references
from distrun.spec.normalize import normalize
from distrun.spec.overrides import apply_overrides
from distrun.spec.source_map import KeyPath, SourceMap, format_key_path
from distrun.spec.yaml_source import read_yaml_file

REMOTE_SCHEMES = ("azureml:", "https://", "http://", "wasbs://", "abfss://", "adl://", "s3://", "gs://")


@dataclass
class LoadedJob:
    spec: models.JobSpec
    base_dir: Path  # relative paths in the job resolve against this folder
    source: str  # the job file, or "<python>" for SDK-built jobs
    source_map: SourceMap

    def position(self, *path: str | int) -> Position:
        return self.source_map.find(tuple(path))


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
    smap = smap or SourceMap(source)
    data = apply_overrides(data, smap, list(overrides))
    if data is None:
        raise ValidationError(
            [Problem("the job is empty", "", Position(source, 1, 1), "a job needs at least `command:`")]
        )
    if not isinstance(data, dict):
        raise ValidationError(
            [
                Problem(
                    f"a job is a mapping of keys, not a {type(data).__name__}",
                    "",
                    smap.find(()),
                    "start the file with keys such as `command:`",
                )
            ]
        )
    data = normalize(data, smap)
    try:
        spec = models.JobSpec.model_validate(data)
    except Exception as exc:  # pydantic.ValidationError; imported lazily
        if type(exc).__name__ != "ValidationError":
            raise
        raise ValidationError(_translate(exc, data, smap)) from None
    loaded = LoadedJob(spec, base_dir, source, smap)
    problems = semantic_problems(loaded)
    if problems:
        raise ValidationError(problems)
    return loaded


# ---------------------------------------------------------------- pydantic errors


def _fields_at(path: KeyPath, data: Any) -> list[str]:
    """The keys the model allows at `path` (for 'did you mean')."""
    model: Any = models.JobSpec
    node = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
        if model is models.JobSpec and part == "distribution":
            kind = str((node or {}).get("type", "")).lower() if isinstance(node, dict) else ""
            model = {
                "pytorch": models.PyTorchDistribution,
                "tensorflow": models.TensorFlowDistribution,
                "mpi": models.MpiDistribution,
                "ray": models.RayDistribution,
            }.get(kind)
        elif model is models.JobSpec and part in ("inputs", "outputs"):
            model = part
        elif model == "inputs":
            model = models.LiteralInput if models._input_kind(node) == "literal_object" else models.DataInput
        elif model == "outputs":
            model = models.OutputSpec
        elif isinstance(model, type) and issubclass(model, models.StrictModel):
            field = model.model_fields.get(part)
            model = _model_of(field.annotation) if field else None
        else:
            model = None
        if model is None:
            return []
    if isinstance(model, type) and issubclass(model, models.StrictModel):
        return [f.alias or name for name, f in model.model_fields.items()]
    return []


def _model_of(annotation: Any) -> Any:
    import typing

    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, models.StrictModel):
            return candidate
    return None


def _data_path(loc: tuple[Any, ...], data: Any, error_type: str) -> KeyPath:
    """Drop union tags and branch names pydantic puts in `loc` but the document lacks."""
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            path.append(part)
            node = node[part]
        elif last and error_type == "missing":
            path.append(part)
        elif last and error_type == "extra_forbidden":
            path.append(part)
        # else: a union tag such as 'pytorch', 'data', 'str' or 'function-after[...]'
    return tuple(path)


def _describe(err: dict[str, Any]) -> tuple[str, str]:
    """(what is wrong, how to fix it) for one pydantic error."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = err.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    if kind == "missing":
        return "required key is missing", "add it"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {shown}", "write a number such as 2, without quotes"
    if kind in ("float_type", "float_parsing"):
        return f"expected a number, got {shown}", "write a number such as 3600"
    if kind in ("string_type",):
        return f"expected a string, got {shown}", "quote the value"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {shown}", "write true or false"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping (key: value), got {shown}", "indent the keys under this one"
    if kind == "list_type":
        return f"expected a list, got {shown}", "write [a, b] or one '- item' per line"
    if kind == "literal_error":
        return f"got {shown}, expected one of {ctx.get('expected')}", f"use one of {ctx.get('expected')}"
    if kind in ("greater_than_equal", "greater_than"):
        limit = ctx.get("ge", ctx.get("gt"))
        rel = "at least" if kind == "greater_than_equal" else "more than"
        return f"must be {rel} {limit}, got {shown}", f"use a value {rel} {limit}"
    if kind in ("less_than_equal", "less_than"):
        limit = ctx.get("le", ctx.get("lt"))
        return f"must be at most {limit}, got {shown}", f"use a value of at most {limit}"
    if kind == "string_pattern_mismatch":
        return f"{shown} does not match {ctx.get('pattern')}", "see the allowed form above"
    if kind == "string_too_short":
        return "must not be empty", "give a value"
    if kind == "union_tag_invalid":
        return (f"unknown type {ctx.get('tag')!r}", f"use one of {ctx.get('expected_tags')} (any letter case)")
    if kind == "union_tag_not_found":
        return "`type` is missing", f"add type: one of {', '.join(models.DISTRIBUTION_TYPES)}"
    if kind == "input_shape":
        return err["msg"] + f", got {shown}", "see the inputs section of the README"
    return err["msg"], ""


def _translate(exc: Any, data: Any, smap: SourceMap) -> list[Problem]:
    by_path: dict[KeyPath, list[dict[str, Any]]] = {}
    for err in exc.errors():
        path = _data_path(tuple(err["loc"]), data, err["type"])
        by_path.setdefault(path, []).append(err)
    problems = []
    for path, errs in by_path.items():
        key = format_key_path(path)
        where = smap.find(path)
        extras = [e for e in errs if e["type"] == "extra_forbidden"]
        if extras:
            allowed = _fields_at(path[:-1], data)
            close = difflib.get_close_matches(str(path[-1]), allowed, n=1, cutoff=0.6)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else (f"allowed keys here: {', '.join(allowed)}" if allowed else "remove it")
            )
            problems.append(Problem(f"unknown key {path[-1]!r}", key, where, hint))
            continue
        if len(errs) > 1 and all(e["type"].endswith("_type") for e in errs):
            got = errs[0].get("input")
            kinds = sorted(
                {e["type"].removesuffix("_type").replace("model", "mapping").replace("dict", "mapping") for e in errs}
            )
            problems.append(Problem(f"expected {' or '.join(kinds)}, got {type(got).__name__}", key, where, ""))
            continue
        message, hint = _describe(errs[0])
        problems.append(Problem(message, key, where, hint))
    return problems


# ---------------------------------------------------------------- semantic checks


def semantic_problems(job: LoadedJob) -> list[Problem]:
    return [*_env_problems(job), *_reference_problems(job), *_path_problems(job)]


def _env_problems(job: LoadedJob) -> list[Problem]:
    problems = []
    for key in job.spec.environment_variables:
        if key in models.RESERVED_ENV_VARS or key.startswith(models.RESERVED_ENV_PREFIXES):
            problems.append(
                Problem(
                    f"{key} is set by distrun for every process and cannot be set here",
                    f"environment_variables.{key}",
                    job.position("environment_variables", key),
                    "remove it; distrun computes it from resources and distribution (only MASTER_PORT may be pinned)",
                )
            )
    return problems


def _reference_problems(job: LoadedJob) -> list[Problem]:
    refs, unknown = references(job.spec.command)
    where = job.position("command")
    problems = []
    for expr in unknown:
        problems.append(
            Problem(
                f"unsupported expression {expr}",
                "command",
                where,
                "only ${{inputs.NAME}} and ${{outputs.NAME}} can be used in a command",
            )
        )
    for ref in refs:
        table = job.spec.inputs if ref.kind == "inputs" else job.spec.outputs
        if ref.name in table or ref.optional:
            continue
        close = difflib.get_close_matches(ref.name, list(table), n=1)
        hint = f"did you mean {ref.kind}.{close[0]}?" if close else f"add it under `{ref.kind}:`"
        problems.append(
            Problem(
                f"${{{{{ref.kind}.{ref.name}}}}} refers to an undefined {ref.kind[:-1]} {ref.name!r}",
                "command",
                where,
                hint,
            )
        )
    return problems


def local_path(job: LoadedJob, text: str) -> Path | None:
    """A local path or file:// URL resolved against the job's folder; None for remote URIs."""
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif text.startswith(REMOTE_SCHEMES) or "://" in text:
        return None
    path = Path(text).expanduser()
    return path if path.is_absolute() else (job.base_dir / path)


def _path_problems(job: LoadedJob) -> list[Problem]:
    problems = []
    if job.spec.code is not None:
        code = local_path(job, job.spec.code)
        if code is None:
            problems.append(
                Problem(
                    f"code {job.spec.code!r} is not a local folder",
                    "code",
                    job.position("code"),
                    "give a folder on this machine",
                )
            )
        elif not code.is_dir():
            what = "is not a folder" if code.exists() else "does not exist"
            problems.append(
                Problem(
                    f"code folder {code} {what}",
                    "code",
                    job.position("code"),
                    "point `code` at the folder holding your scripts (relative to the job file)",
                )
            )
    for name, value in job.spec.inputs.items():
        if not isinstance(value, models.DataInput):
            continue
        where = job.position("inputs", name, "path")
        path = local_path(job, value.path)
        if path is None:
            problems.append(
                Problem(
                    f"input {name}: {value.path!r} is not on this machine",
                    f"inputs.{name}.path",
                    where,
                    "distrun reads local paths and file:// URLs; download the data first",
                )
            )
        elif not path.exists():
            problems.append(
                Problem(
                    f"input {name}: {path} does not exist",
                    f"inputs.{name}.path",
                    where,
                    "check the path (relative paths start at the job file's folder)",
                )
            )
        elif value.type == "uri_file" and not path.is_file():
            problems.append(
                Problem(
                    f"input {name} is uri_file but {path} is not a file",
                    f"inputs.{name}.path",
                    where,
                    "use type: uri_folder for a folder",
                )
            )
        elif value.type == "uri_folder" and not path.is_dir():
            problems.append(
                Problem(
                    f"input {name} is uri_folder but {path} is not a folder",
                    f"inputs.{name}.path",
                    where,
                    "use type: uri_file for a single file",
                )
            )
    return problems
